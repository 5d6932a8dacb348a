"""The pure decision: from a DaemonJob, its Jobs and the nodes, to actions and a status.

A short chain of named steps, each returning a named value: validate the spec, classify
the nodes, plan per node, choose actions, conditions, status, events. No I/O and no
mutation of the inputs, so every rule of the product contract is a plain unit test. The
caller must only call `decide` with synced caches: a node missing from `nodes` is taken
to be deleted and its Jobs are deleted.

Safety rules, in order of precedence:
- a node never runs two Jobs of one DaemonJob at once: a create only goes to a node
  with no active or terminating Job, so replacing an old revision takes two
  decisions (delete, then create once the Job is gone);
- the current revision's Jobs are never deleted while their node exists;
- whatever blocks creates (suspend, an unusable spec, an API error, an injected TTL,
  the failure threshold) also blocks OldRevision deletes: running work is never torn
  down when nothing would replace it, and an OldRevision delete takes the node's
  maxParallel slot, so running work is not torn down before its node's turn.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from daemonjob.domain.actions import Actions, CreateJob, DeleteJob, Gate, choose_actions
from daemonjob.domain.conditions import (
    COMPLETE,
    FAILED_CONDITION,
    FAILED_NODE_NAMES_MAX,
    STALLED,
    Conditions,
    Stall,
    failure_budget,
    render,
    stall_for,
    evaluate,
    turned_true,
)
from daemonjob.domain.eligibility import Eligibility
from daemonjob.domain.jobs import format_time
from daemonjob.domain.memo import Memo, compute
from daemonjob.domain.plan import Plan, classify_nodes, plan_nodes
from daemonjob.domain.revision import current_revision, template_revision
from daemonjob.domain.validate import RERUN_NEVER, RERUN_ON_TEMPLATE_CHANGE, Validation, scaled, validate

__all__ = [
    "CreateJob",
    "DeleteJob",
    "EventSpec",
    "Decision",
    "Revision",
    "decide",
    "RERUN_ON_TEMPLATE_CHANGE",
    "RERUN_NEVER",
]

# Events
NORMAL = "Normal"
WARNING = "Warning"
EVENT_REVISION_STARTED = "RevisionStarted"
EVENT_COMPLETED = "Completed"
EVENT_FAILURE_THRESHOLD = "FailureThresholdReached"
EVENT_NODES_FAILED = "NodesFailed"


@dataclass(frozen=True, slots=True)
class EventSpec:
    type: str
    reason: str
    message: str


@dataclass(slots=True)
class Decision:
    creates: list[CreateJob] = field(default_factory=list)
    deletes: list[DeleteJob] = field(default_factory=list)
    status: dict[str, Any] = field(default_factory=dict)
    events: list[EventSpec] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Revision:
    """The current revision, the template hash it stands for, and what the status last said."""

    name: str
    template_hash: str
    previous: str | None

    @property
    def changed(self) -> bool:
        return self.previous != self.name


@dataclass(frozen=True, slots=True)
class _Observed:
    """What decide reads of the DaemonJob besides its spec."""

    name: str
    generation: Any
    status: Mapping[str, Any]
    conditions: Mapping[str, Mapping[str, Any]]

    @classmethod
    def of(cls, dj: Mapping[str, Any]) -> _Observed:
        meta = dj.get("metadata") or {}
        raw = dj.get("status")
        status: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
        conditions = {c.get("type"): c for c in status.get("conditions") or () if isinstance(c, Mapping)}
        return cls(meta.get("name") or "", meta.get("generation"), status, conditions)


def _revision(dj: Mapping[str, Any], observed: _Observed) -> Revision:
    spec = dj.get("spec")
    template = spec.get("jobTemplate") if isinstance(spec, Mapping) else None
    template_hash = template_revision(template if isinstance(template, Mapping) else {})
    previous = observed.status.get("currentRevision")
    return Revision(
        current_revision(template_hash, observed.generation, observed.status),
        template_hash,
        previous if isinstance(previous, str) else None,
    )


def decide(
    dj: Mapping[str, Any],
    jobs: Iterable[Mapping[str, Any]],
    nodes: Iterable[Mapping[str, Any]],
    now: datetime,
    stalled: tuple[str, str] | None = None,
    *,
    eligibility: Eligibility | None = None,
    memo: Memo = compute,
    conflicts: Mapping[str, str] | None = None,
) -> Decision:
    """Compute the Jobs to create and delete, the new status and the events for `dj`.

    `stalled` is the (reason, message) of an API error the act layer saw for the
    current spec (e.g. the Job template was rejected); it is surfaced as Stalled
    and limits creates to a single probe until it clears. `eligibility`: the node rules
    already compiled from this `dj` (compiled here if None). `memo`: keeps values derived
    from cached objects (the caches' `derived`); the default computes them each time.
    `conflicts`: node -> why its Job name is held by a Job this DaemonJob may not adopt;
    those nodes get no create, the others go on, and Stalled names them.
    """
    observed = _Observed.of(dj)
    revision = _revision(dj, observed)
    checked = validate(dj, eligibility)
    settings = checked.settings
    node_set = classify_nodes(nodes, checked.eligibility, memo)
    plan = plan_nodes(jobs, node_set, checked.eligibility, revision.name, settings.never,
                      settings.history_limit, memo)
    budget = failure_budget(plan, settings)
    if conflicts:
        plan.turns = [t for t in plan.turns if t.node not in conflicts]
    stall = stall_for(checked.problems, stalled, plan.ttl_jobs, checked.template_has_ttl,
                      observed.conditions.get(STALLED), observed.generation, conflicts)
    actions = _actions(dj, revision, plan, checked, stall, budget.exceeded)
    conditions = evaluate(plan, settings, actions, revision.name, stall, budget)
    now_s = format_time(now)
    status = _status(observed, revision, plan, conditions, now_s)
    events = _events(observed, revision, plan, checked, conditions, budget.exceeded)
    return Decision(creates=actions.creates, deletes=actions.deletes, status=status, events=events)


def _actions(dj: Mapping[str, Any], revision: Revision, plan: Plan, checked: Validation, stall: Stall | None,
             failure_stop: bool) -> Actions:
    settings = checked.settings
    slots = None
    if settings.max_parallel is not None:
        slots = max(1, scaled(settings.max_parallel, plan.desired, round_up=True))
    gate = Gate(
        blocked=settings.suspend or failure_stop or (stall is not None and stall.blocks),
        probing=stall is not None and stall.probing,
    )
    return choose_actions(dj, revision.name, plan.turns, plan.deletes, plan.extra_old, slots, plan.held_slots, gate)


def _status(observed: _Observed, revision: Revision, plan: Plan, conditions: Conditions, now: str) -> dict[str, Any]:
    previous = observed.status
    status: dict[str, Any] = {}
    if observed.generation is not None:
        status["observedGeneration"] = observed.generation
    status.update(
        currentRevision=revision.name,
        templateHash=revision.template_hash,
        desiredNodes=plan.desired,
        activeNodes=plan.active,
        succeededNodes=plan.succeeded,
        failedNodes=plan.failed,
        pendingNodes=plan.pending,
        failedNodeNames=plan.failed_names[:FAILED_NODE_NAMES_MAX],
        startTime=(previous.get("startTime") if not revision.changed else None) or now,
    )
    if conditions.complete.status:
        was_complete = (observed.conditions.get(COMPLETE) or {}).get("status") == "True"
        kept = previous.get("completionTime") if was_complete and not revision.changed else None
        status["completionTime"] = kept or now
    status["conditions"] = [
        render(observed.conditions, kind, cond, now, observed.generation) for kind, cond in conditions.by_type()
    ]
    return status


def _events(observed: _Observed, revision: Revision, plan: Plan, checked: Validation, conditions: Conditions,
            failure_stop: bool) -> list[EventSpec]:
    previous = observed.conditions
    events: list[EventSpec] = []
    if revision.changed and not checked.problems:
        was = f" (was {revision.previous})" if revision.previous else ""
        events.append(EventSpec(NORMAL, EVENT_REVISION_STARTED,
                                f"revision {revision.name} started on {plan.desired} eligible nodes{was}"))
    stall = conditions.stalled
    if stall.event is not None and turned_true(previous, STALLED, stall.condition, on_message=stall.on_message):
        events.append(EventSpec(WARNING, stall.event, stall.condition.message))
    if turned_true(previous, FAILED_CONDITION, conditions.failed):
        reason = EVENT_FAILURE_THRESHOLD if failure_stop else EVENT_NODES_FAILED
        events.append(EventSpec(WARNING, reason, conditions.failed.message))
    if turned_true(previous, COMPLETE, conditions.complete):
        events.append(EventSpec(NORMAL, EVENT_COMPLETED, conditions.complete.message))
    return events
