"""The informer's pause between failed watches: exponential, jittered, reset after a healthy
period (client-go's), so a flapping API server is not hammered and a rare error costs little."""

from __future__ import annotations

import random

from daemonjob import defaults
from daemonjob.machinery.process.clock import Clock

__all__ = ["Backoff"]


class Backoff:
    """Exponential backoff with jitter that resets after a healthy period (client-go's)."""

    def __init__(
        self,
        clock: Clock,
        initial: float = defaults.WATCH_BACKOFF_INITIAL,
        cap: float = defaults.WATCH_BACKOFF_MAX,
        reset_after: float = defaults.WATCH_BACKOFF_RESET,
        jitter: float = 1.0,
        rng: random.Random | None = None,
    ):
        self.clock, self.initial, self.cap, self.reset_after, self.jitter = clock, initial, cap, reset_after, jitter
        self.rng = rng or random.Random()
        self._current = 0.0
        self._last = -float("inf")

    def next(self) -> float:
        now = self.clock.now()
        if now - self._last > self.reset_after:
            self._current = self.initial
        else:
            self._current = min(self._current * 2 or self.initial, self.cap)
        self._last = now
        return self._current * (1 + self.jitter * self.rng.random())
