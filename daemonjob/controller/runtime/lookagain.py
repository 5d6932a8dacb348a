"""The last step of a pass: the one place that schedules the DaemonJob's next pass."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from daemonjob import defaults
from daemonjob.domain.decision.decide import Decision
from daemonjob.machinery.queue.workqueue import RateLimitingQueue

__all__ = ["next_tick", "schedule_next"]


def next_tick(decision: Decision, now: datetime) -> float | None:
    """Seconds to the schedule's next tick (no polling in between)."""
    if decision.requeue_at is None:
        return None
    delay = (decision.requeue_at - now).total_seconds()
    return max(0.0, delay) + defaults.SCHEDULE_REQUEUE_SLACK


def schedule_next(queue: RateLimitingQueue, key: str, delays: Iterable[float | None]) -> None:
    """At the earliest of what the pass's steps wait for (the cache's deadline, a held Job
    name, the next tick, a name conflict, a repair)."""
    wanted = [d for d in delays if d is not None]
    if wanted:
        queue.add_after(key, min(wanted))
