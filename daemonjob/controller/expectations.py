"""Expectations: what a worker did that the cache has not shown yet.

A worker that created or deleted Jobs must not decide again for that DaemonJob until the
informer has delivered those changes, or it would act twice on a stale cache. Records
expire after a TTL (5 minutes, as the DaemonSet controller) so a lost event cannot wedge a
DaemonJob forever.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from cachetools import TTLCache

from daemonjob import defaults
from daemonjob.machinery.clock import RealClock


@dataclass
class _Pending:
    creates: set[str] = field(default_factory=set)
    deletes: set[str] = field(default_factory=set)


class Expectations:
    """Per-DaemonJob sets of Job names whose creation or deletion is still unobserved."""

    def __init__(self, ttl: float = defaults.EXPECTATIONS_TTL, timer: Callable[[], float] = RealClock().now,
                 maxsize: int = 1_000_000):
        self._cache: TTLCache[str, _Pending] = TTLCache(maxsize=maxsize, ttl=ttl, timer=timer)
        self._lock = threading.Lock()

    def expect_creations(self, key: str, names: Iterable[str]) -> None:
        self._expect(key, names, creates=True)

    def expect_deletions(self, key: str, names: Iterable[str]) -> None:
        self._expect(key, names, creates=False)

    def _expect(self, key: str, names: Iterable[str], creates: bool) -> None:
        with self._lock:
            pending = self._cache.get(key) or _Pending()
            (pending.creates if creates else pending.deletes).update(names)
            self._cache[key] = pending  # (re)starts the TTL, as a fresh expectation

    def creation_observed(self, key: str, name: str) -> None:
        with self._lock:
            pending = self._cache.get(key)
            if pending is not None:
                pending.creates.discard(name)

    def deletion_observed(self, key: str, name: str) -> None:
        with self._lock:
            pending = self._cache.get(key)
            if pending is not None:
                pending.deletes.discard(name)

    def satisfied(self, key: str) -> bool:
        """True when nothing is pending for `key` (or what was pending has expired)."""
        with self._lock:
            pending = self._cache.get(key)
            return pending is None or (not pending.creates and not pending.deletes)

    def pending(self, key: str) -> tuple[int, int]:
        with self._lock:
            pending = self._cache.get(key)
            return (0, 0) if pending is None else (len(pending.creates), len(pending.deletes))

    def forget(self, key: str) -> None:
        with self._lock:
            self._cache.pop(key, None)
