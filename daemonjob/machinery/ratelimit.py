"""A token bucket, shared by the API client (--kube-api-qps/--kube-api-burst) and the work queue.

Semantics follow golang.org/x/time/rate as used by client-go: the bucket starts
full, refills at `qps` tokens per second up to `burst`, and a reservation may
drive the balance negative, which is how later callers learn how long to wait.
"""

from __future__ import annotations

import threading

from daemonjob.machinery.clock import Clock, RealClock

__all__ = ["TokenBucket"]

# Clock readings are floats: 0.05s + 0.05s of refill at 10 qps may come out as
# 0.9999999 tokens. Anything this close to a whole token counts as one.
_EPSILON = 1e-9


class TokenBucket:
    """Thread-safe token bucket; `qps <= 0` means unlimited."""

    def __init__(self, qps: float, burst: int, clock: Clock | None = None) -> None:
        if qps > 0 and burst < 1:
            raise ValueError(f"burst must be at least 1 when qps > 0, got {burst}")
        self._qps = float(qps)
        self._burst = int(burst)
        self._clock: Clock = clock if clock is not None else RealClock()
        self._lock = threading.Lock()
        self._tokens = float(burst)
        self._last = self._clock.now()

    @property
    def unlimited(self) -> bool:
        return self._qps <= 0

    def _refill(self, now: float) -> None:
        # A clock read taken before another thread's update must not make time run backwards.
        elapsed = max(0.0, now - self._last)
        self._tokens = min(float(self._burst), self._tokens + elapsed * self._qps)
        self._last = max(self._last, now)

    def reserve(self) -> float:
        """Take a token now and return how many seconds the caller must wait before using it.

        Reserving rather than waiting inside the lock keeps callers queued fairly:
        each reservation pushes the next one further out.
        """
        if self.unlimited:
            return 0.0
        with self._lock:
            self._refill(self._clock.now())
            self._tokens -= 1.0
            if self._tokens >= -_EPSILON:
                return 0.0
            return -self._tokens / self._qps

    def accept(self) -> None:
        """Block until a token is available (on the injected clock), then use it."""
        delay = self.reserve()
        if delay > 0:
            self._clock.sleep(delay)

    def __repr__(self) -> str:
        return f"TokenBucket(qps={self._qps!r}, burst={self._burst!r})"
