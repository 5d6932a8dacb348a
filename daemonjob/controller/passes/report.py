"""The report step of a pass: the Events, the status, the metrics.

The one place a pass posts Events: what adoption and act did, then the decision's own. The
status is patched only when it changed, guarded by the resourceVersion it was computed
from; runs are counted with the status write that records them, so a refused write never
counts one twice. While the cache does not show the controller's own writes past their
deadline, the status says so (Reconciling, WaitingForCache) and nothing else is reported.

A pass whose creates all went through writes no status when all it would change is counts
and conditions: those counts are stale the moment the Jobs exist, and the Jobs' arrival in
the cache (which the expectations wait for) brings the pass that writes them, so a wave of
creates costs one status write, not two, and the creating pass one round trip.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from daemonjob.controller.metrics.metrics import Metrics
from daemonjob.controller.passes.observe import Observation
from daemonjob.controller.runtime.expectations import Waiting
from daemonjob.controller.runtime.jobcontrol import JobControl
from daemonjob.domain.decision.decide import NODE_COUNT_FIELDS, Decision
from daemonjob.domain.rollout.cachewait import CacheWait, with_cache_wait
from daemonjob.domain.shared.events import EventSpec
from daemonjob.domain.shared.timestamps import format_time
from daemonjob.machinery.cache.frozen import thaw
from daemonjob.machinery.client.kube import ApiError
from daemonjob.machinery.process.clock import Clock

__all__ = ["DEFERRABLE_STATUS_FIELDS", "Reporter", "deferrable", "merge_patch", "write_status"]


# What a pass that created Jobs leaves to the pass that sees them (report.py's docstring).
DEFERRABLE_STATUS_FIELDS = frozenset((*NODE_COUNT_FIELDS, "failedNodeNames", "conditions", "completionTime"))


def deferrable(old: Mapping[str, Any], status: Mapping[str, Any]) -> bool:
    """The status changes nothing but counts and conditions (completionTime goes with
    Complete); not a revision, run, generation or node maintenance outcome, which are
    recorded by the pass that makes them."""
    keys = (old.keys() | status.keys()) - DEFERRABLE_STATUS_FIELDS
    return all(old.get(k) == status.get(k) for k in keys)


def merge_patch(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON merge patch (RFC 7386) turning `old` into `new`: a merge patch keeps every key
    it does not name, so one gone at any depth (status.results.error, say) is sent as null."""
    out: dict[str, Any] = {k: None for k in old if k not in new}
    for k, v in new.items():
        was = old.get(k)
        out[k] = merge_patch(was, v) if isinstance(v, Mapping) and isinstance(was, Mapping) else v
    return out


def write_status(control: JobControl, dj: Mapping[str, Any], old: Mapping[str, Any], status: Mapping[str, Any]) -> bool:
    """Patch only a changed status, guarded by the resourceVersion it was computed from."""
    if old == status:
        return False
    patch = merge_patch(old, status)
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

    def report(
        self,
        observed: Observation,
        decision: Decision,
        now: datetime,
        events: Iterable[EventSpec] = (),
        wait: Waiting | None = None,
        created: bool = False,
    ) -> None:
        """`events`: what the pass did before (adoption, act); `wait`: what the cache still does
        not show past the deadline, when the pass acted on nothing for it; `created`: every
        create of the pass went through (the cache's view of them brings the next pass)."""
        if wait is not None:
            self._report_cache_wait(observed, decision, wait, now)
            return
        self.post(observed, [*events, *decision.events])
        old = thaw(observed.cached.get("status") or {})
        if created and decision.run_started is None and old and deferrable(old, decision.status):
            observed.log.debug("status left to the pass that sees the created Jobs")
        elif write_status(self.control, observed.dj, old, decision.status):
            status = decision.status
            observed.log.debug(
                "status updated", **{f.removesuffix("Nodes"): status.get(f) for f in NODE_COUNT_FIELDS[:4]}
            )
            if decision.run_started is not None:
                observed.log.info("run started", run=decision.run_started)
            self.metrics.count_runs(
                observed.namespace,
                observed.name,
                observed.uid,
                decision.run_started is not None,
                decision.ticks_skipped,
                decision.run_finished,
            )
        self.metrics.set_status(observed.namespace, observed.name, observed.uid, decision.status)
        spec = decision.reading.checked.spec if decision.reading is not None else None
        self.metrics.observe_health(observed.dj, decision.status, now, spec)

    def post(self, observed: Observation, events: Iterable[EventSpec]) -> None:
        self.post_about(observed.dj, events)

    def post_about(self, dj: Mapping[str, Any], events: Iterable[EventSpec]) -> None:
        """Events about `dj` outside a pass's reading of it (the maintenance finalizer's)."""
        for ev in events:
            self.control.record_event(dj, ev.type, ev.reason, ev.message)

    def _report_cache_wait(self, observed: Observation, decision: Decision, wait: Waiting, now: datetime) -> None:
        """Write the status with Reconciling naming what the controller waits for; act on nothing."""
        old = thaw(observed.cached.get("status") or {})
        previous = {c.get("type"): c for c in old.get("conditions") or ()}
        facts = CacheWait(wait.creates, wait.deletes, self.clock.now() - wait.since)
        status = with_cache_wait(
            decision.status, facts, previous, format_time(now), observed.dj["metadata"].get("generation")
        )
        if write_status(self.control, observed.dj, old, status):
            observed.log.debug("status updated while waiting for the cache")
        self.metrics.set_status(observed.namespace, observed.name, observed.uid, status)
