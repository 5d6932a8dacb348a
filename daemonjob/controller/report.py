"""The report step of a pass: the decision's Events, the status, the metrics, the next wake-up.

The status is patched only when it changed, guarded by the resourceVersion it was computed
from; runs are counted with the status write that records them, so a refused write never
counts one twice. A scheduled DaemonJob is requeued for its next tick (no polling between
ticks), and one whose Job name another owner holds is looked at again now and then (its
removal sends no event here).
"""

from __future__ import annotations

from datetime import datetime

from daemonjob import defaults
from daemonjob.controller.act import Act
from daemonjob.controller.expectations import Waiting
from daemonjob.controller.jobcontrol import JobControl
from daemonjob.controller.metrics import Metrics
from daemonjob.controller.observe import Observation
from daemonjob.controller.troubles import Troubles
from daemonjob.domain.conditions import CacheWait, with_cache_wait
from daemonjob.domain.decide import Decision
from daemonjob.domain.jobs import format_time
from daemonjob.machinery.clock import Clock
from daemonjob.machinery.frozen import thaw
from daemonjob.machinery.workqueue import RateLimitingQueue

__all__ = ["Reporter"]


class Reporter:
    def __init__(self, act: Act, control: JobControl, *, metrics: Metrics, troubles: Troubles,
                 queue: RateLimitingQueue, clock: Clock) -> None:
        self.act = act
        self.control = control
        self.metrics = metrics
        self.troubles = troubles
        self.queue = queue
        self.clock = clock

    def report(self, seen: Observation, decision: Decision, now: datetime) -> None:
        for ev in decision.events:
            self.control.record_event(seen.dj, ev.type, ev.reason, ev.message)
        if self.act.write_status(seen.dj, thaw(seen.cached.get("status") or {}), decision.status):
            status = decision.status
            seen.log.debug("status updated", desired=status.get("desiredNodes"), active=status.get("activeNodes"),
                           succeeded=status.get("succeededNodes"), failed=status.get("failedNodes"))
            if decision.run_started is not None:
                seen.log.info("run started", run=decision.run_started)
            self.metrics.count_runs(seen.namespace, seen.name, seen.uid, decision.run_started is not None,
                                    decision.ticks_skipped, decision.run_finished)
        self.metrics.set_status(seen.namespace, seen.name, seen.uid, decision.status)
        self.metrics.observe_health(seen.dj, decision.status, now)
        self._requeue_at(seen.key, decision.requeue_at)
        if self.troubles.conflicts(seen.uid):  # a foreign Job's removal sends no event here: look again later
            self.queue.add_after(seen.key, defaults.CONFLICT_RECHECK_INTERVAL)

    def report_cache_wait(self, seen: Observation, decision: Decision, wait: Waiting, now: datetime) -> None:
        """Write the status with Reconciling naming what the controller waits for; act on nothing."""
        old = thaw(seen.cached.get("status") or {})
        previous = {c.get("type"): c for c in old.get("conditions") or ()}
        facts = CacheWait(wait.creates, wait.deletes, self.clock.now() - wait.since)
        status = with_cache_wait(decision.status, facts, previous, format_time(now), seen.dj["metadata"].get("generation"))
        if self.act.write_status(seen.dj, old, status):
            seen.log.debug("status updated while waiting for the cache")
        self.metrics.set_status(seen.namespace, seen.name, seen.uid, status)

    def _requeue_at(self, key: str, when: datetime | None) -> None:
        """Reconcile again at the next tick: no polling in between."""
        if when is not None:
            delay = (when - self.clock.wall()).total_seconds()
            self.queue.add_after(key, max(0.0, delay) + defaults.SCHEDULE_REQUEUE_SLACK)
