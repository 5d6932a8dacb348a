"""Scheduled and on-demand runs: when a DaemonJob starts a new run on every node.

Pure: the time is passed in (aware datetimes), nothing is read or written. `schedule_step`
is the one entry point for `decide` and the controller; the smaller functions are its
parts, public so that each rule is a unit test.

Semantics follow the Kubernetes CronJob where they apply (getMostRecentScheduleTime:
only the latest missed tick runs, never a burst; a tick later than
startingDeadlineSeconds is skipped). They differ on purpose where the CronJob surprises:
the zone defaults to UTC (not the controller's zone), daylight-saving changes follow
Debian cron (a tick in a spring-forward gap fires when the clock jumps, a fixed-time tick
in a repeated autumn hour fires once), a tick skipped by Forbid or while suspended is
consumed (it never starts late), and a schedule edit takes effect from its next tick.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from daemonjob.domain.schedule.cron import InvalidSchedule, Schedule, aware, due_tick, quoted
from daemonjob.domain.schedule.runids import tick_run_id, trigger_run_id
from daemonjob.domain.schedule.runsettings import FORBID, REPLACE, Runs
from daemonjob.domain.shared.events import NORMAL, WARNING, EventSpec
from daemonjob.domain.shared.timestamps import format_time, parse_time

__all__ = [
    "ANNOTATION_RUN_NOW",
    "SKIP_FORBID",
    "SKIP_DEADLINE",
    "SKIP_MISSED",
    "SKIP_SUSPENDED",
    "RunStart",
    "SkippedTicks",
    "ScheduleStep",
    "schedule_step",
]

ANNOTATION_RUN_NOW = "daemonjob.io/run-now"

# Why a tick did not start a run (the reason of its Event, a metric label).
SKIP_FORBID = "ConcurrencyForbid"
SKIP_DEADLINE = "MissedDeadline"
SKIP_MISSED = "Missed"
SKIP_SUSPENDED = "Suspended"

EVENT_RUN_STARTED = "RunStarted"
EVENT_RUN_NOW_WAITING = "RunNowWaiting"


@dataclass(frozen=True, slots=True)
class RunStart:
    """A new run to start on every eligible node."""

    run: str  # the daemonjob.io/run label value; also status.currentRun
    scheduled_time: datetime | None  # the tick (UTC), None for a run-now run
    trigger: str | None  # the run-now value that started it, if any
    replace: bool  # Replace: the previous run's active Jobs are to be deleted


@dataclass(frozen=True, slots=True)
class SkippedTicks:
    reason: str  # SKIP_*
    count: int
    latest: datetime
    more: bool = False  # more than `count` (a long downtime)

    @property
    def message(self) -> str:
        n = f"more than {self.count}" if self.more else str(self.count)
        ticks = "tick" if self.count == 1 and not self.more else "ticks"
        why = {
            SKIP_FORBID: "the previous run is still active (concurrencyPolicy Forbid)",
            SKIP_DEADLINE: "missed by more than startingDeadlineSeconds",
            SKIP_MISSED: "missed while the controller was not running; only the latest runs",
            SKIP_SUSPENDED: "the DaemonJob is suspended",
        }[self.reason]
        return f"skipped {n} {ticks} up to {format_time(self.latest)}: {why}"


@dataclass(frozen=True, slots=True)
class ScheduleStep:
    """What the schedule wants of this reconcile; `status` merges into the DaemonJob's status."""

    start: RunStart | None = None
    skipped: tuple[SkippedTicks, ...] = ()
    current_run: str | None = None  # the run decide converges to (None: Jobs carry no run)
    status: dict[str, Any] = field(default_factory=dict)  # None values remove a field
    requeue_at: datetime | None = None  # the next tick: reconcile then, never poll
    waiting: str | None = None  # a run-now trigger that waits (for a note in a condition)
    problem: InvalidSchedule | None = None  # set Stalled with problem.reason/message

    def requeue_after(self, now: datetime) -> float | None:
        """Seconds until the next tick (at least 0), or None when nothing is scheduled."""
        if self.requeue_at is None:
            return None
        return max(0.0, (self.requeue_at - now).total_seconds())

    @property
    def events(self) -> tuple[EventSpec, ...]:
        out = [EventSpec(WARNING if s.reason != SKIP_SUSPENDED else NORMAL, s.reason, s.message) for s in self.skipped]
        if self.start is not None:
            if self.start.scheduled_time is not None:
                what = f"the tick of {format_time(self.start.scheduled_time)}"
            else:
                what = f"{ANNOTATION_RUN_NOW}={quoted(self.start.trigger)}"
            replaced = "; the previous run's active Jobs are replaced" if self.start.replace else ""
            out.append(EventSpec(NORMAL, EVENT_RUN_STARTED, f"run {self.start.run} started for {what}{replaced}"))
        if self.waiting is not None:
            out.append(EventSpec(NORMAL, EVENT_RUN_NOW_WAITING, self.waiting))
        return tuple(out)


# What the status remembers of a schedule; cleared when the schedule is removed.
FORGOTTEN_WITH_THE_SCHEDULE = (
    "nextScheduleTime",
    "observedSchedule",
    "lastScheduleTime",
    "lastSkippedTime",
    "lastSkipReason",
)


