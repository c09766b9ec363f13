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
from typing import Any

from semsearch.engine.location import StoreUnavailable
from semsearch.limits import KEEP_LINES, KEEP_RUNS, MAX_QUEUED, MAX_QUEUED_PER_TOKEN, MAX_URGENT_PATHS
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
from semsearch.shared import SharedDocument, SharedJson


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


# A cancelled run whose worker does not report within this long is ended as cancelled: its worker
# is gone (it would have stopped at its next report, at most 0.5 s after a file).
CANCEL_GRACE = timedelta(seconds=30)


# A worker long-polls for runs without pause (the API looks for a run 5 times a second while it
# waits), so one not seen for this long is gone.
WORKER_SEEN = timedelta(seconds=5)


class Runs:
    def __init__(
        self,
        clock: Clock = now,
        shared: SharedJson | None = None,
        refresh_s: float = 0.0,
        silence: timedelta = timedelta(minutes=10),
    ) -> None:
        """`shared`: keep the queue beside an index on object storage. The writer (`refresh_s`
        0) loads it at start and publishes every change; a query replica only reads it, at most
        every `refresh_s` seconds. `silence`: how long a running run's worker may go without
        reporting before the run is failed (the worker died, or hangs)."""
        self.now = clock
        self.silence = silence
        self._cond = threading.Condition()
        self._runs: OrderedDict[str, Run] = OrderedDict()
        self._shared = None if shared is None else SharedDocument(shared, SHARED_RUNS, refresh_s)
        # Queues are copied under `_cond` and written outside it, in order: a slow store never
        # holds up the run endpoints, and an older copy never overwrites a newer one.
        self._written = threading.Lock()
        self._copies = self._last_written = 0
        self._published_at = 0.0
        self._seen: dict[str, datetime] = {}  # worker -> when it last asked for a run or reported
        if self._shared is not None:
            self._load(self._shared)

    def workers(self, within: timedelta = WORKER_SEEN) -> list[str]:
        """The workers that asked for a run or reported on one lately: someone will take a run."""
        cutoff = self.now() - within
        with self._cond:
            busy = {r.worker for r in self._runs.values() if r.state == "running" and r.worker}
            return sorted(busy | {name for name, at in self._seen.items() if at >= cutoff})

    def _load(self, shared: SharedDocument) -> None:
        found = shared.load() or []
        self._runs = OrderedDict((run.id, run) for run in (Run.model_validate(item) for item in found))

    def _reload(self) -> None:
        """A replica's view: the writer's last published queue (the last one read if the store is down)."""
        if self._shared is None or not self._shared.stale():
            return
        try:
            self._load(self._shared)
        except (StoreUnavailable, OSError) as exc:  # answer from the last copy rather than fail a read
            log.warning("%s; the runs listed are as of the last read", exc)

    def _copy(self, progress_only: bool = False) -> tuple[int, list[dict[str, Any]]] | None:
        """Under `_cond`: the writer's queue to publish, or None (a replica; progress published
        less than PUBLISH_PROGRESS_S ago)."""
        if self._shared is None or self._shared.replica:
            return None
        if progress_only and time.monotonic() - self._published_at < PUBLISH_PROGRESS_S:
            return None
        self._copies += 1
        self._published_at = time.monotonic()
        return self._copies, [run.model_dump(mode="json", by_alias=True) for run in self._runs.values()]

    def _publish(self, copy: tuple[int, list[dict[str, Any]]] | None) -> None:
        """Outside `_cond`: the copy, whole, in one PUT. A failed write is logged and made good by
        the next change: the writer's own answers stay right, a replica lags until then."""
        if copy is None or self._shared is None:
            return
        number, runs = copy
        with self._written:
            if number < self._last_written:  # a newer queue is out already
                return
            try:
                self._shared.save(runs)
                self._last_written = number
            except (StoreUnavailable, OSError) as exc:
                log.warning("%s; the run queue will be published again at its next change", exc)

    def _expire(self) -> bool:
        """Under `_cond`, on the writer: ends the running runs whose worker went silent (a worker
        killed mid-file, a hung extractor) — failed, or cancelled if that was asked. True if any."""
        if self._shared is not None and self._shared.replica:
            return False
        moment, changed = self.now(), False
        for run in self._runs.values():
            if run.state != "running":
                continue
            quiet = moment - (run.reported_at or run.started_at or run.created_at)
            if run.cancel_requested and quiet > CANCEL_GRACE:
                run.state, run.finished_at, changed = "cancelled", moment, True
            elif quiet > self.silence:
                run.state, run.finished_at, changed = "failed", moment, True
                run.error = (
                    f"its worker ({run.worker}) stopped reporting {quiet.total_seconds():.0f} s ago (it died or "
                    "hung); its log above says where it was. Request the run again: files already written are kept"
                )
        if changed:
            self._cond.notify_all()
        return changed

    def request(self, request: RunRequest, requester: str | None = None) -> Run:
        """A new queued run, or the queued run that asks for the same thing (it will see today's files too).
        `requester`: the token asking; each may have MAX_QUEUED_PER_TOKEN runs queued."""
        with self._cond:
            if request.paths and request.folder is not None:
                self._hurry(request.folder, request.paths)
            queued = [r for r in self._runs.values() if r.state == "queued"]
            # The paths are for the run under way; the queued run indexes the whole folder anyway.
            asked = RunAsked.model_validate(request.model_dump(exclude={"paths"}))
            for existing in queued:
                if existing.request == asked:
                    return existing
            theirs = [r for r in queued if r.requested_by == requester]
            if requester is not None and len(theirs) >= MAX_QUEUED_PER_TOKEN:
                raise QueueFull(
                    f"token {requester!r} already has {len(theirs)} index runs queued (at most "
                    f"{MAX_QUEUED_PER_TOKEN}); wait for them (GET /v1/runs) or cancel some (DELETE /v1/runs/ID)"
                )
            if len(queued) >= MAX_QUEUED:
                raise QueueFull(
                    f"{len(queued)} index runs are already queued; wait for them (GET /v1/runs) or cancel some "
                    "(DELETE /v1/runs/ID)"
                )
            run = Run(
                id=uuid.uuid4().hex[:12], state="queued", request=asked, requested_by=requester, created_at=self.now()
            )
            self._runs[run.id] = run
            self._trim()
            copy = self._copy()
            self._cond.notify_all()
        self._publish(copy)
        return run

    def _hurry(self, folder: str, paths: list[str]) -> None:
        """Under `_cond`: the running runs that cover `folder` embed `paths` next."""
        for run in self._runs.values():
            if run.state == "running" and run.request.folder in (None, folder):
                asked = run.urgent.setdefault(folder, [])
                asked += [p for p in paths if p not in asked][: max(0, MAX_URGENT_PATHS - len(asked))]

    def get(self, run_id: str) -> Run:
        with self._cond:
            self._reload()
            copy = self._copy() if self._expire() else None
            if run_id not in self._runs:
                kept = "beside the index" if self._shared is not None else "in memory until the API restarts"
                raise RunNotFound(f"no index run {run_id!r}; the last {KEEP_RUNS} runs are kept {kept}")
            run = self._runs[run_id]
        self._publish(copy)
        return run

    def recent(self) -> list[Run]:
        with self._cond:
            self._reload()
            copy = self._copy() if self._expire() else None
            runs = list(reversed(self._runs.values()))
        self._publish(copy)
        return runs

    def try_claim(self, worker: str) -> Run | None:
        """The oldest queued run, now running for `worker`; None if nothing is queued."""
        with self._cond:
            self._seen[worker] = self.now()
            run = next((r for r in self._runs.values() if r.state == "queued"), None)
            if run is None:
                return None
            run.state, run.worker, run.started_at = "running", worker, self.now()
            run.reported_at = run.started_at
            copy = self._copy()
        self._publish(copy)
        return run

    def progress(self, run_id: str, progress: RunProgress) -> Run:
        with self._cond:
            run = self.get(run_id)
            if run.cancel_requested or run.state != "running":
                ended = "cancelled" if run.state == "running" else run.state
                raise RunCancelled(f"index run {run_id} was {ended}; stop it")
            run.reported_at = self.now()
            run.progress = RunReport.model_validate(progress.model_dump() | {"lines": []})
            self._log(run, progress.lines)
            urgent, run.urgent = run.urgent, {}  # handed to the worker with this answer
            copy = self._copy(progress_only=True)
        self._publish(copy)
        return run.model_copy(update={"urgent": urgent})

    def finish(self, run_id: str, result: RunFinish) -> Run:
        with self._cond:
            run = self.get(run_id)
            if run.state == "cancelled":
                return run
            run.state = "cancelled" if run.cancel_requested else "failed" if result.error else "done"
            run.summary, run.plan, run.error, run.finished_at = result.summary, result.plan, result.error, self.now()
            self._log(run, result.lines)
            copy = self._copy()
            self._cond.notify_all()
        self._publish(copy)
        return run

    def cancel(self, run_id: str) -> Run:
        """A queued run is cancelled at once; a running one when its worker next reports progress."""
        with self._cond:
            run = self.get(run_id)
            if run.state == "queued":
                run.state, run.finished_at = "cancelled", self.now()
            elif run.state == "running":
                run.cancel_requested = True
                self._expire()  # a worker silent for longer than the grace is gone: cancelled now
            copy = self._copy()
            self._cond.notify_all()
        self._publish(copy)
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
