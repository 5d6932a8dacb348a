"""The leader's fence as the writers use it.

A write is allowed while the process surely holds the Lease (`holds`, the elector's
holds_lease) and the fence has not been closed. Each write is checked before it starts and
again just before its first byte is sent (the client's `guard`), its timeout is bounded by
what is left of the lease, and it is counted while in flight: at shutdown the manager closes
the fence, waits for the writes in flight to end, and only then releases the Lease, so a
successor never acts while this process still has a request on the wire.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["Fence", "NotLeader", "always", "as_fence"]


class NotLeader(Exception):
    """Raised instead of a write while the lease is not surely held; nothing was sent."""


def always() -> bool:
    return True


class Fence:
    """`fence()` says whether a write may start; `writing(what)` wraps one write."""

    def __init__(self, holds: Callable[[], bool] = always, remaining: Callable[[], float] | None = None):
        self._holds = holds
        self._remaining = remaining
        self._cond = threading.Condition()
        self._closed = False
        self._in_flight = 0

    def __call__(self) -> bool:
        with self._cond:
            if self._closed:
                return False
        return self._holds()

    def check(self, what: str) -> None:
        if not self():
            raise NotLeader(f"not the leader: {what} not sent")

    def timeout(self) -> float | None:
        """A write's timeout: what is left of the lease (None: the client's default)."""
        return None if self._remaining is None else self._remaining()

    @contextmanager
    def writing(self, what: str) -> Iterator[dict[str, Any]]:
        """The keyword arguments of one write to the client (`guard`, `request_timeout`);
        NotLeader before anything is sent when the fence does not hold."""
        self.check(what)
        with self._cond:
            self._in_flight += 1
        try:
            yield {"guard": lambda: self.check(what), "request_timeout": self.timeout()}
        finally:
            with self._cond:
                self._in_flight -= 1
                self._cond.notify_all()

    def close(self) -> None:
        """No write starts from now on; in-flight batches abandon what they have not sent."""
        with self._cond:
            self._closed = True

    def in_flight(self) -> int:
        with self._cond:
            return self._in_flight

    def wait_idle(self, timeout: float) -> bool:
        """Wait until no write is in flight; False if some still were after `timeout`."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._in_flight:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
            return True


def as_fence(fence: Fence | Callable[[], bool]) -> Fence:
    """A plain predicate (a test's, or `always`) as a Fence."""
    return fence if isinstance(fence, Fence) else Fence(fence)
