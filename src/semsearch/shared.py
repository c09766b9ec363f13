"""A small JSON document kept beside an index on object storage, so every API over that index
reads the same one: the folder list, the run queue. The writer saves it whole (one PUT: whole
or not at all); a query replica re-reads it at most every `refresh_s` seconds."""

from __future__ import annotations

import time
from typing import Any, Protocol


class SharedJson(Protocol):
    """Where the documents live (api/location.py's `IndexLocation`)."""

    def read_json(self, name: str) -> Any | None: ...

    def write_json(self, name: str, value: Any) -> None: ...


class SharedDocument:
    def __init__(self, store: SharedJson, name: str, refresh_s: float = 0.0) -> None:
        """`refresh_s` 0: this process writes the document and its copy is always current."""
        self.store, self.name, self.refresh_s = store, name, refresh_s
        self._read_at = 0.0

    @property
    def replica(self) -> bool:
        """A replica only reads: the writer's copy is the document."""
        return bool(self.refresh_s)

    def load(self) -> Any | None:
        """The stored document (None if there is none yet); raises what the store raises."""
        try:
            return self.store.read_json(self.name)
        finally:  # a failed read waits its interval too rather than retry on every request
            self._read_at = time.monotonic()

    def stale(self) -> bool:
        """A replica's copy is older than its interval."""
        return self.replica and time.monotonic() - self._read_at >= self.refresh_s

    def save(self, value: Any) -> None:
        self.store.write_json(self.name, value)
