"""Search filters as SQL applied *inside* the query (LanceDB prefilter), never after top-k.

Each filter is a named clause, so an empty answer can say which filter emptied it.
Globs become LIKE patterns (a superset), then `matches_globs` checks them exactly.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import pathspec

from semsearch.config import Settings
from semsearch.engine.facts import IndexFacts
from semsearch.schemas import SearchRequest

HIDDEN_STATUSES = ("superseded", "archived")
TRUE = "true"


@dataclass(frozen=True)
class Clause:
    name: str  # what a person would call this filter, e.g. "pathGlob src/**"
    sql: str


def sql_str(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def sql_in(column: str, values: list[str]) -> str:
    return f"{column} IN ({', '.join(sql_str(v) for v in values)})"


def like_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def glob_to_like(glob: str) -> str:
    """A LIKE pattern matching at least what the gitignore-style glob matches."""
    glob = glob.strip().lstrip("/")
    out = ""
    for ch in glob:
        out += "%" if ch == "*" else "_" if ch == "?" else like_escape(ch)
    if "/" not in glob.rstrip("/"):
        out = "%" + out  # a bare name pattern matches in any directory
    if glob.endswith("/"):
        out += "%"
    while "%%" in out:
        out = out.replace("%%", "%")
    return out


class BadGlob(ValueError):
    """A glob that cannot be compiled; the message names it."""


def glob_matcher(globs: list[str]) -> Callable[[str], bool]:
    """Compiles the globs once (gitignore syntax); raises BadGlob for a broken one."""
    try:
        spec = pathspec.GitIgnoreSpec.from_lines(globs)
    except (re.error, ValueError, TypeError) as exc:
        raise BadGlob(f"invalid glob in {globs!r}: {exc}; use gitignore-style globs such as src/**/*.py") from exc
    return spec.match_file


def matches_globs(path: str, globs: list[str]) -> bool:
    return glob_matcher(globs)(path)


def path_multiplier(boosts: Mapping[str, float]) -> Callable[[str], float]:
    """A path's boost: the product of the multipliers of every glob it matches (1 if none)."""
    return _path_multiplier(tuple(boosts.items()))


# Every search ranks with the same few boost sets (the settings', or a request's own) over paths
# that recur from query to query: compiling the globs per search and matching each of a pool's
# ~200 candidates cost ~1 ms a search; both are kept (bounded: a few sets, 16k paths each).
@functools.lru_cache(maxsize=8)
def _path_multiplier(boosts: tuple[tuple[str, float], ...]) -> Callable[[str], float]:
    compiled = [(glob_matcher([glob]), factor) for glob, factor in boosts]

    @functools.lru_cache(maxsize=16384)
    def multiplier(path: str) -> float:
        product = 1.0
        for matches, factor in compiled:
            if matches(path):
                product *= factor
        return product

    return multiplier


def build(
    request: SearchRequest, folders: list[str], settings: Settings, facts: IndexFacts | None = None
) -> list[Clause]:
    """The request's filters as named clauses. With `facts`, a clause that cannot exclude any row
    of this index is left out (it would cost a pass over every row and change nothing)."""
    # The folder clause always comes first (it is the scope an empty answer is explained in),
    # as TRUE when no other folder has rows.
    name = "folder " + ",".join(request.folder) if request.folder else "registered folders"
    if not folders:
        clauses = [Clause(name, "false")]
    elif facts is None or facts.folders_outside(folders):
        clauses = [Clause(name, sql_in("folder", folders))]
    else:
        clauses = [Clause(name, TRUE)]
    if request.path_glob:
        likes = " OR ".join(f"path LIKE {sql_str(glob_to_like(g))}" for g in request.path_glob)
        clauses.append(Clause(f"pathGlob {','.join(request.path_glob)}", f"({likes})"))
    fragments = [(f"exclude {f}", f) for f in request.exclude or []]
    if not request.include_all:
        fragments += [(f"defaultExclude {f} (use --all)", f) for f in settings.default_exclude]
    for name, fragment in fragments:
        if facts is None or facts.any_path_contains(fragment):
            pattern = sql_str("%" + like_escape(fragment.lower()) + "%")
            clauses.append(Clause(name, f"lower(path) NOT LIKE {pattern}"))
    if not request.include_all and (facts is None or facts.hidden_status):
        clauses.append(
            Clause(
                "superseded/archived documents (use --all)",
                f"(status IS NULL OR {' AND '.join(f'status != {sql_str(s)}' for s in HIDDEN_STATUSES)})",
            )
        )
    if request.ext:
        exts = [e.lower().lstrip(".") for e in request.ext]
        likes = " OR ".join(f"lower(path) LIKE {sql_str('%.' + like_escape(e))}" for e in exts)
        clauses.append(Clause(f"ext {','.join(exts)}", f"({likes})"))
    if request.tags:
        values = ", ".join(sql_str(t) for t in request.tags)
        clauses.append(Clause(f"tags {','.join(request.tags)}", f"array_has_any(tags, [{values}])"))
    if request.date_from:
        clauses.append(Clause(f"dateFrom {request.date_from}", f"date >= {sql_str(request.date_from.isoformat())}"))
    if request.date_to:
        clauses.append(Clause(f"dateTo {request.date_to}", f"date <= {sql_str(request.date_to.isoformat())}"))
    return clauses


def where(clauses: list[Clause]) -> str:
    return " AND ".join(f"({c.sql})" for c in clauses if c.sql != TRUE) or TRUE
