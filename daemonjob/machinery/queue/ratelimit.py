"""Rate limiting: a token bucket, shared by the API client (--kube-api-qps/--kube-api-burst)
and the work queue, and the work queue's rate limiters (client-go's per-item exponential
backoff, the bucket, the strictest of several).

Semantics follow golang.org/x/time/rate as used by client-go: the bucket starts
full, refills at `qps` tokens per second up to `burst`, and a reservation may
drive the balance negative, which is how later callers learn how long to wait.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable
from typing import Protocol

from daemonjob import defaults
from daemonjob.machinery.process.clock import Clock, RealClock

__all__ = [
    "TokenBucket",
    "DEFAULT_BASE_DELAY",
    "DEFAULT_MAX_DELAY",
    "DEFAULT_QPS",
    "DEFAULT_BURST",
    "RateLimiter",
    "ItemExponentialFailureRateLimiter",
    "BucketRateLimiter",
    "MaxOfRateLimiter",
    "default_controller_rate_limiter",
]

DEFAULT_BASE_DELAY = defaults.QUEUE_BASE_DELAY
DEFAULT_MAX_DELAY = defaults.QUEUE_MAX_DELAY
DEFAULT_QPS = defaults.QUEUE_QPS
DEFAULT_BURST = defaults.QUEUE_BURST

# Beyond this many failures the delay is the cap anyway; bounding the exponent keeps 2**n finite.
_MAX_BACKOFF_EXPONENT = 1023

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

    def allow(self) -> bool:
        """Take a token if one is there now (x/time/rate's Allow); False, nothing taken, if not."""
        if self.unlimited:
            return True
        with self._lock:
            self._refill(self._clock.now())
            if self._tokens < 1.0 - _EPSILON:
                return False
            self._tokens -= 1.0
            return True

    def accept(self) -> None:
        """Block until a token is available (on the injected clock), then use it."""
        delay = self.reserve()
        if delay > 0:
            self._clock.sleep(delay)

    def __repr__(self) -> str:
        return f"TokenBucket(qps={self._qps!r}, burst={self._burst!r})"


class RateLimiter(Protocol):
    def when(self, key: Hashable) -> float:
        """Seconds to wait before retrying `key`; counts as one more retry."""
        ...

    def forget(self, key: Hashable) -> None:
        """Stop tracking `key`, typically after it was processed successfully."""
        ...

    def num_requeues(self, key: Hashable) -> int: ...


class ItemExponentialFailureRateLimiter:
    """Per-key backoff `base * 2**failures`, capped, so one broken object backs off alone."""

    def __init__(self, base: float = DEFAULT_BASE_DELAY, cap: float = DEFAULT_MAX_DELAY) -> None:
        if base < 0 or cap < 0:
            raise ValueError("base and cap must not be negative")
        self._base = base
        self._cap = cap
        self._lock = threading.Lock()
        self._failures: dict[Hashable, int] = {}

    def when(self, key: Hashable) -> float:
        with self._lock:
            failures = self._failures.get(key, 0)
            self._failures[key] = failures + 1
        backoff = self._base * 2.0 ** min(failures, _MAX_BACKOFF_EXPONENT)
        return min(backoff, self._cap)

    def forget(self, key: Hashable) -> None:
        with self._lock:
            self._failures.pop(key, None)

    def num_requeues(self, key: Hashable) -> int:
        with self._lock:
            return self._failures.get(key, 0)


class BucketRateLimiter:
    """Overall retry rate across all keys, so mass failures cannot flood the API server."""

    def __init__(
        self,
        qps: float = DEFAULT_QPS,
        burst: int = DEFAULT_BURST,
        *,
        clock: Clock | None = None,
    ) -> None:
        self._bucket = TokenBucket(qps, burst, clock=clock)

    def when(self, key: Hashable) -> float:
        return self._bucket.reserve()

    def forget(self, key: Hashable) -> None:
        pass

    def num_requeues(self, key: Hashable) -> int:
        return 0


class MaxOfRateLimiter:
    """Waits as long as the strictest of its limiters; every limiter sees every retry."""

    def __init__(self, *limiters: RateLimiter) -> None:
        if not limiters:
            raise ValueError("MaxOfRateLimiter needs at least one limiter")
        self._limiters = limiters

    def when(self, key: Hashable) -> float:
        # Evaluate all of them: each must count the retry (and the bucket spend its token).
        return max([limiter.when(key) for limiter in self._limiters])

    def forget(self, key: Hashable) -> None:
        for limiter in self._limiters:
            limiter.forget(key)

    def num_requeues(self, key: Hashable) -> int:
        return max(limiter.num_requeues(key) for limiter in self._limiters)


def default_controller_rate_limiter(clock: Clock | None = None) -> MaxOfRateLimiter:
    """Per-key exponential backoff combined with an overall token bucket, as client-go."""
    return MaxOfRateLimiter(
        ItemExponentialFailureRateLimiter(DEFAULT_BASE_DELAY, DEFAULT_MAX_DELAY),
        BucketRateLimiter(DEFAULT_QPS, DEFAULT_BURST, clock=clock),
    )
