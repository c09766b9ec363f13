"""Reading the corpus: a file, its outline, where a symbol is defined, why a path is (not) indexed.

Every read goes through the caller's folders and the indexer's own rules (`corpus.files`)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Query, status

from semsearch.api.auth import Read, authenticate
from semsearch.api.deps import (
    READ,
    FoldersDep,
    SettingsDep,
    StoreDep,
)
from semsearch.corpus import files
from semsearch.engine import explain, symbols
from semsearch.limits import MAX_CAT_LINES, MAX_SYMBOL_RESULTS
from semsearch.schemas import (
    Explained,
    FileContent,
    Outline,
    Symbols,
)

router = APIRouter(prefix="/v1", tags=["reads"], dependencies=[Depends(authenticate)])


@router.get("/files", dependencies=[READ])
def read_file(
    folders: FoldersDep,
    settings: SettingsDep,
    path: Annotated[str, Query(max_length=4096, description="Absolute path, as in search results.")],
    start_line: Annotated[int, Query(ge=1, alias="startLine")] = 1,
    end_line: Annotated[int | None, Query(ge=1, alias="endLine")] = None,
) -> FileContent:
    """A file or a line range of it — only files inside the folders that the indexer would index."""
    if end_line is not None and end_line < start_line:
        raise HTTPException(status.HTTP_400_BAD_REQUEST, f"endLine {end_line} is before startLine {start_line}")
    opened = files.read(path, folders, settings)
    total = len(opened.lines)
    last = min(total, end_line or total, start_line + MAX_CAT_LINES - 1)
    return FileContent(
        file_path=opened.path,
        folder=opened.folder.name,
        rel_path=opened.rel_path,
        start_line=start_line,
        end_line=max(start_line - 1, last),
        total_lines=total,
        text="\n".join(opened.lines[start_line - 1 : last]),
    )


@router.get("/symbols")
def find_symbols(
    store: StoreDep,
    folders: FoldersDep,
    principal: Read,
    name: Annotated[str, Query(min_length=1, max_length=256, description="A name, or `Class.method`.")],
    kind: Annotated[list[str] | None, Query(max_length=32, description="function, method, class, …")] = None,
    folder: Annotated[list[str] | None, Query(max_length=32, description="Only these folders.")] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_SYMBOL_RESULTS)] = 50,
) -> Symbols:
    """Where a function, class or method is defined: exact names first, then prefixes, substrings, near misses."""
    return symbols.find(store, folders, name, kind, principal.limit(folder), limit)


@router.get("/outline", dependencies=[READ])
def file_outline(
    store: StoreDep,
    folders: FoldersDep,
    settings: SettingsDep,
    path: Annotated[str, Query(max_length=4096, description="Absolute path, as in search results.")],
) -> Outline:
    """A source file's definitions in order (name, kind, lines, signature) — confined like a read."""
    return symbols.outline(store, folders, settings, path)


@router.get("/explain", dependencies=[READ])
def explain_path(
    folders: FoldersDep,
    store: StoreDep,
    settings: SettingsDep,
    path: Annotated[str, Query(max_length=4096, description="Absolute path, as the API sees it.")],
) -> Explained:
    """Why a path is, or is not, indexed: the rule that decided, its chunks, whether it is stale."""
    if "\x00" in path or not path.startswith("/"):
        raise HTTPException(status.HTTP_400_BAD_REQUEST, f"{path!r} is not an absolute path; send an absolute path")
    return explain.explain(path, folders, store, settings)
