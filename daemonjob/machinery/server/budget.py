"""A budget of bytes shared by concurrent requests: a weighted semaphore.

The memory a server may spend on request bodies is bounded by what it lets in at once, not
by what clients send: each body takes its size (or what handling it costs) from a budget
before it is read or handled and gives it back after. A request that does not fit is
refused at once (`try_take`, the API server's max-in-flight answer) or waits a bounded
time (`take`).
"""

from __future__ import annotations

import threading
import time

__all__ = ["Budget"]


class Budget:
    """`total` units (bytes), taken and given back by any thread."""

    def __init__(self, total: int) -> None:
        if total < 1:
            raise ValueError(f"a budget needs at least one unit, got {total}")
        self.total = total
        self._used = 0
        self._cond = threading.Condition()

    def fits(self, amount: int) -> bool:
        """Whether `amount` can ever be taken (it is not larger than the whole budget)."""
        return 0 <= amount <= self.total

    def try_take(self, amount: int) -> bool:
        """Take `amount` if it fits now; False (nothing taken) otherwise."""
        if not self.fits(amount):
            return False
        with self._cond:
            if self._used + amount > self.total:
                return False
            self._used += amount
            return True

    def take(self, amount: int, timeout: float) -> bool:
        """Take `amount`, waiting up to `timeout` seconds for others to give back; False if not taken."""
        if not self.fits(amount):
            return False
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._used + amount > self.total:
                left = deadline - time.monotonic()
                if left <= 0 or not self._cond.wait(left):
                    if self._used + amount > self.total:
                        return False
            self._used += amount
            return True

    def give(self, amount: int) -> None:
        with self._cond:
            self._used = max(0, self._used - amount)
            self._cond.notify_all()

    def used(self) -> int:
        with self._cond:
            return self._used
