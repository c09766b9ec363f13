"""Who may write, and what index runs were asked for. Both in memory: they describe the
present, and a restarted API starts with no writer and no queue — except over an index on
object storage, where the queue and its states are kept beside the index too (`runs.json`):
the writer publishes them at every change, its query replicas read them, and a writer that
takes over after another died carries on its queue.

Leases: one writer per folder at a time. An indexer takes a lease before its first write
and renews it with every batch; a second writer is refused with a message naming the
first. A crashed writer's lease simply expires.

Runs: a script or an agent asks for an index run (`POST /v1/runs`); an indexer worker
claims it (long-poll), reports progress and the summary; the asker follows it by id.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from semsearch.api.location import StoreUnavailable
from semsearch.corpus.folders import SharedJson
from semsearch.limits import KEEP_LINES, KEEP_RUNS, MAX_QUEUED
from semsearch.schemas import (
    FINISHED,
    Lease,
    Run,
    RunAsked,
    RunFinish,
    RunLine,
    RunLogLine,
    RunProgress,
    RunReport,
    RunRequest,
)


class LeaseConflict(Exception):
    """Another writer holds the folder."""


class RunNotFound(KeyError):
    pass


class QueueFull(Exception):
    """Too many distinct runs are queued."""


class RunCancelled(Exception):
    """The run was cancelled; its worker should stop."""


def now() -> datetime:
    return datetime.now(UTC)


Clock = Callable[[], datetime]


class Leases:
    def __init__(self, ttl_s: float, clock: Clock = now) -> None:
        """`clock`: the time leases are measured in (tests pass one they move by hand)."""
        self.ttl = timedelta(seconds=ttl_s)
        self.now = clock
        self._lock = threading.Lock()
        self._by_folder: dict[str, Lease] = {}

    def acquire(self, folder: str, holder: str) -> Lease:
        with self._lock:
            current = self._by_folder.get(folder)
            if current is not None and current.expires_at > self.now():
                raise LeaseConflict(
                    f"folder {folder!r} is being indexed by {current.holder} since "
                    f"{current.since:%H:%M:%S} UTC; wait for that run to finish (it holds the folder until "
                    f"{current.expires_at:%H:%M:%S} UTC at most if it died)"
                )
            lease = Lease(
                id=uuid.uuid4().hex, folder=folder, holder=holder, since=self.now(), expires_at=self.now() + self.ttl
            )
            self._by_folder[folder] = lease
            return lease

    def check(self, folder: str, lease_id: str | None) -> None:
        """Writes need the folder's live lease if anyone holds one; renews it."""
        with self._lock:
            current = self._by_folder.get(folder)
            if current is None or current.expires_at <= self.now():
                return
            if current.id != lease_id:
                raise LeaseConflict(
                    f"folder {folder!r} is being indexed by {current.holder}; this write was refused "
                    "so the two runs cannot interleave"
                )
            current.expires_at = self.now() + self.ttl

    def release(self, folder: str, lease_id: str) -> None:
        with self._lock:
            current = self._by_folder.get(folder)
            if current is not None and current.id == lease_id:
                del self._by_folder[folder]


SHARED_RUNS = "runs.json"
# A worker reports progress with every batch; the shared copy of a run's progress is rewritten
# at most this often (a state change is published at once).
PUBLISH_PROGRESS_S = 1.0
log = logging.getLogger("semsearch.api")


