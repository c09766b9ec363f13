"""The embedder's priority gate, without the model: who holds it, who waits, who is interrupted."""

from __future__ import annotations

import threading

from semsearch.embedder.scheduler import PriorityGate


def test_a_query_interrupts_the_bulk_holder_once_and_goes_first() -> None:
    gate = PriorityGate()
    interrupted = threading.Event()
    order: list[str] = []
    with gate.hold(urgent=False, interrupt=interrupted.set):
        query = threading.Thread(target=lambda: _enter(gate, True, order, "query"))
        waiting_bulk = threading.Thread(target=lambda: _enter(gate, False, order, "bulk"))
        waiting_bulk.start()
        query.start()
        assert interrupted.wait(5)  # the running bulk batch was told to stop
        order.append("holder leaves")
    query.join(5)
    waiting_bulk.join(5)
    assert order[0] == "holder leaves" and order[1] == "query" and order[2] == "bulk"
    assert gate.preemptions == 1


def test_a_bulk_holder_without_interrupt_runs_to_the_end() -> None:
    gate = PriorityGate()
    order: list[str] = []
    with gate.hold(urgent=False, interrupt=None):
        query = threading.Thread(target=lambda: _enter(gate, True, order, "query"))
        query.start()
        query.join(0.2)
        assert query.is_alive()  # waiting: one model at a time
        order.append("holder leaves")
    query.join(5)
    assert order == ["holder leaves", "query"] and gate.preemptions == 0


def test_bulk_rests_once_after_a_query_so_its_search_has_the_cores() -> None:
    gate = PriorityGate(grace_s=1.0)
    with gate.hold(urgent=True):
        pass
    entered = threading.Event()
    bulk = threading.Thread(target=lambda: _enter(gate, False, [], "bulk", entered))
    bulk.start()
    assert not entered.wait(0.2)  # inside the quiet window after the query
    assert entered.wait(10)  # ...and then it goes, once, without waiting for more queries
    bulk.join(5)


def _enter(
    gate: PriorityGate, urgent: bool, order: list[str], name: str, entered: threading.Event | None = None
) -> None:
    with gate.hold(urgent):
        order.append(name)
        if entered is not None:
            entered.set()
