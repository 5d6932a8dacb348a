"""The per-DaemonJob series that alerts read: conditions, last progress, schedule ticks.

Kept apart from the node counts in `metrics.py`: these need the DaemonJob itself (its
schedule) and remember what they saw last, so that an alert can say "Reconciling for an
hour with no Job started or finished" or "no run succeeded since the tick before the
latest one" without per-DaemonJob tuning in the rules.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from prometheus_client import CollectorRegistry, Gauge

from daemonjob.domain.decision.decide import NODE_COUNT_FIELDS
from daemonjob.domain.shared.timestamps import parse_time
from daemonjob.domain.spec.spec import DaemonJobSpec
from daemonjob.domain.spec.validate import read_spec

CONDITION_TYPES = ("Complete", "Failed", "Reconciling", "Stalled")
# kube-state-metrics' spelling of a condition's status: one series each, the current one is 1.
CONDITION_STATUSES = ("true", "false", "unknown")
# What counts as progress: a Job started or finished, a node joined or left, a new revision or run.
PROGRESS_FIELDS = ("currentRevision", "currentRun", *NODE_COUNT_FIELDS)
_TICK_EPSILON = timedelta(microseconds=1)


class HealthMetrics:
    """Gauges per DaemonJob, updated from each reconcile's decided status."""

    def __init__(self, registry: CollectorRegistry):
        per_dj = ["namespace", "name"]
        self.condition = Gauge(
            "daemonjob_status_condition",
            "1 for the current status (true, false, unknown) of each condition type of a DaemonJob, else 0.",
            [*per_dj, "type", "status"],
            registry=registry,
        )
        self.last_progress = Gauge(
            "daemonjob_last_progress_time_seconds",
            "Unix time a DaemonJob's node counts, revision or run last changed (as seen by this process).",
            per_dj,
            registry=registry,
        )
        self.last_schedule = Gauge(
            "daemonjob_last_schedule_time_seconds",
            "Unix time of the tick of the latest scheduled run.",
            per_dj,
            registry=registry,
        )
        self.previous_tick = Gauge(
            "daemonjob_previous_schedule_time_seconds",
            "Unix time of the schedule's tick before the latest one, while the DaemonJob existed and is not "
            "suspended: a run should have succeeded since.",
            per_dj,
            registry=registry,
        )
        self._lock = threading.Lock()
        self._progress: dict[tuple[str, str], tuple[Any, ...]] = {}

    def observe(
        self, dj: Mapping[str, Any], status: Mapping[str, Any], now: datetime, spec: DaemonJobSpec | None = None
    ) -> None:
        """Record the status decided for `dj` at `now` (the reconcile's one instant); `spec`: its
        spec as read (read here if None)."""
        meta = dj.get("metadata") or {}
        namespace, name = meta.get("namespace") or "", meta.get("name") or ""
        with self._lock:
            self._set_conditions(namespace, name, status)
            key = (namespace, name)
            progress = tuple(status.get(f) for f in PROGRESS_FIELDS)
            if self._progress.get(key) != progress:
                self._progress[key] = progress
                self.last_progress.labels(namespace, name).set(now.timestamp())
            _set_time(self.last_schedule, namespace, name, parse_time(status.get("lastScheduleTime")))
            tick = previous_tick(dj, status, now, spec)
            _set_time(self.previous_tick, namespace, name, tick)

    def forget(self, namespace: str, name: str) -> None:
        """Drop a deleted DaemonJob's series."""
        with self._lock:
            self._progress.pop((namespace, name), None)
            for ctype in CONDITION_TYPES:
                for cstatus in CONDITION_STATUSES:
                    _remove(self.condition, namespace, name, ctype, cstatus)
            for gauge in (self.last_progress, self.last_schedule, self.previous_tick):
                _remove(gauge, namespace, name)

    def _set_conditions(self, namespace: str, name: str, status: Mapping[str, Any]) -> None:
        current = {c.get("type"): str(c.get("status") or "").lower() for c in status.get("conditions") or ()}
        for ctype in CONDITION_TYPES:
            value = current.get(ctype)
            for cstatus in CONDITION_STATUSES:
                if value is None:
                    _remove(self.condition, namespace, name, ctype, cstatus)
                else:
                    self.condition.labels(namespace, name, ctype, cstatus).set(1 if value == cstatus else 0)


def previous_tick(
    dj: Mapping[str, Any], status: Mapping[str, Any], now: datetime, spec: DaemonJobSpec | None = None
) -> datetime | None:
    """The schedule's tick before the latest one at `now`, or None: no (valid) schedule,
    suspended (no next tick), or the DaemonJob did not exist yet at that tick."""
    schedule = (spec if spec is not None else read_spec(dj)).runs.schedule
    if schedule is None or not status.get("nextScheduleTime"):
        return None
    latest = schedule.latest_at_or_before(now)
    before = schedule.latest_at_or_before(latest - _TICK_EPSILON) if latest is not None else None
    created = parse_time((dj.get("metadata") or {}).get("creationTimestamp"))
    if before is None or (created is not None and before < created):
        return None
    return before


def _set_time(gauge: Gauge, namespace: str, name: str, when: datetime | None) -> None:
    if when is None:
        _remove(gauge, namespace, name)
    else:
        gauge.labels(namespace, name).set(when.timestamp())


def _remove(gauge: Gauge, *labels: str) -> None:
    try:
        gauge.remove(*labels)
    except KeyError:
        pass