def observed_schedule(schedule: Schedule) -> str:
    """What status.observedSchedule records: an edit of either field changes it."""
    return f"{schedule.expression} ({schedule.zone_name})"


def _base(schedule: Schedule, meta: Mapping[str, Any], status: Mapping[str, Any], now: datetime) -> datetime:
    """The last instant whose ticks are handled: ticks strictly after it are due.

    The last run or skip; for a new DaemonJob its creation (a tick missed before the first
    reconcile still runs); for a schedule added or edited later, now (missed ticks of
    another schedule never run under this one).
    """
    handled = [t for t in (parse_time(status.get("lastScheduleTime")), parse_time(status.get("lastSkippedTime"))) if t]
    seen = status.get("observedSchedule")
    if seen is not None and seen != observed_schedule(schedule):
        return max([now, *handled])
    if handled:
        return max(handled)
    if seen is None and status.get("observedGeneration") is not None:
        return now
    return parse_time(meta.get("creationTimestamp")) or now


def _mapping(value: Any) -> Mapping[str, Any]:
    """A malformed object (a status that is a string) reads as empty, never raises."""
    return value if isinstance(value, Mapping) else {}


def schedule_step(
    dj: Mapping[str, Any], runs: Runs, now: datetime, active_runs: Collection[str | None]
) -> ScheduleStep:
    """The schedule's part of one reconcile of `dj` at `now`.

    `active_runs`: the runs (`job_run` of each Job, None for Jobs without the label) that
    have an active Job of this DaemonJob. A run's own active Jobs never block or replace
    it, so a restart after creating some of its Jobs but before the status write starts
    the same run again rather than skipping or replacing it. Call it on every
    reconcile, scheduled or not (run-now works without a schedule). Apply `start` by making
    `current_run` the run decide converges to; write `status` in the same status patch as
    the rest, so a restart before the write recomputes the same run (same Job names).
    """
    aware(now)
    status, meta = (_mapping(dj.get(k)) for k in ("status", "metadata"))
    current = status.get("currentRun") if isinstance(status.get("currentRun"), str) else None
    if runs.problem is not None:
        return ScheduleStep(current_run=current, status={"nextScheduleTime": None}, problem=runs.problem)
    policy, deadline, schedule, suspended = runs.policy, runs.deadline, runs.schedule, runs.suspended

    def other_active(run: str) -> bool:
        return any(r != run for r in active_runs)

    start: RunStart | None = None
    skipped: list[SkippedTicks] = []
    out: dict[str, Any] = {}
    requeue_at: datetime | None = None
    if schedule is not None:
        base = _base(schedule, meta, status, now)
        due = due_tick(schedule, base, now, deadline)
        if due.latest is not None:
            if due.previous is not None:
                skipped.append(SkippedTicks(SKIP_MISSED, due.superseded, due.previous, due.more))
            if due.tick is None:
                skipped.append(SkippedTicks(SKIP_DEADLINE, 1, due.latest))
            elif suspended:
                skipped.append(SkippedTicks(SKIP_SUSPENDED, 1, due.tick))
            elif policy == FORBID and other_active(tick_run_id(due.tick)):
                skipped.append(SkippedTicks(SKIP_FORBID, 1, due.tick))
            else:
                run = tick_run_id(due.tick)
                start = RunStart(run, due.tick, None, policy == REPLACE and other_active(run))
            if start is not None:
                out["lastScheduleTime"] = format_time(due.latest)
            else:
                out["lastSkippedTime"] = format_time(due.latest)
                out["lastSkipReason"] = skipped[-1].reason
        # Requeued at every tick, suspended too: a tick passing while suspended is consumed then.
        requeue_at = schedule.next_after(max(now, base, due.latest or base))
        out["nextScheduleTime"] = None if suspended or requeue_at is None else format_time(requeue_at)
        out["observedSchedule"] = observed_schedule(schedule)
    else:
        # No schedule: forget the one there was, so a schedule added again later waits for its
        # first tick instead of running a tick missed while it was gone.
        out.update({k: None for k in FORGOTTEN_WITH_THE_SCHEDULE if status.get(k) is not None})

    waiting: str | None = None
    trigger = _mapping(meta.get("annotations")).get(ANNOTATION_RUN_NOW)
    if isinstance(trigger, str) and trigger and trigger != status.get("lastRunNowTrigger"):
        run = trigger_run_id(current, trigger)
        if start is not None:
            out["lastRunNowTrigger"] = trigger  # the tick's run is the run asked for
        elif suspended:
            waiting = f"{ANNOTATION_RUN_NOW}={quoted(trigger)} waits: the DaemonJob is suspended"
        elif policy == FORBID and other_active(run):
            waiting = (
                f"{ANNOTATION_RUN_NOW}={quoted(trigger)} waits for the active run to finish (concurrencyPolicy Forbid)"
            )
        else:
            start = RunStart(run, None, trigger, policy == REPLACE and other_active(run))
            out["lastRunNowTrigger"] = trigger
    if start is not None:
        out["currentRun"] = start.run
        current = start.run
    return ScheduleStep(start, tuple(skipped), current, out, requeue_at, waiting)
