"""Waiting in tests: ask again until the answer comes or a deadline passes; never sleep a guess.

Services here finish things in the background (a watcher's pass, the in-memory copy's load, a
model switch), so a test asks for the state it waits for, as often as is cheap, and fails with
what it last saw when the deadline passes.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


def until(
    check: Callable[[], T | None],
    timeout: float = 30.0,
    every: float = 0.05,
    what: str = "",
    accept: Callable[[Any], object] = bool,
) -> T:
    """`check()`'s first answer that `accept` takes (by default: a truthy one), asked every `every`
    seconds; AssertionError naming `what` (or the check) and its last answer when none came within
    `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found is not None and accept(found):
            return found
        if time.monotonic() >= deadline:
            raise AssertionError(f"{what or check} did not come within {timeout:g} s (last answer: {found!r})")
        time.sleep(every)
