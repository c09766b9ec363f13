"""Where a request's time went, stage by stage. The engine records the stages of a search; the API
sends them as a `Server-Timing` header (W3C Server Timing: browsers' devtools show it); the CLI's
`search --timing` and the bench read them back, so a slower release names the stage that slowed.

Stages of a search: `refresh` (a replica catching up with the writer), `guard` (the pasted-prompt
check), `copy` (which in-memory copy of the index both arms read: a read of the table's version,
while the embedder computes the query's vector). Then the two arms side by side: on a thread of its
own, `embed` (from the query sent to the embedder to its vector) and `vector` (the ANN/flat arm);
on the request's thread, `lexical` (the BM25 arm with its term statistics when scored in memory),
and `vectorWait`, what the vector arm still needed once that was done; answered by LanceDB, the
BM25 arm runs on a third thread and `lexicalWait` is what it still needed after. Then `fuse` (the
one ranking), `select` (filters, abstention, hits), `coverage` (stale and skipped files in scope);
`total` is the whole request as the engine saw it. Gather adds `pack`."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

HEADER = "Server-Timing"
_ENTRY = re.compile(r"\s*([A-Za-z0-9_-]+)\s*(?:;[^,]*?dur=([0-9.]+))?[^,]*")


class Timings:
    def __init__(self) -> None:
        self.stages: dict[str, float] = {}  # name -> milliseconds, in the order first seen
        self._started = time.perf_counter()
        self._lock = threading.Lock()  # the lexical arm reports from its own thread

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        began = time.perf_counter()
        try:
            yield
        finally:
            self.add(name, time.perf_counter() - began)

    def add(self, name: str, seconds: float) -> None:
        with self._lock:
            self.stages[name] = self.stages.get(name, 0.0) + seconds * 1000

    def total_ms(self) -> float:
        return (time.perf_counter() - self._started) * 1000

    def header(self) -> str:
        """`embed;dur=5.10, vector;dur=2.31, …, total;dur=9.80`."""
        entries = [*self.stages.items(), ("total", self.total_ms())]
        return ", ".join(f"{name};dur={ms:.2f}" for name, ms in entries)


def parse(header: str | None) -> dict[str, float]:
    """A `Server-Timing` header's stages with a duration, in milliseconds."""
    found: dict[str, float] = {}
    for part in (header or "").split(","):
        match = _ENTRY.fullmatch(part)
        if match and match.group(2) is not None:
            found[match.group(1)] = float(match.group(2))
    return found
