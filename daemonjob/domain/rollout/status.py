"""The status a decision writes and the Events it posts, from its reading and its conditions."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from daemonjob.domain.rollout.condition import COMPLETE, FAILED_CONDITION, STALLED, Conditions, render, turned_true
from daemonjob.domain.rollout.conditions import FAILED_NODE_NAMES_MAX
from daemonjob.domain.rollout.inputs import Recorded
from daemonjob.domain.rollout.reading import Reading
from daemonjob.domain.shared.events import NORMAL, WARNING, EventSpec
from daemonjob.domain.shared.timestamps import format_time, parse_time

__all__ = ["NODE_COUNT_FIELDS", "RUN_SUCCEEDED", "RUN_FAILED", "status_of", "events_of", "run_finished"]

# Events
EVENT_REVISION_STARTED = "RevisionStarted"
EVENT_COMPLETED = "Completed"
EVENT_FAILURE_THRESHOLD = "FailureThresholdReached"
EVENT_NODES_FAILED = "NodesFailed"

# Run results (the runs_finished metric's label)
RUN_SUCCEEDED = "succeeded"
RUN_FAILED = "failed"

# Status fields that count nodes, in the order the status lists them.
NODE_COUNT_FIELDS = ("desiredNodes", "activeNodes", "succeededNodes", "failedNodes", "pendingNodes")

# Status fields of runs: carried over from the last status unless the schedule step changes them.
RUN_STATUS_FIELDS = (
    "currentRun",
    "lastScheduleTime",
    "nextScheduleTime",
    "lastSuccessfulTime",
    "lastSkippedTime",
    "lastSkipReason",
    "lastRunNowTrigger",
    "observedSchedule",
)


def _became_true(previous: Mapping[str, Mapping[str, Any]], kind: str, now_true: bool) -> bool:
    return now_true and (previous.get(kind) or {}).get("status") != "True"


def run_finished(recorded: Recorded, conditions: Conditions, run: str | None, run_changed: bool) -> str | None:
    """The current run's result, in the decision where it finished (Complete or Failed turned True)."""
    if run is None or run_changed:
        return None
    if _became_true(recorded.conditions, COMPLETE, conditions.complete.status):
        return RUN_SUCCEEDED
    if _became_true(recorded.conditions, FAILED_CONDITION, conditions.failed.status):
        return RUN_FAILED
    return None


def status_of(reading: Reading, conditions: Conditions, run_changed: bool) -> dict[str, Any]:
    """The status to write: the node counts, the conditions, and the runs' fields (carried over
    unless the schedule step changes them). `run_changed`: the current run is not the recorded one."""
    recorded, revision, plan, step = reading.input.recorded, reading.revision, reading.plan, reading.step
    now = format_time(reading.input.now)
    previous = recorded.status
    rollout_changed = revision.changed or run_changed
    status: dict[str, Any] = {}
    if recorded.generation is not None:
        status["observedGeneration"] = recorded.generation
    status.update(
        currentRevision=revision.name,
        templateHash=revision.template_hash,
        desiredNodes=plan.desired,
        activeNodes=plan.active,
        succeededNodes=plan.succeeded,
        failedNodes=plan.failed,
        pendingNodes=plan.pending,
        failedNodeNames=plan.failed_names[:FAILED_NODE_NAMES_MAX],
        startTime=(previous.get("startTime") if not rollout_changed else None) or now,
    )
    if conditions.complete.status:
        was_complete = (recorded.conditions.get(COMPLETE) or {}).get("status") == "True"
        kept = previous.get("completionTime") if was_complete and not rollout_changed else None
        status["completionTime"] = kept or now
    for key in RUN_STATUS_FIELDS:
        if previous.get(key) is not None:
            status[key] = previous[key]
    for key, value in step.status.items():
        if value is None:
            status.pop(key, None)
        else:
            status[key] = value
    if conditions.complete.status and step.current_run is not None:
        # the run's completion; kept while Complete stays True, so a restart does not move it
        done = parse_time(status.get("completionTime"))
        last = parse_time(status.get("lastSuccessfulTime"))
        if done is not None and (last is None or done > last):
            status["lastSuccessfulTime"] = status["completionTime"]
    status["conditions"] = [
        render(recorded.conditions, kind, cond, now, recorded.generation) for kind, cond in conditions.by_type()
    ]
    return status


def events_of(reading: Reading, conditions: Conditions) -> list[EventSpec]:
    """The Events of a decision: the schedule's, a revision started, a condition turned True."""
    recorded, revision, plan = reading.input.recorded, reading.revision, reading.plan
    previous = recorded.conditions
    events: list[EventSpec] = list(reading.step.events)
    if revision.changed and not reading.checked.problems and reading.idle is None:
        was = f" (was {revision.previous})" if revision.previous else ""
        events.append(
            EventSpec(
                NORMAL,
                EVENT_REVISION_STARTED,
                f"revision {revision.name} started on {plan.desired} eligible nodes{was}",
            )
        )
    stall = conditions.stalled
    if stall.event is not None and turned_true(previous, STALLED, stall.condition, on_message=stall.on_message):
        events.append(EventSpec(WARNING, stall.event, stall.condition.message))
    if turned_true(previous, FAILED_CONDITION, conditions.failed):
        reason = EVENT_FAILURE_THRESHOLD if reading.budget.exceeded else EVENT_NODES_FAILED
        events.append(EventSpec(WARNING, reason, conditions.failed.message))
    if turned_true(previous, COMPLETE, conditions.complete):
        events.append(EventSpec(NORMAL, EVENT_COMPLETED, conditions.complete.message))
    return events
