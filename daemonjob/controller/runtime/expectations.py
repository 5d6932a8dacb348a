"""Expectations: what a worker did that the cache has not shown yet.

A worker that created or deleted Jobs must not decide again for that DaemonJob until the
informer has delivered those changes, or it would act twice on a stale cache. Well before
any expiry, each pending name has a deadline: past it the controller checks that name
against the API server, clears it when the cache already agrees with what the API server
holds, and otherwise says what it waits for (the Reconciling condition,
`daemonjob_expectations_pending_overdue`).

Records expire after a TTL (5 minutes, as the DaemonSet controller) so a lost event cannot
wedge a DaemonJob forever. A create expires only once the Job watch has passed it: a watch
far behind the controller's own writes (a slow or overloaded API server, a paused process)
has lost nothing, and expiring its creates made each Job a second time. The controller
knows the order of its own writes: a create sent after another's answer came is later in
the watch, so once the watch has shown the later one, the earlier one's event was lost.
A create is also cleared by a relist (its list shows the Job, through the same handlers) or
by the check against the API server finding it absent (then creating it again is right).
The pending creates over every DaemonJob are what the create back-pressure bounds
(backpressure.py); `on_seen` is told each time they fall.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from daemonjob import defaults
from daemonjob.machinery.process.clock import RealClock


@dataclass
class _Pending:
    creates: dict[str, float] = field(default_factory=dict)  # Job name -> when the expectation was raised
    deletes: dict[str, float] = field(default_factory=dict)
    raised: float = 0.0  # the last expectation raised: the TTL counts from it
    after: dict[str, int] = field(default_factory=dict)  # create -> creates answered before it was sent
    answered: dict[str, int] = field(default_factory=dict)  # create -> its place among the answered


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
        deadline: float = defaults.EXPECTATIONS_DEADLINE,
    ):
        self._records: dict[str, _Pending] = {}
        self._ttl = ttl
        self._timer = timer
        self.deadline = deadline
        self._lock = threading.Lock()
        self._unseen = 0  # pending creates over every DaemonJob
        self._answered = 0  # creates the API server answered, in order
        self._passed = 0  # the watch has shown a create sent after this many were answered
        self.on_seen: Callable[[], None] = lambda: None  # the pending creates fell

    def expect_creations(self, key: str, names: Iterable[str]) -> None:
        self._expect(key, names, creates=True)

    def expect_deletions(self, key: str, names: Iterable[str]) -> None:
        self._expect(key, names, creates=False)

    def _expect(self, key: str, names: Iterable[str], creates: bool) -> None:
        now = self._timer()
        with self._lock:
            pending = self._live(key) or self._records.setdefault(key, _Pending())
            before = len(pending.creates)
            names = list(names)
            (pending.creates if creates else pending.deletes).update(dict.fromkeys(names, now))
            if creates:
                pending.after.update(dict.fromkeys(names, self._answered))
            pending.raised = now  # (re)starts the TTL, as a fresh expectation
            self._unseen += len(pending.creates) - before

    def create_answered(self, key: str, name: str) -> None:
        """The API server created `name`: whatever is sent from now on comes after it in the watch."""
        with self._lock:
            self._answered += 1
            pending = self._records.get(key)
            if pending is not None and name in pending.creates:
                pending.answered[name] = self._answered

    def creation_observed(self, key: str, name: str) -> None:
        """The watch (or a relist) shows `name`: and every create answered before it was sent."""
        self._lower(key, name, shown=True)

    def creation_cancelled(self, key: str, name: str) -> None:
        """`name` will not show: its create failed, or the API server does not hold it."""
        self._lower(key, name, shown=False)

    def _lower(self, key: str, name: str, shown: bool) -> None:
        with self._lock:
            pending = self._records.get(key)
            if pending is None or pending.creates.pop(name, None) is None:
                return
            after = pending.after.pop(name, 0)
            self._passed = max(self._passed, after) if shown else self._passed
            pending.answered.pop(name, None)
            self._unseen -= 1
            self._drop_if_empty(key, pending)
        self.on_seen()

    def deletion_observed(self, key: str, name: str) -> None:
        with self._lock:
            pending = self._records.get(key)
            if pending is not None:
                pending.deletes.pop(name, None)
                self._drop_if_empty(key, pending)

    def satisfied(self, key: str) -> bool:
        """True when nothing is pending for `key` (or what was pending has expired)."""
        with self._lock:
            unseen = self._unseen
            live = self._live(key)
        if self._unseen < unseen:  # lost creates expired: room for creates held back
            self.on_seen()
        return live is None

    def pending(self, key: str) -> tuple[int, int]:
        with self._lock:
            pending = self._live(key)
            return (0, 0) if pending is None else (len(pending.creates), len(pending.deletes))

    def unseen_creates(self) -> int:
        """Creates the API server accepted that the Job watch has not shown yet, over every DaemonJob."""
        return self._unseen

    def waiting(self, key: str, overdue_only: bool = False) -> Waiting:
        """What `key` waits for; with `overdue_only`, only names pending past the deadline."""
        cutoff = self._timer() - self.deadline if overdue_only else float("inf")
        with self._lock:
            pending = self._live(key)
            if pending is None:
                return Waiting((), (), 0.0)
            creates = {n: t for n, t in pending.creates.items() if t <= cutoff}
            deletes = {n: t for n, t in pending.deletes.items() if t <= cutoff}
        since = min([*creates.values(), *deletes.values()], default=0.0)
        return Waiting(tuple(sorted(creates)), tuple(sorted(deletes)), since)

    def next_deadline(self, key: str) -> float | None:
        """When the oldest pending name of `key` passes its deadline (None: nothing pending)."""
        with self._lock:
            pending = self._live(key)
            if pending is None:
                return None
            raised = [*pending.creates.values(), *pending.deletes.values()]
        return min(raised) + self.deadline if raised else None

    def overdue(self) -> int:
        """Names pending past their deadline, over every DaemonJob (a gauge reads it)."""
        cutoff = self._timer() - self.deadline
        with self._lock:
            records = [p for p in (self._live(k) for k in list(self._records)) if p is not None]
            return sum(1 for p in records for t in (*p.creates.values(), *p.deletes.values()) if t <= cutoff)

    def forget(self, key: str) -> None:
        with self._lock:
            pending = self._records.pop(key, None)
            if pending is None or not pending.creates:
                return
            self._unseen -= len(pending.creates)
        self.on_seen()

    def _live(self, key: str) -> _Pending | None:
        """The record of `key`, past the TTL without its deletes and the creates the watch has
        passed; None when nothing is left. Called with the lock held."""
        pending = self._records.get(key)
        if pending is None:
            return None
        if self._timer() - pending.raised > self._ttl:
            pending.deletes.clear()
            lost = [n for n, i in pending.answered.items() if i <= self._passed]
            for name in lost:
                del pending.creates[name], pending.after[name], pending.answered[name]
            self._unseen -= len(lost)
        return self._drop_if_empty(key, pending)

    def _drop_if_empty(self, key: str, pending: _Pending) -> _Pending | None:
        if pending.creates or pending.deletes:
            return pending
        del self._records[key]
        return None
