"""When the result recorder writes a DaemonJob's results waiting, and whether its thread must
look again for that: Job events come by the hundred per second and a look goes over every
DaemonJob with results waiting, so a note that brings no write sooner wakes nothing."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial

from daemonjob import defaults
from daemonjob.controller.results.kept import Kept

__all__ = ["due_at", "sooner_than", "writes_due"]


def due_at(kept: Kept, running: Callable[[], bool]) -> float | None:
    """RESULT_FLUSH_DELAY after the first result waiting; RESULT_FLUSH_IDLE after it once a batch
    is full or none of the DaemonJob's Jobs runs; never before a failed write's retry time."""
    if kept.since is None or not kept.pending:
        return None
    at = kept.since + defaults.RESULT_FLUSH_DELAY
    if len(kept.pending) >= defaults.RESULT_FLUSH_COUNT or not running():
        at = min(at, kept.since + defaults.RESULT_FLUSH_IDLE)
    return max(at, kept.retry_at)


def sooner_than(kept: Kept, running: Callable[[], bool], looks_at: float) -> bool:
    """Whether `kept`'s write falls due before `looks_at`, `running` read only if that decides it."""
    if kept.since is None or not kept.pending:
        return False
    if max(kept.since + defaults.RESULT_FLUSH_DELAY, kept.retry_at) < looks_at:
        return True  # due by the delay alone: the index need not be read
    at = due_at(kept, running)
    return at is not None and at < looks_at


def writes_due(kept: Mapping[str, Kept], running: Callable[[str], bool], now: float) -> tuple[list[str], float | None]:
    """The DaemonJobs (by uid) whose results waiting are to be written now, or whose reports are
    to be read again, and how long until the next is (None: until a note)."""
    due: list[str] = []
    wait: float | None = None
    for dj_uid, k in kept.items():
        at: float | None
        if k.regroup and not k.pending:
            at = k.retry_at  # a failed read is tried again, nothing else wakes it
        else:
            at = due_at(k, partial(running, dj_uid))
        if at is None:
            continue
        if at <= now:
            due.append(dj_uid)
        else:
            wait = at - now if wait is None else min(wait, at - now)
    return due, wait