class Runs:
    def __init__(self, clock: Clock = now, shared: SharedJson | None = None, refresh_s: float = 0.0) -> None:
        """`shared`: keep the queue beside an index on object storage. The writer (`refresh_s`
        0) loads it at start and publishes every change; a query replica only reads it, at most
        every `refresh_s` seconds."""
        self.now = clock
        self._cond = threading.Condition()
        self._runs: OrderedDict[str, Run] = OrderedDict()
        self._shared, self._refresh_s = shared, refresh_s
        self._read_at = self._published_at = 0.0
        if shared is not None:
            self._load()

    def _load(self) -> None:
        assert self._shared is not None
        found = self._shared.read_json(SHARED_RUNS) or []
        self._runs = OrderedDict((run.id, run) for run in (Run.model_validate(item) for item in found))
        self._read_at = time.monotonic()

    def _reload(self) -> None:
        """A replica's view: the writer's last published queue (the last one read if the store is down)."""
        if self._shared is None or not self._refresh_s or time.monotonic() - self._read_at < self._refresh_s:
            return
        try:
            self._load()
        except (StoreUnavailable, OSError) as exc:  # answer from the last copy rather than fail a read
            log.warning("%s; the runs listed are as of the last read", exc)
            self._read_at = time.monotonic()

    def _publish(self, progress_only: bool = False) -> None:
        """The writer's queue, whole, in one PUT. A failed write is logged and made good by the next
        change: the writer's own answers stay right, a replica lags until then."""
        if self._shared is None or self._refresh_s:
            return
        if progress_only and time.monotonic() - self._published_at < PUBLISH_PROGRESS_S:
            return
        try:
            runs = [run.model_dump(mode="json", by_alias=True) for run in self._runs.values()]
            self._shared.write_json(SHARED_RUNS, runs)
            self._published_at = time.monotonic()
        except (StoreUnavailable, OSError) as exc:
            log.warning("%s; the run queue will be published again at its next change", exc)

    def request(self, request: RunRequest) -> Run:
        """A new queued run, or the queued run that asks for the same thing (it will see today's files too)."""
        with self._cond:
            queued = [r for r in self._runs.values() if r.state == "queued"]
            asked = RunAsked.model_validate(request.model_dump())
            for existing in queued:
                if existing.request == asked:
                    return existing
            if len(queued) >= MAX_QUEUED:
                raise QueueFull(
                    f"{len(queued)} index runs are already queued; wait for them (GET /v1/runs) or cancel some "
                    "(DELETE /v1/runs/ID)"
                )
            run = Run(id=uuid.uuid4().hex[:12], state="queued", request=asked, created_at=self.now())
            self._runs[run.id] = run
            self._trim()
            self._publish()
            self._cond.notify_all()
        return run

    def get(self, run_id: str) -> Run:
        with self._cond:
            self._reload()
            if run_id not in self._runs:
                kept = "beside the index" if self._shared is not None else "in memory until the API restarts"
                raise RunNotFound(f"no index run {run_id!r}; the last {KEEP_RUNS} runs are kept {kept}")
            return self._runs[run_id]

    def recent(self) -> list[Run]:
        with self._cond:
            self._reload()
            return list(reversed(self._runs.values()))

    def try_claim(self, worker: str) -> Run | None:
        """The oldest queued run, now running for `worker`; None if nothing is queued."""
        with self._cond:
            for run in self._runs.values():
                if run.state == "queued":
                    run.state, run.worker, run.started_at = "running", worker, self.now()
                    self._publish()
                    return run
            return None

    def progress(self, run_id: str, progress: RunProgress) -> Run:
        with self._cond:
            run = self.get(run_id)
            if run.cancel_requested:
                raise RunCancelled(f"index run {run_id} was cancelled; stop it")
            run.progress = RunReport.model_validate(progress.model_dump() | {"lines": []})
            self._log(run, progress.lines)
            self._publish(progress_only=True)
            return run

    def finish(self, run_id: str, result: RunFinish) -> Run:
        with self._cond:
            run = self.get(run_id)
            if run.state == "cancelled":
                return run
            run.state = "cancelled" if run.cancel_requested else "failed" if result.error else "done"
            run.summary, run.plan, run.error, run.finished_at = result.summary, result.plan, result.error, self.now()
            self._log(run, result.lines)
            self._publish()
            self._cond.notify_all()
            return run

    def cancel(self, run_id: str) -> Run:
        """A queued run is cancelled at once; a running one when its worker next reports progress."""
        with self._cond:
            run = self.get(run_id)
            if run.state == "queued":
                run.state, run.finished_at = "cancelled", self.now()
            elif run.state == "running":
                run.cancel_requested = True
            self._publish()
            self._cond.notify_all()
            return run

    @staticmethod
    def _log(run: Run, lines: list[RunLine]) -> None:
        log = run.log + [RunLogLine.model_validate(line.model_dump()) for line in lines]
        run.log_offset += max(0, len(log) - KEEP_LINES)
        run.log = log[-KEEP_LINES:]

    def _trim(self) -> None:
        finished = [r.id for r in self._runs.values() if r.state in FINISHED]
        for run_id in finished[: max(0, len(self._runs) - KEEP_RUNS)]:
            del self._runs[run_id]
