"""Symbol lookup (`/v1/symbols`) and file outlines (`/v1/outline`) over the definitions the
indexer's parse recorded: the index answers, so both see exactly the files search sees.

A name matches, best first: exactly (case and all), exactly ignoring case, as a prefix, as a
substring, then as a near miss (difflib's ratio, for a typo or a half-remembered name); within
a tier, shallower symbols first (a top-level `parse` before `Parser › parse`), then shorter
names and paths. A qualified name (`Headers.get`, `Headers › get`, `Headers::get`) matches the
last part as a name and the rest against the enclosing symbols.
"""

from __future__ import annotations

import difflib
import os
import re
from typing import Any

from semsearch.config import Settings
from semsearch.corpus import files
from semsearch.corpus.folders import FolderRegistry
from semsearch.engine.filters import TRUE, like_escape, sql_in, sql_str
from semsearch.engine.store import Store
from semsearch.limits import MAX_SYMBOL_RESULTS
from semsearch.schemas import Outline, Symbol, Symbols

QUALIFIER = re.compile(r"\s*(?:›|::|\.|#|->)\s*")
FUZZY_CUTOFF = 0.75  # difflib ratio: `setlistdefualt` finds `setlistdefault`, `get` does not find `set`
FUZZY_NAMES = 20


def find(
    store: Store,
    folders: FolderRegistry,
    name: str,
    kind: list[str] | None = None,
    folder: list[str] | None = None,
    limit: int = 50,
) -> Symbols:
    registered = {f.name: f.path for f in folders.all()}
    *qualifier, last = [p for p in QUALIFIER.split(name.strip()) if p] or [""]
    if not last:
        return Symbols(symbols=[], message="give a name to look up, e.g. `parse_header` or `Headers.get`")
    scope = [f for f in (folder or list(registered)) if f in registered]
    if not scope:
        known = ", ".join(sorted(registered)) or "none yet"
        return Symbols(symbols=[], message=f"no such folder (registered: {known}); call list_folders")
    where = sql_in("folder", scope)
    if kind:
        where += f" AND {sql_in('kind', [k.lower() for k in kind])}"
    needle = last.lower()
    rows = _rows(store, f"{where} AND name_lower LIKE {sql_str('%' + like_escape(needle) + '%')}")
    near: dict[str, float] = {}
    if len(rows) < limit:
        names = store.symbols(where).column("name_lower").unique().to_pylist()
        for close in difflib.get_close_matches(needle, names, n=FUZZY_NAMES, cutoff=FUZZY_CUTOFF):
            if needle not in close:
                near[close] = difflib.SequenceMatcher(None, needle, close).ratio()
        if near:
            rows += _rows(store, f"{where} AND {sql_in('name_lower', list(near))}")
    if qualifier:
        wanted = [q.lower() for q in qualifier]
        rows = [r for r in rows if _qualified(r["symbol_path"], wanted)]

    def rank(row: dict[str, Any]) -> tuple[Any, ...]:
        lower = row["name_lower"]
        tier = (
            0 if row["name"] == last else
            1 if lower == needle else
            2 if lower.startswith(needle) else
            3 if needle in lower else
            4
        )  # fmt: skip
        depth = row["symbol_path"].count("›")
        return (tier, -near.get(lower, 1.0), depth, len(lower), row["folder"], row["path"], row["start_line"])

    rows.sort(key=rank)
    message = None
    if not rows:
        message = (
            f"no symbol named like {name!r} in {', '.join(scope)}; symbols come from source files the "
            "indexer parsed (see `semsearch explain PATH`); try search for a description instead"
        )
    return Symbols(symbols=_views(rows[:limit], registered), truncated=len(rows) > limit, message=message)


def outline(store: Store, folders: FolderRegistry, settings: Settings, path: str) -> Outline:
    """A file's symbols in order; refused like a read for a path the indexer would not index."""
    registered, rel = files.admit(path, folders, settings)
    rows = _rows(store, f"folder = {sql_str(registered.name)} AND path = {sql_str(rel)}")
    rows.sort(key=lambda r: (r["start_line"], -r["end_line"]))
    message = None
    if not rows:
        indexed = bool(store.manifest(registered.name, [rel]))
        message = f"{registered.name}/{rel} has no symbols: " + (
            "it is indexed, but its language has no grammar here or it defines nothing"
            if indexed
            else "it is not indexed yet; run `semsearch index` (or the index tool)"
        )
    return Outline(
        folder=registered.name,
        rel_path=rel,
        file_path=os.path.join(registered.path, rel),
        symbols=_views(rows, {f.name: f.path for f in folders.all()}),
        message=message,
    )


def _rows(store: Store, where: str) -> list[dict[str, Any]]:
    table = store.symbols(where or TRUE, limit=MAX_SYMBOL_RESULTS * 20)
    return table.to_pylist() if table.num_rows else []


def _qualified(symbol_path: str, qualifier: list[str]) -> bool:
    """The qualifier's parts end the symbol's enclosing path, in order (case-insensitive)."""
    enclosing = [p.lower() for p in symbol_path.split(" › ")[:-1]]
    flat = [piece for part in enclosing for piece in [part, *QUALIFIER.split(part)]]
    return enclosing[-len(qualifier) :] == qualifier or all(q in flat for q in qualifier)


def _views(rows: list[dict[str, Any]], registered: dict[str, str]) -> list[Symbol]:
    out: list[Symbol] = []
    stale: dict[str, bool] = {}
    for row in rows:
        if row["folder"] not in registered:
            continue
        file_path = os.path.join(registered[row["folder"]], row["path"])
        if file_path not in stale:
            try:
                stale[file_path] = os.stat(file_path).st_mtime_ns != row["mtime_ns"]
            except OSError:
                stale[file_path] = True
        out.append(
            Symbol(
                name=row["name"],
                kind=row["kind"],
                symbol_path=row["symbol_path"],
                folder=row["folder"],
                rel_path=row["path"],
                file_path=file_path,
                start_line=row["start_line"],
                end_line=row["end_line"],
                signature=row["signature"],
                stale=stale[file_path],
            )
        )
    return out
