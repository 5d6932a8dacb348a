"""Polling for a condition, for tests and tools that watch the cluster converge."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(predicate: Callable[[], T], timeout: float = 60.0, what: str = "condition",
             interval: float = 0.2) -> T:
    """Poll until `predicate()` is truthy and return it; AssertionError naming `what` on timeout."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)
