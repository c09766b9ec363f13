"""Leases and the run queue as plain objects, on a clock the test moves by hand (no sleeping)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from semsearch.api.runs import LeaseConflict, Leases, QueueFull, RunCancelled, Runs
from semsearch.schemas import RunFinish, RunProgress, RunRequest, RunSummary


class Clock:
    def __init__(self) -> None:
        self.t = datetime(2026, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.t

    def advance(self, seconds: float) -> None:
        self.t += timedelta(seconds=seconds)


def test_a_lease_refuses_a_second_writer_until_it_expires() -> None:
    clock = Clock()
    leases = Leases(60, clock)
    first = leases.acquire("docs", "worker a")
    with pytest.raises(LeaseConflict, match="worker a"):
        leases.acquire("docs", "worker b")
    clock.advance(59)
    leases.check("docs", first.id)  # a write renews it
    clock.advance(59)
    with pytest.raises(LeaseConflict):
        leases.check("docs", "someone else")
    clock.advance(61)  # the writer died: nobody renewed it
    assert leases.acquire("docs", "worker b").holder == "worker b"


def test_identical_requests_share_a_queued_run_and_the_queue_is_bounded() -> None:
    runs = Runs(Clock())
    one = runs.request(RunRequest(force=True))
    assert runs.request(RunRequest(force=True)).id == one.id
    assert runs.try_claim("w") is not None and runs.try_claim("w") is None
    again = runs.request(RunRequest(force=True))  # the running one may have listed files already
    assert again.id != one.id
    for n in range(1, 64):
        runs.request(RunRequest(max_files=n))
    with pytest.raises(QueueFull, match="DELETE /v1/runs"):
        runs.request(RunRequest(max_files=999))


def test_cancelling_a_running_run_stops_its_worker_at_the_next_report() -> None:
    runs = Runs(Clock())
    run = runs.request(RunRequest())
    runs.try_claim("w")
    assert runs.cancel(run.id).cancel_requested
    with pytest.raises(RunCancelled):
        runs.progress(run.id, RunProgress(files_done=1))
    finished = runs.finish(run.id, RunFinish(error="cancelled", summary=RunSummary()))
    assert finished.state == "cancelled"
    queued = runs.request(RunRequest(folder="x"))
    assert runs.cancel(queued.id).state == "cancelled" and runs.try_claim("w") is None
