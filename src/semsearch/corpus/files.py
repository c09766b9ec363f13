"""Reading files for clients (cat, gather's context lines, grep), confined to the corpus.

A path is readable only if, after resolving every symlink, it lies inside a registered
folder *and* the indexer's own rules would index it — so a git-ignored file, a secret or
anything outside the folders never leaks through a read, even when a search could not
have returned it. The file is opened once and the opened descriptor is checked
(`/proc/self/fd`), so a symlink swapped in between the check and the read changes nothing.
"""

from __future__ import annotations

import os
import stat
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from semsearch.config import Settings
from semsearch.corpus.discovery import FileList, size_limit
from semsearch.corpus.extract import Unindexable, shown_text
from semsearch.corpus.folders import FolderRegistry, RegisteredFolder, inside
from semsearch.corpus.secrets import redact
from semsearch.limits import LIST_REUSE_S, MAX_READ_BYTES
from semsearch.text import lines

_lists: dict[tuple[str, int, int, str], tuple[float, FileList]] = {}
_lists_lock = threading.Lock()


def file_list(root: str, settings: Settings) -> FileList:
    """The folder's FileList, reused for LIST_REUSE_S."""
    key = (root, settings.max_file_size_bytes, settings.max_document_bytes, str(settings.global_indexignore_path))
    now = time.monotonic()
    with _lists_lock:
        for stale in [k for k, (made, _) in _lists.items() if now - made > LIST_REUSE_S]:
            del _lists[stale]
        if key not in _lists:
            _lists[key] = (now, FileList.from_settings(Path(root), settings))
        return _lists[key][1]


class Refused(PermissionError):
    """The path is not one semsearch will read; the message says why and what to do."""


@dataclass(frozen=True)
class OpenedFile:
    folder: RegisteredFolder
    rel_path: str
    path: str  # the folder's path joined with rel_path (what search results show)
    lines: list[str]


def locate(path: str, folders: FolderRegistry) -> tuple[RegisteredFolder, str]:
    """The registered folder containing `path` (after resolving symlinks) and the relative path."""
    if "\x00" in path or not os.path.isabs(path):
        raise Refused(f"{path!r} is not an absolute path; use a filePath from search results (see list_folders)")
    try:
        real = os.path.realpath(path, strict=False)
        roots = [(folder, os.path.realpath(folder.path)) for folder in folders.all()]
    except OSError as exc:  # a name too long, a symlink loop or a directory swapped while resolving
        raise Refused(
            f"{path!r} cannot be resolved ({exc.strerror or exc}); use a filePath from search results"
        ) from exc
    for folder, root in roots:
        if inside(real, root) and real != root:
            return folder, os.path.relpath(real, root).replace(os.sep, "/")
    raise Refused(f"{path} is outside the indexed folders; call list_folders to see which folders can be read")


def admit(path: str, folders: FolderRegistry, settings: Settings) -> tuple[RegisteredFolder, str]:
    """The folder and relative path of a file the indexer would index; Refused otherwise."""
    folder, rel = locate(path, folders)
    verdict = file_list(folder.path, settings).explain(rel)
    if not verdict.included:
        raise Refused(f"{folder.name}/{rel} is not indexed ({verdict.rule}: {verdict.detail}), so it cannot be read")
    return folder, rel


def read(path: str, folders: FolderRegistry, settings: Settings) -> OpenedFile:
    folder, rel = admit(path, folders, settings)
    root = os.path.realpath(folder.path)
    # A PDF, a deck or a mailbox is read as large as the indexer reads it (its text is smaller).
    limit = size_limit(rel, MAX_READ_BYTES, max(MAX_READ_BYTES, settings.max_document_bytes))
    try:
        # O_NONBLOCK: opening a FIFO swapped in for the file must not wait for a writer.
        fd = os.open(os.path.join(root, rel), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError as exc:
        raise Refused(f"{folder.name}/{rel} cannot be opened: {exc.strerror}") from exc
    with os.fdopen(fd, "rb") as f:
        opened = os.readlink(f"/proc/self/fd/{f.fileno()}")
        if not inside(opened, root):  # a directory on the way was swapped for a symlink
            raise Refused(f"{path} resolved outside the indexed folders while it was opened; refused")
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            raise Refused(f"{folder.name}/{rel} is not a regular file")
        try:
            data = f.read(limit + 1)
        except OSError as exc:
            raise Refused(f"{folder.name}/{rel} cannot be read: {exc.strerror}") from exc
    if len(data) > limit:
        raise Refused(f"{folder.name}/{rel} is larger than {limit:,} bytes, too large to read whole")
    # The text the index holds, so a hit's lines are the lines shown: an HTML page's visible text,
    # a notebook's cells, a spreadsheet's rows, a deck's slides, a mailbox's messages.
    try:
        text = shown_text(rel, data, settings.notebook_outputs)
    except Unindexable as exc:
        raise Refused(f"{folder.name}/{rel} cannot be shown: {exc}") from exc
    if text is None:
        text = data.decode("utf-8", errors="replace")
    if settings.redact_secrets:
        text = redact(text)[0]  # the same text the index holds: a read never reveals more than a search
    return OpenedFile(folder, rel, os.path.join(folder.path, rel), lines(text))
