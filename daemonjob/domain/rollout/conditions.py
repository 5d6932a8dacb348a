"""Step 4 of a decision: the four conditions, as kstatus-aware tools read them.

kstatus reads `Reconciling=True` as InProgress and `Stalled=True` as Failed, whichever
comes first in the list, and otherwise the resource as Current. So: Reconciling is True
only while work is in progress; Stalled is True when Complete cannot be reached without
a user acting (a refused spec, Jobs the API server rejects, a TTL an admission policy
adds, the failure budget exhausted, failed nodes in a finished rollout); never both, and
neither when Complete.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from daemonjob import defaults
from daemonjob.domain.gates.canary import ANNOTATION_PROMOTE, CANARY_FAILED
from daemonjob.domain.jobs.contract import LABEL_NAME
from daemonjob.domain.rollout.actions import Actions
from daemonjob.domain.rollout.inputs import DecisionInput
from daemonjob.domain.rollout.plan import Held, JobView, Plan
from daemonjob.domain.shared.messages import condition_message
from daemonjob.domain.spec.configrefs import ConfigMapLimitExceeded
from daemonjob.domain.spec.validate import Settings, Validation, is_int, scaled

if TYPE_CHECKING:
    from daemonjob.domain.gates.step import Gating
    from daemonjob.domain.rollout.reading import Reading

__all__ = [
    "Condition",
    "Conditions",
    "Stall",
    "FailureBudget",
    "failure_budget",
    "stall_for",
    "evaluate",
    "render",
    "turned_true",
    "CacheWait",
    "with_cache_wait",
]

# Condition types, in the order they appear in the status
COMPLETE = "Complete"
FAILED_CONDITION = "Failed"
RECONCILING = "Reconciling"
STALLED = "Stalled"

DEFAULT_STALLED_REASON = "ApplyFailed"
TTL_INJECTED = "TTLInjected"
CONFIGMAP_MISSING = "ConfigMapMissing"
CONFIGMAP_UNREADABLE = "ConfigMapUnreadable"
CONFIGMAP_LIMIT_EXCEEDED = "ConfigMapLimitExceeded"
WAITING_FOR_SCHEDULE = "WaitingForSchedule"
JOB_CONFLICT = "JobConflict"
JOB_REJECTED = "JobRejected"
FAILURE_THRESHOLD_EXCEEDED = "FailureThresholdExceeded"
NODES_FAILED = "NodesFailed"
WAITING_FOR_INELIGIBLE_NODES = "WaitingForIneligibleNodes"
WAITING_FOR_CACHE = "WaitingForCache"
EVENT_INVALID_SPEC = "InvalidSpec"

FAILED_NODE_NAMES_MAX = defaults.FAILED_NODE_NAMES_MAX
HELD_SHOWN = 3


@dataclass(frozen=True, slots=True)
class Condition:
    status: bool
    reason: str
    message: str


@dataclass(frozen=True, slots=True)
class Stall:
    """Why the rollout cannot go on by itself. `event`: the Warning Event reason announcing it
    (None: another condition's Event does); `on_message`: announce a changed message too."""

    condition: Condition
    event: str | None = None
    on_message: bool = False
    blocks: bool = False  # nothing starts, nothing running is torn down
    probing: bool = False  # the API server rejects creates: one probe, nothing torn down


@dataclass(frozen=True, slots=True)
class FailureBudget:
    limit: int | None  # maxFailedNodes scaled; None: unlimited
    exceeded: bool  # more nodes failed the current revision than the limit
    canary: bool = False  # a canary node failed (spec.rollout.canary, not promoted)


@dataclass(frozen=True, slots=True)
class Conditions:
    complete: Condition
    failed: Condition
    reconciling: Condition
    stalled: Stall

    def by_type(self) -> tuple[tuple[str, Condition], ...]:
        return (
            (COMPLETE, self.complete),
            (FAILED_CONDITION, self.failed),
            (RECONCILING, self.reconciling),
            (STALLED, self.stalled.condition),
        )


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def failure_budget(plan: Plan, settings: Settings) -> FailureBudget:
    """Only failures of the current revision's Jobs spend the budget (with rerunPolicy Never,
    nodes keep the failed Jobs of earlier revisions, which a fixed template did not cause)."""
    if settings.max_failed is None:
        return FailureBudget(None, False)
    limit = scaled(settings.max_failed, plan.desired, round_up=False)
    return FailureBudget(limit, len(plan.failed_current_names) > limit)


def _injected_ttl(ttl_jobs: Sequence[JobView], previous: Mapping[str, Any] | None, generation: Any) -> Stall | None:
    """A TTL on our Jobs that the template does not set: an admission policy adds it.

    Such Jobs vanish once finished, and their nodes would re-run forever; the stall is kept
    for the rest of this generation, since the Jobs that showed it may be gone already.
    """
    if ttl_jobs:
        first = min(ttl_jobs, key=lambda j: j.name)
        message = (
            f"Job {first.name} (node {first.node}) has spec.ttlSecondsAfterFinished {first.ttl}, which "
            "spec.jobTemplate does not set: an admission policy (a mutating webhook or a policy engine) adds it. "
            "A Job deleted by its TTL would look like a node that never ran and the node would run again, "
            f"so no new Job is started. Exempt Jobs labelled {LABEL_NAME} from that policy, then change "
            "this DaemonJob's spec to resume"
        )
        return Stall(Condition(True, TTL_INJECTED, message), event=TTL_INJECTED, blocks=True)
    if (
        previous is not None
        and previous.get("status") == "True"
        and previous.get("reason") == TTL_INJECTED
        and previous.get("observedGeneration") == generation
    ):
        return Stall(Condition(True, TTL_INJECTED, str(previous.get("message") or "")), event=TTL_INJECTED, blocks=True)
    return None


def stall_for(
    inp: DecisionInput,
    checked: Validation,
    plan: Plan,
    missing_configmaps: Sequence[str] = (),
    refused: Mapping[str, str] | None = None,
) -> Stall | None:
    """The stall that blocks actions, from the spec, the act layer or the Jobs (failures come later).

    Reads the input's API troubles and unreadable ConfigMaps (name -> why the controller
    cannot read it, a 403 from RBAC, say: without their content the revision is unknown, so
    nothing starts). `refused`: the nodes the API server refused that still need their Job."""
    problems = checked.problems
    unreadable_configmaps = inp.configmaps.unreadable
    api_error, conflicts = inp.troubles.stall, inp.troubles.conflicts
    if problems:
        message = "; ".join(p.message for p in problems)
        return Stall(
            Condition(True, problems[0].reason, message), event=EVENT_INVALID_SPEC, on_message=True, blocks=True
        )
    limit = next(
        (why for why in (unreadable_configmaps or {}).values() if isinstance(why, ConfigMapLimitExceeded)), None
    )
    if limit is not None:
        message = f"{limit}; no Job is started until then"
        return Stall(
            Condition(True, CONFIGMAP_LIMIT_EXCEEDED, message),
            event=CONFIGMAP_LIMIT_EXCEEDED,
            on_message=True,
            blocks=True,
        )
    if unreadable_configmaps:
        shown = "; ".join(f"{name}: {why}" for name, why in sorted(unreadable_configmaps.items())[:HELD_SHOWN])
        message = (
            f"cannot read {_plural(len(unreadable_configmaps), 'ConfigMap')} referenced by the pod template "
            f"(rerunOnConfigChange), retrying with backoff; no Job is started until they can be read: {shown}"
        )
        return Stall(
            Condition(True, CONFIGMAP_UNREADABLE, message), event=CONFIGMAP_UNREADABLE, on_message=True, blocks=True
        )
    if missing_configmaps:
        names = ", ".join(missing_configmaps)
        which = "ConfigMap" if len(missing_configmaps) == 1 else "ConfigMaps"
        message = (
            f"{which} {names} referenced by the pod template (not optional) not found in the namespace; "
            "no Job is started until it exists, and its creation re-runs every eligible node"
        )
        return Stall(Condition(True, CONFIGMAP_MISSING, message), event=CONFIGMAP_MISSING, on_message=True, blocks=True)
    if not checked.template_has_ttl:
        injected = _injected_ttl(plan.ttl_jobs, inp.recorded.conditions.get(STALLED), inp.recorded.generation)
        if injected is not None:
            return injected
    if api_error is not None:
        reason = str(api_error[0] or DEFAULT_STALLED_REASON)
        return Stall(Condition(True, reason, str(api_error[1] or "")), event=reason, on_message=True, probing=True)
    if refused:
        return rejected_stall(refused)
    if conflicts:
        return conflict_stall(conflicts)
    return None


def rejected_stall(rejected: Mapping[str, str]) -> Stall:
    """Nodes whose Job the API server refused while others' were accepted: they go last and are
    retried with backoff; the other nodes go on."""
    shown = "; ".join(f"node {node}: {rejected[node]}" for node in sorted(rejected)[:HELD_SHOWN])
    more = f" (+{len(rejected) - HELD_SHOWN} more)" if len(rejected) > HELD_SHOWN else ""
    message = (
        f"the API server rejected the Job of {_plural(len(rejected), 'node')}, retried with backoff after "
        f"the other nodes: {shown}{more}"
    )
    return Stall(Condition(True, JOB_REJECTED, message), event=JOB_REJECTED, on_message=True)


def conflict_stall(conflicts: Mapping[str, str]) -> Stall:
    """Nodes whose Job name another owner holds: the rest of the rollout goes on without them."""
    shown = "; ".join(conflicts[node] for node in sorted(conflicts)[:HELD_SHOWN])
    more = f" (+{len(conflicts) - HELD_SHOWN} more)" if len(conflicts) > HELD_SHOWN else ""
    message = (
        f"{_plural(len(conflicts), 'node')} cannot get a Job: {shown}{more}; "
        "delete or rename those Jobs, the other nodes go on"
    )
    return Stall(Condition(True, JOB_CONFLICT, message), event=JOB_CONFLICT, on_message=True)


def _held_text(held: Sequence[Held]) -> str:
    shown = "; ".join(f"Job {h.job} on node {h.node} ({h.why})" for h in held[:HELD_SHOWN])
    more = f" (+{len(held) - HELD_SHOWN} more)" if len(held) > HELD_SHOWN else ""
    return (
        f"; waiting for {_plural(len(held), 'Job')} of nodes no longer eligible, each holding a maxParallel "
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
            f"canary: {_plural(len(failed_now), 'node')} failed {what}; no new node is started. "
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
            f"{_plural(len(failed_now), 'node')} failed {what}, more than maxFailedNodes {limit_text}; "
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
        failure = Condition(False, "WithinThreshold", f"{_plural(failed, 'node')} failed so far; {progress}")
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


def render(
    previous: Mapping[str, Mapping[str, Any]], kind: str, cond: Condition, now: str, generation: Any
) -> dict[str, Any]:
    """The API form; lastTransitionTime is kept while the status stays the same."""
    status = "True" if cond.status else "False"
    prev = previous.get(kind) or {}
    since = prev.get("lastTransitionTime") if prev.get("status") == status else None
    out: dict[str, Any] = {
        "type": kind,
        "status": status,
        "reason": cond.reason,
        "message": condition_message(cond.message),
        "lastTransitionTime": since or now,
    }
    if generation is not None:
        out["observedGeneration"] = generation
    return out


def turned_true(
    previous: Mapping[str, Mapping[str, Any]], kind: str, cond: Condition, on_message: bool = False
) -> bool:
    """True when `cond` is True now and was not, or was True for another reason (or message)."""
    prev = previous.get(kind) or {}
    if not cond.status:
        return False
    if prev.get("status") != "True" or prev.get("reason") != cond.reason:
        return True
    return on_message and prev.get("message") != condition_message(cond.message)


@dataclass(frozen=True, slots=True)
class CacheWait:
    """Facts from the controller: its own writes the cache has not shown past their deadline,
    still unconfirmed after a check against the API server."""

    creates: Sequence[str]
    deletes: Sequence[str]
    seconds: float  # how long the oldest has been pending


def cache_wait_condition(wait: CacheWait) -> Condition:
    """Reconciling=True naming the Jobs the controller waits to see, so a wait is never silent."""
    parts = []
    for names, what in ((wait.creates, "created"), (wait.deletes, "deleted")):
        if names:
            more = f" (+{len(names) - HELD_SHOWN} more)" if len(names) > HELD_SHOWN else ""
            shown = ", ".join(names[:HELD_SHOWN]) + more
            parts.append(f"{_plural(len(names), what + ' Job')}: {shown}")
    message = (
        f"waiting for the cache to show {' and '.join(parts)} (for {wait.seconds:.0f}s); "
        "nothing new is started for this DaemonJob until the watch delivers it, or it proves lost "
        "(the API server does not hold it, or the watch has shown later writes)"
    )
    return Condition(True, WAITING_FOR_CACHE, message)


def with_cache_wait(
    status: Mapping[str, Any], wait: CacheWait, previous: Mapping[str, Mapping[str, Any]], now: str, generation: Any
) -> dict[str, Any]:
    """`status` with its Reconciling condition saying what the controller waits for."""
    cond = render(previous, RECONCILING, cache_wait_condition(wait), now, generation)
    conditions = [cond if c.get("type") == RECONCILING else c for c in status.get("conditions") or ()]
    if not any(c.get("type") == RECONCILING for c in conditions):
        conditions.append(cond)
    return {**status, "conditions": conditions}
