"""Leases and the run queue as plain objects, on a clock the test moves by hand (no sleeping),
and the queue's publishing over a store that stalls (a fault injected by a fake, named as such)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from semsearch.engine.runs import LeaseConflict, Leases, QueueFull, RunCancelled, Runs
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


class StalledStore:
    """Fault injection: an object store whose PUTs hang until released (a slow or stalled store)."""

    def __init__(self) -> None:
        self.documents: dict[str, Any] = {}
        self.release = threading.Event()
        self.writing = threading.Event()

    def read_json(self, name: str) -> Any | None:
        return self.documents.get(name)

    def write_json(self, name: str, value: Any) -> None:
        self.writing.set()
        assert self.release.wait(30), "the test never released the store"
        self.documents[name] = value


def test_a_stalled_store_holds_up_only_the_change_that_publishes_not_the_queue() -> None:
    """The writer publishes its queue outside the queue's lock: while one change waits on the
    store, every other run endpoint still answers, and the copy that lands is the newest."""
    store = StalledStore()
    runs = Runs(Clock(), shared=store)
    asking = threading.Thread(target=runs.request, args=(RunRequest(force=True),))
    asking.start()
    assert store.writing.wait(10)  # the request's PUT is in flight, and stuck
    listed = ThreadResult(runs.recent)  # would wait for the PUT if it were made under the lock
    assert [r.state for r in listed.value(10)] == ["queued"]  # while the store is still stalled
    claimed = ThreadResult(runs.try_claim, "w")
    store.release.set()
    asking.join(10)
    assert claimed.value(10) is not None
    assert [r["state"] for r in store.documents["runs.json"]] == ["running"]


class ThreadResult:
    def __init__(self, fn: Callable[..., Any], *args: Any) -> None:
        self._out: list[Any] = []
        self._thread = threading.Thread(target=lambda: self._out.append(fn(*args)))
        self._thread.start()

    def value(self, timeout: float) -> Any:
        self._thread.join(timeout)
        assert not self._thread.is_alive(), "the call did not return"
        return self._out[0]


def test_files_named_in_a_request_go_to_the_run_under_way_with_its_next_report() -> None:
    runs = Runs(Clock())
    running = runs.request(RunRequest(folder="docs"))
    assert runs.try_claim("w") is not None
    follow_up = runs.request(RunRequest(folder="docs", paths=["a.md", "b.md"]))
    assert follow_up.id != running.id and follow_up.request.paths == []  # queued as usual, for the whole folder
    assert runs.request(RunRequest(folder="docs", paths=["b.md", "c.md"])).id == follow_up.id  # one queued run
    runs.request(RunRequest(folder="other", paths=["x.md"]))  # another folder: not this run's
    answer = runs.progress(running.id, RunProgress(folder="docs", files_done=1, files_total=9))
    assert answer.urgent == {"docs": ["a.md", "b.md", "c.md"]}
    assert runs.progress(running.id, RunProgress(folder="docs", files_done=2, files_total=9)).urgent == {}
    with pytest.raises(ValueError, match="name it in `folder`"):
        RunRequest(paths=["a.md"])
