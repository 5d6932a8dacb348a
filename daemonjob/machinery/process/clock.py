"""Injectable time, so queues and rate limiters can be tested without real sleeps.

Everything that waits in this package waits through a `Clock`: either `sleep()` or
`wait(cond, timeout)` on a `threading.Condition` the caller already holds. A
`FakeClock` then only has to wake those waiters when a test moves time forward.
"""

from __future__ import annotations

import threading
import time
from datetime import datetime, timedelta, timezone
from typing import Protocol, runtime_checkable

__all__ = ["Clock", "RealClock", "FakeClock"]

# A fixed, recognisable start so fake timestamps in test failures are easy to read.
FAKE_MONOTONIC_START = 1000.0
FAKE_WALL_START = datetime(2024, 1, 1, tzinfo=timezone.utc)


@runtime_checkable
class Clock(Protocol):
    """Time source for everything that waits or measures durations."""

    def now(self) -> float:
        """Monotonic seconds; only differences are meaningful."""
        ...

    def wall(self) -> datetime:
        """Timezone-aware UTC wall time, for timestamps written to the API."""
        ...

    def sleep(self, seconds: float) -> None:
        """Block the calling thread for `seconds` of this clock's time."""
        ...

    def wait(self, cond: threading.Condition, timeout: float | None) -> bool:
        """Wait on `cond` (held by the caller) for a notify or `timeout` clock seconds.

        Returns False when the timeout elapsed, True otherwise. Like
        `Condition.wait`, wake-ups may be spurious: callers re-check their predicate.
        """
        ...


class RealClock:
    """The process clocks: `time.monotonic` and UTC wall time."""

    def now(self) -> float:
        return time.monotonic()

    def wall(self) -> datetime:
        return datetime.now(timezone.utc)

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds)

    def wait(self, cond: threading.Condition, timeout: float | None) -> bool:
        if timeout is not None and timeout <= 0:
            return False
        return cond.wait(timeout)

    def __repr__(self) -> str:
        return "RealClock()"


class _Waiter:
    __slots__ = ("cond", "deadline")

    def __init__(self, cond: threading.Condition, deadline: float) -> None:
        self.cond = cond
        self.deadline = deadline


class FakeClock:
    """A clock that only moves when a test calls `step()`.

    Waiters register their condition and deadline before releasing the
    condition's lock; `step()` must take that lock to notify, so a wake-up can
    never be lost between registering and waiting.
    """

    def __init__(
        self,
        start: float = FAKE_MONOTONIC_START,
        wall_start: datetime = FAKE_WALL_START,
    ) -> None:
        if wall_start.tzinfo is None:
            raise ValueError("wall_start must be timezone-aware")
        self._lock = threading.Lock()
        self._start = start
        self._now = start
        self._wall_start = wall_start.astimezone(timezone.utc)
        self._waiters: list[_Waiter] = []
        self._waiters_changed = threading.Condition(self._lock)

    def now(self) -> float:
        with self._lock:
            return self._now

    def wall(self) -> datetime:
        with self._lock:
            return self._wall_start + timedelta(seconds=self._now - self._start)

    def step(self, seconds: float) -> None:
        """Advance time and wake every waiter whose deadline has been reached."""
        if seconds < 0:
            raise ValueError("a monotonic clock cannot go backwards")
        with self._lock:
            self._now += seconds
            due = [w for w in self._waiters if w.deadline <= self._now]
        for waiter in due:
            with waiter.cond:
                waiter.cond.notify_all()

    def sleep(self, seconds: float) -> None:
        cond = threading.Condition()
        with cond:
            deadline = self.now() + seconds
            while self.now() < deadline:
                self.wait(cond, deadline - self.now())

    def wait(self, cond: threading.Condition, timeout: float | None) -> bool:
        if timeout is None:
            cond.wait()
            return True
        with self._lock:
            deadline = self._now + timeout
            if deadline <= self._now:
                return False
            waiter = _Waiter(cond, deadline)
            self._waiters.append(waiter)
            self._waiters_changed.notify_all()
        try:
            cond.wait()
        finally:
            with self._lock:
                self._waiters.remove(waiter)
                self._waiters_changed.notify_all()
                timed_out = self._now >= deadline
        return not timed_out

    def waiters(self) -> int:
        """Threads currently in a timed wait or sleep on this clock."""
        with self._lock:
            return len(self._waiters)

    def block_until_waiters(self, count: int, timeout: float = 5.0) -> None:
        """Let a test wait (in real time) until `count` threads wait on this clock.

        Stepping before a thread has started waiting is harmless for
        correctness; this only makes "the thread is parked now" observable.
        """
        deadline = time.monotonic() + timeout
        with self._lock:
            while len(self._waiters) < count:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(f"{len(self._waiters)} waiters on the fake clock, expected {count}")
                self._waiters_changed.wait(remaining)

    def __repr__(self) -> str:
        return f"FakeClock(now={self.now()!r})"
