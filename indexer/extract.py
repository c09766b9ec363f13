"""Reads one file safely and turns it into text."""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path


class Unindexable(Exception):
    """The file cannot be indexed; `reason` is a short category for the summary."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason


@dataclass(frozen=True)
class FileContent:
    text: str
    sha256: str
    mtime_ns: int
    size: int


def read_file(path: Path, max_bytes: int) -> FileContent:
    """Opens once and checks the open descriptor, so a file swapped for a symlink or grown
    after listing cannot slip past the checks."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise Unindexable("unreadable", f"{path}: {exc.strerror}") from exc
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise Unindexable("unreadable", f"{path}: not a regular file")
        if st.st_size > max_bytes:
            raise Unindexable("too_large", f"{path}: {st.st_size} bytes > limit {max_bytes}")
        data = f.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise Unindexable("too_large", f"{path}: grew past the limit of {max_bytes} bytes while being read")
    if b"\x00" in data[:4096]:
        raise Unindexable("binary", f"{path}: contains NUL bytes (binary)")
    return FileContent(
        text=data.decode("utf-8", errors="replace"),
        sha256=hashlib.sha256(data).hexdigest(),
        mtime_ns=st.st_mtime_ns,
        size=st.st_size,
    )
