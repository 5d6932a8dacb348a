"""Create back-pressure: new Job creates wait while the Job watch is far behind this controller's writes.

Every create the API server accepted stays an expectation until the Job watch shows it
(expectations.py), so their count is how far the watch is behind the controller's own
writes. Past `defaults.MAX_UNSEEN_CREATES` a pass creates only what fits under the bound and
the DaemonJob is held; once the watch has shown enough of them (down to
`defaults.UNSEEN_CREATES_RESUME`), every held DaemonJob is queued again at once, not at the
next resync. A DaemonJob whose own creates went out is queued again by their events anyway.
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
        limit: int = defaults.MAX_UNSEEN_CREATES,
        resume: int = defaults.UNSEEN_CREATES_RESUME,
    ) -> None:
        """`unseen`: the creates the watch has not shown yet; `wake`: queues a DaemonJob again."""
        self._unseen, self._wake = unseen, wake
        self.limit, self.resume = max(1, limit), max(0, min(resume, limit - 1))
        self._held: set[str] = set()
        self._sending = 0  # admitted creates whose expectations may not be raised yet
        self._lock = threading.Lock()

    def admit(self, key: str, wanted: int) -> int:
        """How many of `wanted` creates may go now; fewer holds `key` until the watch catches up.
        The caller hands the count back to `sent` once they went (or failed)."""
        if wanted <= 0:
            return 0
        with self._lock:
            room = max(0, self.limit - self._unseen() - self._sending)
            if room < wanted:
                self._held.add(key)  # under the lock: a `seen` after the read above finds it
            admitted = min(room, wanted)
            self._sending += admitted
            return admitted

    def sent(self, admitted: int) -> None:
        """The admitted creates went: each is an expectation now, or failed (and counts no more)."""
        with self._lock:
            self._sending -= admitted

    def seen(self) -> None:
        """The watch showed creates (or they were cleared): release the held once down to `resume`."""
        if not self._held:  # the common case, on every Job event: no lock
            return
        with self._lock:
            if not self._held or self._unseen() > self.resume:
                return
            keys, self._held = self._held, set()
        for key in sorted(keys):
            self._wake(key)

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
