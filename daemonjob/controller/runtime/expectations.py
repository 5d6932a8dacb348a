"""Expectations: what a worker did that the cache has not shown yet.

A worker that created or deleted Jobs must not decide again for that DaemonJob until the
informer has delivered those changes, or it would act twice on a stale cache. Records
expire after a TTL (5 minutes, as the DaemonSet controller) so a lost event cannot wedge a
DaemonJob forever; well before that, each pending name has a deadline: past it the
controller checks that name against the API server, clears it when the cache already
agrees with what the API server holds, and otherwise says what it waits for (the
Reconciling condition, `daemonjob_expectations_pending_overdue`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from cachetools import TTLCache

from daemonjob import defaults
from daemonjob.machinery.process.clock import RealClock


@dataclass
class _Pending:
    creates: dict[str, float] = field(default_factory=dict)  # Job name -> when the expectation was raised
    deletes: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Waiting:
    """A snapshot of what one DaemonJob waits for: Job names, and since when the oldest."""

    creates: tuple[str, ...]
    deletes: tuple[str, ...]
    since: float  # clock time the oldest of them was raised

    def __bool__(self) -> bool:
        return bool(self.creates or self.deletes)


class Expectations:
    """Per-DaemonJob Job names whose creation or deletion is still unobserved."""

    def __init__(
        self,
        ttl: float = defaults.EXPECTATIONS_TTL,
        timer: Callable[[], float] = RealClock().now,
        maxsize: int = 1_000_000,
        deadline: float = defaults.EXPECTATIONS_DEADLINE,
    ):
        self._cache: TTLCache[str, _Pending] = TTLCache(maxsize=maxsize, ttl=ttl, timer=timer)
        self._timer = timer
        self.deadline = deadline
        self._lock = threading.Lock()

    def expect_creations(self, key: str, names: Iterable[str]) -> None:
        self._expect(key, names, creates=True)

    def expect_deletions(self, key: str, names: Iterable[str]) -> None:
        self._expect(key, names, creates=False)

    def _expect(self, key: str, names: Iterable[str], creates: bool) -> None:
        now = self._timer()
        with self._lock:
            pending = self._cache.get(key) or _Pending()
            (pending.creates if creates else pending.deletes).update(dict.fromkeys(names, now))
            self._cache[key] = pending  # (re)starts the TTL, as a fresh expectation

    def creation_observed(self, key: str, name: str) -> None:
        with self._lock:
            pending = self._cache.get(key)
            if pending is not None:
                pending.creates.pop(name, None)

    def deletion_observed(self, key: str, name: str) -> None:
        with self._lock:
            pending = self._cache.get(key)
            if pending is not None:
                pending.deletes.pop(name, None)

    def satisfied(self, key: str) -> bool:
        """True when nothing is pending for `key` (or what was pending has expired)."""
        with self._lock:
            pending = self._cache.get(key)
            return pending is None or (not pending.creates and not pending.deletes)

    def pending(self, key: str) -> tuple[int, int]:
        with self._lock:
            pending = self._cache.get(key)
            return (0, 0) if pending is None else (len(pending.creates), len(pending.deletes))

    def waiting(self, key: str, overdue_only: bool = False) -> Waiting:
        """What `key` waits for; with `overdue_only`, only names pending past the deadline."""
        cutoff = self._timer() - self.deadline if overdue_only else float("inf")
        with self._lock:
            pending = self._cache.get(key)
            if pending is None:
                return Waiting((), (), 0.0)
            creates = {n: t for n, t in pending.creates.items() if t <= cutoff}
            deletes = {n: t for n, t in pending.deletes.items() if t <= cutoff}
        since = min([*creates.values(), *deletes.values()], default=0.0)
        return Waiting(tuple(sorted(creates)), tuple(sorted(deletes)), since)

    def next_deadline(self, key: str) -> float | None:
        """When the oldest pending name of `key` passes its deadline (None: nothing pending)."""
        with self._lock:
            pending = self._cache.get(key)
            if pending is None:
                return None
            raised = [*pending.creates.values(), *pending.deletes.values()]
        return min(raised) + self.deadline if raised else None

    def overdue(self) -> int:
        """Names pending past their deadline, over every DaemonJob (a gauge reads it)."""
        cutoff = self._timer() - self.deadline
        with self._lock:
            records = list(self._cache.values())  # TTLCache iteration skips expired records
            return sum(1 for p in records for t in (*p.creates.values(), *p.deletes.values()) if t <= cutoff)

    def forget(self, key: str) -> None:
        with self._lock:
            self._cache.pop(key, None)
