"""Read, decide, write again when the write lost a race: client-go's `retry.RetryOnConflict`.

A write guarded by the resourceVersion it was decided on (a merge patch carrying it, a PUT)
is refused with 409 Conflict when someone wrote the object in between: a Node's labels, taints
and status change often, a DaemonJob is edited by its users. The answer is never to write
anyway but to read the object again and decide again, a few times, a short jittered sleep
apart (so two writers racing each other fall out of step); a conflict that persists is
returned to the caller, who looks again later (a requeue) or tells its user.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TypeVar

from daemonjob import defaults
from daemonjob.machinery.client.apierror import ApiError

__all__ = ["Backoff", "DEFAULT_RETRY", "retry_on_conflict"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Backoff:
    """client-go's `wait.Backoff` without its cap: `steps` attempts, the i-th sleep between two
    of them `duration * factor**i`, lengthened by up to `jitter` of itself at random."""

    steps: int = defaults.CONFLICT_RETRY_STEPS
    duration: float = defaults.CONFLICT_RETRY_DELAY
    factor: float = defaults.CONFLICT_RETRY_FACTOR
    jitter: float = defaults.CONFLICT_RETRY_JITTER

    def __post_init__(self) -> None:
        if self.steps < 1:
            raise ValueError("steps must be at least 1")
        if self.duration < 0 or self.factor < 0 or self.jitter < 0:
            raise ValueError("duration, factor and jitter must not be negative")

    def delays(self, rand: Callable[[], float] = random.random) -> Iterator[float]:
        """The sleeps between the attempts: one fewer than the steps."""
        duration = self.duration
        for _ in range(self.steps - 1):
            yield duration * (1 + self.jitter * rand())
            duration *= self.factor


DEFAULT_RETRY = Backoff()  # client-go's retry.DefaultRetry


def retry_on_conflict(
    fn: Callable[[], T],
    backoff: Backoff = DEFAULT_RETRY,
    *,
    gave_up: str | None = None,
    sleep: Callable[[float], None] = time.sleep,
    rand: Callable[[], float] = random.random,
) -> T:
    """Run `fn` (which reads what it decides on itself) until it ends without a 409 Conflict,
    at most `backoff.steps` times; its other errors pass at once. When the conflict persists
    the last one is raised, or, given `gave_up`, a 409 with that message (the caller's words
    for what to do next), the last conflict as its cause."""
    delays = backoff.delays(rand)
    while True:
        try:
            return fn()
        except ApiError as exc:
            if not exc.conflict:
                raise
            delay = next(delays, None)
            if delay is None:
                if gave_up is None:
                    raise
                raise ApiError(409, "Conflict", gave_up) from exc
        sleep(delay)
