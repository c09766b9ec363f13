"""One writer over a shared index: a lease kept in the object store beside the index.

The lease is an epoch: a LanceDB table `writer_lease_<n>` created by the writer that holds it.
Creating a table commits its first manifest only if none exists (the store's `If-None-Match`),
so of any number of contenders for epoch n exactly one wins. The holder renews
`writer_lease_<n>.json` (holder, deadline) every third of the lease; a writer that finds a live
deadline refuses to start, naming the holder and when the lease ends; one that finds it expired
contends for epoch n + 1. A holder that sees a newer epoch has lost the lease: it stops writing
(its write requests get a 503 that names the new holder). A holder that could not renew within
a lease (the store unreachable, the process paused) stops writing too, by its own clock, until
it renews: by then another writer may have taken over. LanceDB's own commits stay atomic either
way, so a writer that wakes up after a takeover cannot corrupt the index.
"""

from __future__ import annotations

import logging
import os
import re
import socket
import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import lancedb
import pyarrow as pa

from semsearch.engine.location import IndexLocation, StoreUnavailable, reason

PREFIX = "writer_lease_"
CLOCK_PROBE = "writer_clock.json"  # written to read the store's time
EPOCH = re.compile(rf"^{PREFIX}(\d+)$")
SCHEMA = pa.schema([pa.field("holder", pa.string()), pa.field("since", pa.string())])
log = logging.getLogger("semsearch.api")


class LeaseHeld(RuntimeError):
    """Another writer holds the lease; the message names it and when its lease ends."""


class WriterLease:
    def __init__(self, location: IndexLocation, db: lancedb.DBConnection, ttl_s: float) -> None:
        self.location, self.db, self.ttl = location, db, timedelta(seconds=ttl_s)
        self.holder = f"api pid {os.getpid()} on {socket.gethostname()}"
        self.epoch = 0
        self.lost: str | None = None
        self._stop = threading.Event()
        self._valid_until = 0.0  # monotonic: the end of the lease as of its last renewal

    def _epochs(self) -> list[int]:
        return sorted(int(m.group(1)) for name in self.db.list_tables().tables if (m := EPOCH.match(name)))

    def acquire(self) -> None:
        epochs = self._epochs()
        current = epochs[-1] if epochs else 0
        if current:
            held = self.location.read_json(f"{PREFIX}{current}.json") or {}
            deadline = self._deadline(current, held)
            if deadline is not None and deadline > self.location.store_now(CLOCK_PROBE):
                raise LeaseHeld(
                    f"another writer holds the index at {self.location}: {held.get('holder', '?')}, until "
                    f"{deadline:%H:%M:%S} UTC (the store's clock) unless it renews; run this API with "
                    "SEMSEARCH_ROLE=query, or stop that writer (a dead writer's lease lapses by itself)"
                )
        try:
            self.db.create_table(f"{PREFIX}{current + 1}", schema=SCHEMA)
        except Exception as exc:  # another contender created this epoch first
            raise LeaseHeld(
                f"another writer took the lease on {self.location} at the same moment ({reason(exc)}); run this API "
                "with SEMSEARCH_ROLE=query, or start it again once that writer is gone"
            ) from exc
        self.epoch = current + 1
        self._renew()
        threading.Thread(target=self._keep, name="writer-lease", daemon=True).start()
        log.info("writer lease %d taken on %s", self.epoch, self.location)

    def _deadline(self, epoch: int, held: dict[str, Any]) -> datetime | None:
        """When epoch's lease lapses, on the store's clock: its last renewal as the store stamped it,
        plus the lease's length. (The holder's own `deadline` field is kept for people; a contender
        whose clock runs ahead once took a live lease by comparing it with its own time.)"""
        if held.get("released"):
            return None
        renewed = self.location.modified(f"{PREFIX}{epoch}.json")
        ttl = timedelta(seconds=float(held.get("ttl_s", self.ttl.total_seconds())))
        return None if renewed is None else renewed + ttl

    def _renew(self) -> None:
        began = time.monotonic()  # before the write: the deadline others read is no earlier than this
        deadline = datetime.now(UTC) + self.ttl
        self.location.write_json(
            f"{PREFIX}{self.epoch}.json",
            {"holder": self.holder, "deadline": deadline.isoformat(), "ttl_s": self.ttl.total_seconds()},
        )
        self._valid_until = began + self.ttl.total_seconds()

    def refusal(self) -> str | None:
        """Why this writer must not write now, or None."""
        if self.lost is not None:
            return f"{self.lost}; send writes to that writer"
        if self.epoch and time.monotonic() > self._valid_until:
            return (
                f"this writer could not renew its lease on {self.location} in time (is the store reachable?), so "
                "another writer may hold it now; it writes again once it renews — retry in a few seconds"
            )
        return None

    def _keep(self) -> None:
        while not self._stop.wait(self.ttl.total_seconds() / 3):
            try:
                newer = [e for e in self._epochs() if e > self.epoch]
                if newer:
                    held = self.location.read_json(f"{PREFIX}{newer[-1]}.json") or {}
                    self.lost = (
                        f"this writer lost its lease on {self.location} to {held.get('holder', 'another writer')}"
                    )
                    log.warning(self.lost)
                    return
                self._renew()
            except (StoreUnavailable, OSError) as exc:  # the store is down: try again next round
                log.warning("writer lease renewal failed: %s", exc)

    def release(self) -> None:
        """On a clean stop: the lease ends now, so the next writer need not wait it out."""
        self._stop.set()
        if self.epoch and self.lost is None:
            self.location.write_json(
                f"{PREFIX}{self.epoch}.json",
                {"holder": self.holder, "deadline": datetime.now(UTC).isoformat(), "released": True},
            )
