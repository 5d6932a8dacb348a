"""Why the rollout cannot go on by itself (Stalled), and the failure budget (maxFailedNodes).

A refused spec, unreadable or missing ConfigMaps, an injected TTL, the API server's refusals,
Job name conflicts; the Failed condition reads the budget.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from daemonjob.domain.jobs.jobview import JobView
from daemonjob.domain.rollout.condition import HELD_SHOWN, STALLED, Condition, Stall, plural
from daemonjob.domain.rollout.inputs import DecisionInput
from daemonjob.domain.rollout.plan import Plan
from daemonjob.domain.shared.apinames import LABEL_NAME
from daemonjob.domain.spec.configrefs import ConfigMapLimitExceeded
from daemonjob.domain.spec.validate import Settings, Validation, scaled

__all__ = ["FailureBudget", "failure_budget", "stall_for", "rejected_stall", "conflict_stall"]

DEFAULT_STALLED_REASON = "ApplyFailed"
TTL_INJECTED = "TTLInjected"
CONFIGMAP_MISSING = "ConfigMapMissing"
CONFIGMAP_UNREADABLE = "ConfigMapUnreadable"
CONFIGMAP_LIMIT_EXCEEDED = "ConfigMapLimitExceeded"
JOB_CONFLICT = "JobConflict"
JOB_REJECTED = "JobRejected"
EVENT_INVALID_SPEC = "InvalidSpec"


@dataclass(frozen=True, slots=True)
class FailureBudget:
    limit: int | None  # maxFailedNodes scaled; None: unlimited
    exceeded: bool  # more nodes failed the current revision than the limit
    canary: bool = False  # a canary node failed (spec.rollout.canary, not promoted)


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
            f"cannot read {plural(len(unreadable_configmaps), 'ConfigMap')} referenced by the pod template "
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
        f"the API server rejected the Job of {plural(len(rejected), 'node')}, retried with backoff after "
        f"the other nodes: {shown}{more}"
    )
    return Stall(Condition(True, JOB_REJECTED, message), event=JOB_REJECTED, on_message=True)


def conflict_stall(conflicts: Mapping[str, str]) -> Stall:
    """Nodes whose Job name another owner holds: the rest of the rollout goes on without them."""
    shown = "; ".join(conflicts[node] for node in sorted(conflicts)[:HELD_SHOWN])
    more = f" (+{len(conflicts) - HELD_SHOWN} more)" if len(conflicts) > HELD_SHOWN else ""
    message = (
        f"{plural(len(conflicts), 'node')} cannot get a Job: {shown}{more}; "
        "delete or rename those Jobs, the other nodes go on"
    )
    return Stall(Condition(True, JOB_CONFLICT, message), event=JOB_CONFLICT, on_message=True)
