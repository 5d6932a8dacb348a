"""Step 4 of a decision: the four conditions, as kstatus-aware tools read them.

kstatus reads `Reconciling=True` as InProgress and `Stalled=True` as Failed, whichever
comes first in the list, and otherwise the resource as Current. So: Reconciling is True
only while work is in progress; Stalled is True when Complete cannot be reached without
a user acting (a refused spec, Jobs the API server rejects, a TTL an admission policy
adds, the failure budget exhausted, failed nodes in a finished rollout); never both, and
neither when Complete.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime

from daemonjob import defaults
from daemonjob.domain.rollout.canarystate import ANNOTATION_PROMOTE, CANARY_FAILED
from daemonjob.domain.rollout.condition import HELD_SHOWN, STALLED, Condition, Conditions, Stall, plural
from daemonjob.domain.rollout.gating import Gating
from daemonjob.domain.rollout.plan import Held, Plan
from daemonjob.domain.rollout.reading import Reading
from daemonjob.domain.rollout.retries import RETRY_BACKOFF
from daemonjob.domain.rollout.starts import SUSPENDED_EXTERNALLY, suspended_message
from daemonjob.domain.rollout.turns import Actions
from daemonjob.domain.shared.timestamps import format_time
from daemonjob.domain.spec.validate import is_int

__all__ = ["evaluate", "noted"]

WAITING_FOR_SCHEDULE = "WaitingForSchedule"
FAILURE_THRESHOLD_EXCEEDED = "FailureThresholdExceeded"
NODES_FAILED = "NodesFailed"
WAITING_FOR_INELIGIBLE_NODES = "WaitingForIneligibleNodes"

FAILED_NODE_NAMES_MAX = defaults.FAILED_NODE_NAMES_MAX


def _held_text(held: Sequence[Held]) -> str:
    shown = "; ".join(f"Job {h.job} on node {h.node} ({h.why})" for h in held[:HELD_SHOWN])
    more = f" (+{len(held) - HELD_SHOWN} more)" if len(held) > HELD_SHOWN else ""
    return (
        f"; waiting for {plural(len(held), 'Job')} of nodes no longer eligible, each holding a maxParallel "
        f"slot until it finishes or is deleted: {shown}{more}"
    )


def evaluate(reading: Reading, actions: Actions, stall: Stall | None, gate: Gating) -> Conditions:
    """The conditions of `reading` once `actions` are chosen; Reconciling names the gate in force
    (`gate.in_force`). A scheduled DaemonJob with no run yet (`reading.idle`) says so in
    Complete and Reconciling instead of a rollout in progress."""
    plan, settings, budget, idle = reading.plan, reading.checked.settings, reading.budget, reading.idle
    revision, run = reading.revision.name, reading.step.current_run
    what = f"revision {revision}" if run is None else f"run {run} (revision {revision})"
    desired, active, succeeded, failed, pending = plan.desired, plan.active, plan.succeeded, plan.failed, plan.pending
    progress = f"{succeeded} of {desired} eligible nodes succeeded, {active} active, {failed} failed, {pending} pending"
    if plan.held:
        progress += _held_text(plan.held)
    finished = pending == 0 and active == 0

    if budget.canary:
        failed_now = plan.failed_current_names
        failure = Condition(
            True,
            CANARY_FAILED,
            f"canary: {plural(len(failed_now), 'node')} failed {what}; no new node is started. "
            f"Failed: {', '.join(failed_now[:FAILED_NODE_NAMES_MAX])}. Change the template, or promote "
            f"({ANNOTATION_PROMOTE}) to go on all the same",
        )
    elif budget.exceeded:
        failed_now = plan.failed_current_names
        limit_text = str(budget.limit)
        if not is_int(settings.max_failed):
            limit_text += f" ({settings.max_failed} of {desired})"
        failure = Condition(
            True,
            FAILURE_THRESHOLD_EXCEEDED,
            f"{plural(len(failed_now), 'node')} failed {what}, more than maxFailedNodes {limit_text}; "
            f"no new node is started. Failed: {', '.join(failed_now[:FAILED_NODE_NAMES_MAX])}",
        )
    elif finished and failed > 0:
        which = what if len(plan.failed_current_names) == failed else "their Job"
        failure = Condition(
            True,
            NODES_FAILED,
            f"{failed} of {desired} eligible nodes failed {which}: "
            f"{', '.join(plan.failed_names[:FAILED_NODE_NAMES_MAX])}; delete a node's Job to run it again",
        )
    elif failed > 0:
        failure = Condition(False, "WithinThreshold", f"{plural(failed, 'node')} failed so far; {progress}")
    else:
        failure = Condition(False, "NoFailedNodes", "no node has failed")

    if stall is not None:
        complete_reason = STALLED
    elif failure.status:
        complete_reason = failure.reason
        stall = Stall(Condition(True, failure.reason, failure.message))  # announced by the Failed Event
    else:
        stall = Stall(Condition(False, "NoErrors", "the spec is valid and the last changes were applied"))

    if finished and failed == 0 and not stall.condition.status:
        complete = Condition(True, "AllNodesSucceeded", f"{what} succeeded on all {desired} eligible nodes")
    elif stall.condition.status:
        complete = Condition(False, complete_reason, progress)
    elif settings.suspend:
        complete = Condition(False, "Suspended", progress)
    elif idle is not None:
        complete = Condition(False, WAITING_FOR_SCHEDULE, f"{progress}; {idle}")
    else:
        complete = Condition(False, "InProgress", progress)

    if finished:
        reconciling = Condition(False, "RolloutFinished", progress)
    elif settings.suspend:
        reconciling = Condition(False, "Suspended", f"suspended, no new node is started; {progress}")
    elif stall.condition.status:
        reconciling = Condition(False, stall.condition.reason, progress)
    elif idle is not None and active == 0:
        reconciling = Condition(False, WAITING_FOR_SCHEDULE, f"{progress}; {idle}")
    elif (waiting := gate.in_force(actions)) is not None:
        reconciling = Condition(True, waiting.reason, f"{progress}; {waiting.message}")
    elif plan.held and actions.waiting_turns and actions.free_slots == 0:
        reconciling = Condition(True, WAITING_FOR_INELIGIBLE_NODES, progress)
    else:
        reconciling = Condition(True, "RollingOut", progress)
    return Conditions(complete, failure, reconciling, stall)


def noted(conditions: Conditions, plan: Plan, now: datetime, creating: bool, cap: int) -> Conditions:
    """Reconciling names what holds nodes that the rollout's other reasons do not: node Jobs
    suspended by someone else (JobSuspendedExternally), else retries waiting for their backoff
    while nothing else moves (RetryBackoff)."""
    current = conditions.reconciling
    if not current.status:
        return conditions
    if plan.suspended:
        message = f"{current.message}; {suspended_message(plan.suspended, cap)}"
        return replace(conditions, reconciling=Condition(True, SUSPENDED_EXTERNALLY, message))
    waiting = [r for r in plan.retrying if r.at > now]
    if waiting and not creating and plan.active == 0 and current.reason == "RollingOut":
        soonest = min(waiting)
        shown = ", ".join(
            f"{r.node} (failed {r.failures}x, next at {format_time(r.at)})"
            for r in sorted(waiting, key=lambda r: r.node)[:cap]
        )
        message = f"{current.message}; waiting to retry failed nodes: {shown}; next retry at {format_time(soonest.at)}"
        return replace(conditions, reconciling=Condition(True, RETRY_BACKOFF, message))
    return conditions
