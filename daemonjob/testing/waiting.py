"""Polling for a condition, for tests and tools that watch the cluster converge."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


def wait_for(
    predicate: Callable[[], T],
    timeout: float = 60.0,
    what: str = "condition",
    interval: float = 0.2,
    describe: Callable[[], Any] | None = None,
) -> T:
    """Poll until `predicate()` is truthy and return it; the failure names what was last seen."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            seen = describe() if describe is not None else value
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}; last seen: {seen!r}")
        time.sleep(interval)


def holds(
    predicate: Callable[[], Any],
    seconds: float,
    what: str = "condition",
    interval: float = 0.25,
    describe: Callable[[], Any] | None = None,
) -> None:
    """Assert `predicate()` stays truthy for `seconds`: how a test shows that nothing happens."""
    deadline = time.monotonic() + seconds
    while True:
        value = predicate()
        if not value:
            seen = describe() if describe is not None else value
            raise AssertionError(f"{what} stopped holding; seen: {seen!r}")
        if time.monotonic() >= deadline:
            return
        time.sleep(interval)
