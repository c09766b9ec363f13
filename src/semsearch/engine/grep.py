"""Grep over exactly the indexer's file list, so ignored files and secrets never leak through it.

Literal by default; regexes run on RE2 (linear time), and the whole search has a time
budget, so no pattern and no corpus can hang the server.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import re2

from semsearch.config import Settings
from semsearch.corpus.discovery import FileList, size_limit
from semsearch.corpus.extract import Unindexable, extract, parts_text
from semsearch.corpus.folders import FolderNotFound, FolderRegistry
from semsearch.engine.filters import glob_matcher
from semsearch.limits import GREP_MAX_LINE_CHARS, GREP_TIME_BUDGET_S
from semsearch.schemas import GrepMatch, GrepRequest, GrepResponse
from semsearch.text import lines as text_lines


class BadPattern(ValueError):
    pass


def compile_pattern(request: GrepRequest) -> re2._Regexp:
    options = re2.Options()
    options.log_errors = False
    options.case_sensitive = request.case_sensitive
    options.literal = not request.regex
    options.max_mem = 64 << 20
    try:
        return re2.compile(request.pattern, options)
    except re2.error as exc:
        reason = exc.args[0].decode(errors="replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        raise BadPattern(f"invalid regular expression {request.pattern!r}: {reason}; RE2 syntax is required") from exc


def grep(request: GrepRequest, folders: FolderRegistry, settings: Settings) -> GrepResponse:
    pattern = compile_pattern(request)
    registered = folders.all()
    unknown = sorted(set(request.folder or []) - {f.name for f in registered})
    if unknown:
        raise FolderNotFound(f"no folder named {unknown[0]!r}; `semsearch list` shows the registered ones")
    wanted = glob_matcher(request.file_glob) if request.file_glob else None
    deadline = time.monotonic() + GREP_TIME_BUDGET_S
    matches: list[GrepMatch] = []
    searched, truncated = 0, False
    for folder in registered:
        if request.folder and folder.name not in request.folder:
            continue
        root = Path(folder.path)
        for rel in FileList.from_settings(root, settings).files():
            if wanted is not None and not wanted(rel):
                continue
            if time.monotonic() > deadline or len(matches) >= request.max_results:
                truncated = True
                break
            searched += 1
            for number, line in _lines(root / rel, settings):
                if pattern.search(line):
                    text = line.strip()[:GREP_MAX_LINE_CHARS]
                    path = os.path.join(folder.path, rel)
                    matches.append(GrepMatch(folder=folder.name, rel_path=rel, file_path=path, line=number, text=text))
                    if len(matches) >= request.max_results:
                        break
        if truncated:
            break
    return GrepResponse(matches=matches, files_searched=searched, truncated=truncated)


def _lines(path: Path, settings: Settings) -> list[tuple[int, str]]:
    """The file's text as the indexer sees it (PDF and DOCX extracted), opened without following links."""
    limit = size_limit(path.name, settings.max_file_size_bytes, settings.max_document_bytes)
    try:
        doc = extract(path, limit, settings.redact_secrets, settings.notebook_outputs)
    except Unindexable:
        return []
    if doc.continuous:  # a notebook's cells, a deck's slides, …: numbered as `cat` shows them
        lines = text_lines(parts_text(doc.segments))
    else:
        lines = [line for segment in doc.segments for line in text_lines(segment.text)]
    return list(enumerate(lines, start=1))
