"""Serialises model calls so queries go ahead of bulk document batches.

The model already uses every core (intra-op threads), so running two batches at once
only makes both slower. One runs at a time; when the model frees up, a waiting query
always goes before a waiting document batch, so a search never sits behind indexing
for longer than one model batch.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager


class PriorityGate:
    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._busy = False
        self._queries_waiting = 0

    @contextmanager
    def hold(self, urgent: bool) -> Iterator[None]:
        with self._cond:
            if urgent:
                self._queries_waiting += 1
            try:
                while self._busy or (not urgent and self._queries_waiting):
                    self._cond.wait()
            finally:
                if urgent:
                    self._queries_waiting -= 1
            self._busy = True
        try:
            yield
        finally:
            with self._cond:
                self._busy = False
                self._cond.notify_all()
