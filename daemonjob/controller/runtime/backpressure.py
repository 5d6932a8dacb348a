"""Create back-pressure: new Job creates wait while the Job watch is far behind this controller's writes.

Every create the API server accepted stays an expectation until the Job watch shows it
(expectations.py), so their count is how far the watch is behind the controller's own
writes. Past `defaults.MAX_UNSEEN_CREATES` a pass creates only what fits under the bound and
the DaemonJob is held. The decision is told the room first (`room`), so it names and builds
only the Jobs that may go, not those of every node still to start; once the watch has shown enough of them (down to
`defaults.UNSEEN_CREATES_RESUME`), the held DaemonJobs are queued again, not at the next
resync: the longest held first, and only as many as the room takes, since a DaemonJob over
tens of thousands of nodes wants more than the whole room, and the others, woken with it,
would decide over all their nodes only to be held again. The next one held is queued after
`defaults.HELD_RECHECK` as well, so the held move on even if those woken create nothing
(deleted, suspended, or their nodes gone). A DaemonJob whose own creates went out is queued
again by their events anyway.
A held rollout says why: its Reconciling condition's message (`with_creates_held`),
`daemonjob_creates_held` and `daemonjob_job_creates_unseen`, and a log line naming it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Gauge

from daemonjob import defaults

__all__ = ["CreateBackPressure", "HELD_MESSAGE", "with_creates_held"]

HELD_MESSAGE = "new node Jobs are held back until the Job watch shows this controller's earlier creates"


def with_creates_held(status: Mapping[str, Any]) -> dict[str, Any]:
    """`status` with a True Reconciling condition saying that creates are held (its reason kept)."""
    conditions = []
    for c in status.get("conditions") or ():
        if c.get("type") == "Reconciling" and c.get("status") == "True" and HELD_MESSAGE not in c.get("message", ""):
            c = {**c, "message": f"{c['message']}; {HELD_MESSAGE}" if c.get("message") else HELD_MESSAGE}
        conditions.append(c)
    return {**status, "conditions": conditions}


class CreateBackPressure:
    """How many creates a pass may send now; which DaemonJobs (queue keys) wait for room."""

    def __init__(
        self,
        unseen: Callable[[], int],
        wake: Callable[[str], None],
        wake_later: Callable[[str, float], None] | None = None,
        limit: int = defaults.MAX_UNSEEN_CREATES,
        resume: int = defaults.UNSEEN_CREATES_RESUME,
    ) -> None:
        """`unseen`: the creates the watch has not shown yet; `wake`: queues a DaemonJob again;
        `wake_later`: after a delay (without it, every held DaemonJob is woken at once)."""
        self._unseen, self._wake, self._wake_later = unseen, wake, wake_later
        self.limit, self.resume = max(1, limit), max(0, min(resume, limit - 1))
        self._held: dict[str, int] = {}  # key -> the creates it was refused, the longest held first
        self._sending = 0  # admitted creates whose expectations may not be raised yet
        self._lock = threading.Lock()

    def room(self) -> int:
        """How many creates would fit under the bound now (a pass's decision is cut to it)."""
        with self._lock:
            return max(0, self.limit - self._unseen() - self._sending)

    def admit(self, key: str, wanted: int, ready: int | None = None) -> int:
        """How many of the `ready` creates (all `wanted` if None) may go now; room for fewer than
        `wanted` holds `key` until the watch catches up. The caller hands the count back to `sent`
        once they went (or failed). A decision cut to a room that has grown since is queued again
        at once: the room is there, and no `seen` may come to wake it."""
        ready = wanted if ready is None else min(ready, wanted)
        if wanted <= 0:
            return 0
        with self._lock:
            room = max(0, self.limit - self._unseen() - self._sending)
            self._held.pop(key, None)
            admitted = min(room, ready)
            again = ready < wanted and room > admitted
            if room < wanted and not again:
                self._held[key] = wanted - room  # under the lock: a `seen` after the read above finds it
            self._sending += admitted
        if again:
            self._wake(key)
        return admitted

    def sent(self, admitted: int) -> None:
        """The admitted creates went: each is an expectation now, or failed (and counts no more)."""
        with self._lock:
            self._sending -= admitted

    def seen(self) -> None:
        """The watch showed creates (or they were cleared): once down to `resume`, wake the
        longest held, as many as the room takes, and the next one a little later."""
        if not self._held:  # the common case, on every Job event: no lock
            return
        with self._lock:
            unseen = self._unseen()
            if not self._held or unseen > self.resume:
                return
            room = max(1, self.limit - unseen - self._sending)
            woken: list[str] = []
            for key, refused in list(self._held.items()):
                if room <= 0 and self._wake_later is not None:
                    break
                woken.append(key)
                room -= refused
                del self._held[key]
            watchdog = next(iter(self._held), None)
        for key in woken:
            self._wake(key)
        if watchdog is not None and self._wake_later is not None:
            self._wake_later(watchdog, defaults.HELD_RECHECK)

    def held(self) -> int:
        return len(self._held)

    def register(self, registry: CollectorRegistry) -> None:
        """The gauges that say a rollout is held, and how far the watch is behind."""
        try:
            held = Gauge(
                "daemonjob_creates_held",
                "DaemonJobs whose new Job creates are held back while the Job watch is behind "
                "this controller's own creates (released as it catches up).",
                registry=registry,
            )
            unseen = Gauge(
                "daemonjob_job_creates_unseen",
                "Job creates the API server accepted that the Job watch has not shown yet "
                "(creates are held back past the bound).",
                registry=registry,
            )
        except ValueError:
            return  # Metrics shared with another controller (tests): counted by the first
        held.set_function(self.held)
        unseen.set_function(self._unseen)
