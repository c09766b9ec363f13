"""glibc's heap, tuned for our threaded services.

glibc gives each thread that allocates concurrently its own arena (up to 8 per core), and
memory freed in one arena is not reused by another. LanceDB's worker threads, gRPC's and
uvicorn's thread pools each grow their own, so peak RSS climbs with the thread count rather
than with the work: the API building a 100k-chunk index peaked at 859 MB with glibc's default
and 661 MB with 2 arenas, at the same query latency (make bench). Elsewhere (musl, macOS)
these calls do nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from functools import cache

M_ARENA_MAX = -8  # from glibc's malloc.h


@cache
def _glibc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else None
    except OSError:
        return None
    return libc if libc is not None and hasattr(libc, "mallopt") and hasattr(libc, "malloc_trim") else None


def limit_arenas(count: int) -> bool:
    """Cap the arenas (0 leaves glibc's default); call before starting threads."""
    libc = _glibc()
    return bool(libc.mallopt(M_ARENA_MAX, count)) if libc is not None and count > 0 else False


def trim() -> None:
    """Hand freed heap memory back to the OS (glibc keeps it otherwise)."""
    libc = _glibc()
    if libc is not None:
        libc.malloc_trim(0)
