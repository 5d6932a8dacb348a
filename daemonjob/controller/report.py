"""The report step of a pass: the Events, the status, the metrics.

The one place a pass posts Events: what adoption and act did, then the decision's own. The
status is patched only when it changed, guarded by the resourceVersion it was computed
from; runs are counted with the status write that records them, so a refused write never
counts one twice. While the cache does not show the controller's own writes past their
deadline, the status says so (Reconciling, WaitingForCache) and nothing else is reported.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from daemonjob.controller.expectations import Waiting
from daemonjob.controller.jobcontrol import JobControl
from daemonjob.controller.metrics import Metrics
from daemonjob.controller.observe import Observation
from daemonjob.domain.conditions import CacheWait, with_cache_wait
from daemonjob.domain.decide import NODE_COUNT_FIELDS, Decision, EventSpec
from daemonjob.domain.jobs import format_time
from daemonjob.machinery.clock import Clock
from daemonjob.machinery.frozen import thaw
from daemonjob.machinery.kube import ApiError

__all__ = ["Reporter", "write_status"]


def write_status(control: JobControl, dj: Mapping[str, Any], old: Mapping[str, Any],
                 status: Mapping[str, Any]) -> bool:
    """Patch only a changed status, guarded by the resourceVersion it was computed from."""
    if old == status:
        return False
    patch = {**{k: None for k in old if k not in status}, **status}
    meta = dj["metadata"]
    try:
        control.patch_status(meta["namespace"], meta["name"], patch, meta.get("resourceVersion"))
    except ApiError as exc:
        if exc.not_found:
            return False
        raise
    return True


class Reporter:
    def __init__(self, control: JobControl, *, metrics: Metrics, clock: Clock) -> None:
        self.control = control
        self.metrics = metrics
        self.clock = clock

    def report(self, seen: Observation, decision: Decision, now: datetime, events: Iterable[EventSpec] = (),
               wait: Waiting | None = None) -> None:
        """`events`: what the pass did before (adoption, act); `wait`: what the cache still does
        not show past the deadline, when the pass acted on nothing for it."""
        if wait is not None:
            self._report_cache_wait(seen, decision, wait, now)
            return
        self.post(seen, [*events, *decision.events])
        if write_status(self.control, seen.dj, thaw(seen.cached.get("status") or {}), decision.status):
            status = decision.status
            seen.log.debug("status updated", **{f.removesuffix("Nodes"): status.get(f) for f in NODE_COUNT_FIELDS[:4]})
            if decision.run_started is not None:
                seen.log.info("run started", run=decision.run_started)
            self.metrics.count_runs(seen.namespace, seen.name, seen.uid, decision.run_started is not None,
                                    decision.ticks_skipped, decision.run_finished)
        self.metrics.set_status(seen.namespace, seen.name, seen.uid, decision.status)
        self.metrics.observe_health(seen.dj, decision.status, now)

    def post(self, seen: Observation, events: Iterable[EventSpec]) -> None:
        for ev in events:
            self.control.record_event(seen.dj, ev.type, ev.reason, ev.message)

    def _report_cache_wait(self, seen: Observation, decision: Decision, wait: Waiting, now: datetime) -> None:
        """Write the status with Reconciling naming what the controller waits for; act on nothing."""
        old = thaw(seen.cached.get("status") or {})
        previous = {c.get("type"): c for c in old.get("conditions") or ()}
        facts = CacheWait(wait.creates, wait.deletes, self.clock.now() - wait.since)
        status = with_cache_wait(decision.status, facts, previous, format_time(now),
                                 seen.dj["metadata"].get("generation"))
        if write_status(self.control, seen.dj, old, status):
            seen.log.debug("status updated while waiting for the cache")
        self.metrics.set_status(seen.namespace, seen.name, seen.uid, status)
