"""Serialises model calls so queries go ahead of bulk document batches.

The model already uses every core (intra-op threads), so running two batches at once
only makes both slower. One runs at a time; when the model frees up, a waiting query
always goes before a waiting document batch. A query that arrives while a document batch
is running does not wait for it either: the batch is interrupted (onnxruntime stops within
a few ms of its terminate flag) and runs again after the query. The holder decides how
often it may be interrupted, so a stream of queries cannot starve indexing.

After a query, bulk work also waits `grace_s`: the caller's next step (the API's LanceDB
search) then runs on idle cores instead of competing with a batch that spins them all.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager


class PriorityGate:
    def __init__(self, grace_s: float = 0.0) -> None:
        self.grace_s = grace_s
        self.preemptions = 0  # interrupted bulk batches, for the log and tests
        self._cond = threading.Condition()
        self._busy = False
        self._queries_waiting = 0
        self._interrupt: Callable[[], None] | None = None  # stops the bulk batch holding the model
        self._quiet_until = 0.0  # monotonic time before which bulk work waits (after a query)

    @contextmanager
    def hold(self, urgent: bool, interrupt: Callable[[], None] | None = None) -> Iterator[None]:
        """Hold the model. A bulk holder passes `interrupt`, which a query arriving while it
        runs calls; the holder then sees its run fail and should `hold` again and retry."""
        with self._cond:
            if urgent:
                self._queries_waiting += 1
                if self._interrupt is not None:
                    self._interrupt()
                    self._interrupt = None
                    self.preemptions += 1
            rested = urgent  # bulk honours one quiet window per hold: steady queries cannot starve it
            try:
                while True:
                    if self._busy or (not urgent and self._queries_waiting):
                        self._cond.wait()
                        continue
                    quiet = self._quiet_until - time.monotonic()
                    if rested or quiet <= 0:
                        break
                    self._cond.wait(quiet)
                    rested = True
            finally:
                if urgent:
                    self._queries_waiting -= 1
            self._busy = True
            self._interrupt = None if urgent else interrupt
        try:
            yield
        finally:
            with self._cond:
                self._busy = False
                self._interrupt = None
                if urgent:
                    self._quiet_until = time.monotonic() + self.grace_s
                self._cond.notify_all()
