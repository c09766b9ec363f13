"""What the index holds, kept in memory so that filters which cannot exclude anything stay out
of the query. Every prefilter clause is evaluated over every row: at 100k chunks each one cost
~5 ms per arm (make bench), and most queries carry clauses (`defaultExclude`, lifecycle) that
match nothing in most indexes. Leaving such a clause out changes no result.

Copy-on-write: the store builds a new `IndexFacts` on each write and swaps the reference, so
searches never see a set change under them and never wait for a write.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class IndexFacts:
    paths: dict[str, frozenset[str]] = field(default_factory=dict)  # folder -> relative paths
    hidden_status: bool = False  # some chunk is superseded or archived (never reset: conservative)
    _contains: dict[str, bool] = field(default_factory=dict, compare=False)  # fragment -> answer

    def folders_outside(self, wanted: Iterable[str]) -> bool:
        """Rows of a folder not in `wanted` exist, so a folder clause can exclude something."""
        return bool(set(self.paths) - set(wanted))

    def any_path_contains(self, fragment: str) -> bool:
        """Some indexed path contains `fragment` (case-insensitive), so its NOT LIKE can exclude."""
        fragment = fragment.lower()
        if fragment not in self._contains:
            self._contains[fragment] = any(fragment in p.lower() for paths in self.paths.values() for p in paths)
        return self._contains[fragment]

    def with_files(self, folder: str, added: Iterable[str], removed: Iterable[str], hidden: bool) -> IndexFacts:
        current = self.paths.get(folder, frozenset())
        updated = (current - set(removed)) | set(added)
        return IndexFacts({**self.paths, folder: frozenset(updated)}, self.hidden_status or hidden)

    def without_folder(self, folder: str) -> IndexFacts:
        return IndexFacts({k: v for k, v in self.paths.items() if k != folder}, self.hidden_status)
