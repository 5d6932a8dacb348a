"""The pure decision: from a DaemonJob, its Jobs and the nodes, to actions and a status.

A short chain of named steps, each returning a named value: validate the spec, classify
the nodes, plan per node, choose actions, conditions, status, events. No I/O and no
mutation of the inputs, so every rule of the product contract is a plain unit test. The
caller must only call `decide` with synced caches: a node missing from `nodes` is taken
to be deleted and its Jobs are deleted.

Safety rules, in order of precedence:
- a node never runs two Jobs of one DaemonJob at once: a create only goes to a node
  with no active Job and none terminating before it finished, so replacing an old revision takes two
  decisions (delete, then create once the Job is gone);
- the current revision's Jobs are never deleted while their node exists;
- whatever blocks creates (suspend, an unusable spec, an API error, an injected TTL,
  the failure threshold) also blocks OldRevision deletes: running work is never torn
  down when nothing would replace it, and an OldRevision delete takes the node's
  maxParallel slot, so running work is not torn down before its node's turn.

Runs (`schedule.py`): the schedule's step for `now` says which run is current (a tick or
a run-now trigger may start one) and what to merge into the status, in the same patch as
the rest, so a restart before that write recomputes the same run and the same Job names.
A scheduled DaemonJob with no run yet starts nothing; a node's Job of another run is
history, replaced (Replace) or waited for (Forbid) when still active.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from daemonjob.domain.configrefs import (
    missing_configmaps,
    pod_template_of,
    referenced_configmaps,
    rerun_on_config_change,
    revision_for,
)

from daemonjob.domain.actions import Actions, CreateJob, DeleteJob, Gate, Turn, choose_actions
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
from daemonjob.domain.jobs import format_time, parse_time
from daemonjob.domain.memo import Memo, compute
from daemonjob.domain.plan import JobView, Plan, PlanContext
from daemonjob.domain.planstate import PlanState
from daemonjob.domain.revision import current_revision, template_revision
from daemonjob.domain.schedule import ANNOTATION_RUN_NOW, ScheduleStep, replaces_other_runs, schedule_step
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

# Run results (the runs_finished metric's label)
RUN_SUCCEEDED = "succeeded"
RUN_FAILED = "failed"

# Status fields of runs: carried over from the last status unless the schedule step changes them.
RUN_STATUS_FIELDS = ("currentRun", "lastScheduleTime", "nextScheduleTime", "lastSuccessfulTime", "lastSkippedTime",
                     "lastSkipReason", "lastRunNowTrigger", "observedSchedule")


@dataclass(frozen=True, slots=True)
class EventSpec:
    type: str
    reason: str
    message: str


@dataclass(slots=True)
class Decision:
    """What to do, the status to write, and what happened to runs if that status is written.

    `run_started`, `ticks_skipped` and `run_finished` are facts only once the status
    carrying them is written (the status records them, so a later decision does not repeat
    them): count them then, not per decision. `requeue_at`: the next tick, to reconcile at.
    """

    creates: list[CreateJob] = field(default_factory=list)
    deletes: list[DeleteJob] = field(default_factory=list)
    status: dict[str, Any] = field(default_factory=dict)
    events: list[EventSpec] = field(default_factory=list)
    run_started: str | None = None
    ticks_skipped: list[tuple[str, int]] = field(default_factory=list)  # (reason, count)
    run_finished: str | None = None  # RUN_SUCCEEDED or RUN_FAILED: the current run finished now
    requeue_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class Revision:
    """The current revision, the template hash it stands for, and what the status last said."""

    name: str
    template_hash: str
    previous: str | None

    @property
    def changed(self) -> bool:
        return self.previous != self.name

    @property
    def unrecorded(self) -> bool:
        """A revision the cluster cannot tell by itself until the status records it: no Job
        of it may be created before, or a later spec edit would salt it again."""
        return self.changed and self.name != self.template_hash


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


def _revision(dj: Mapping[str, Any], observed: _Observed,
              configmaps: Mapping[str, Mapping[str, Any] | None] | None,
              state: PlanState, unreadable: bool = False) -> Revision:
    """With rerunOnConfigChange (and the ConfigMaps read), the hash covers their data too.

    A ConfigMap edit keeps the generation, so its revision is salted with the previous
    revision as well: editing a ConfigMap back and forth is a new revision each time.
    """
    spec = dj.get("spec")
    template = spec.get("jobTemplate") if isinstance(spec, Mapping) else None
    previous = observed.status.get("currentRevision")
    previous = previous if isinstance(previous, str) else None
    known = observed.status.get("templateHash")
    if unreadable and previous and isinstance(known, str):
        return Revision(previous, known, previous)  # the ConfigMaps' content is unknown: keep what was
    salt: Any = observed.generation
    if configmaps is not None and rerun_on_config_change(dj):
        template_hash = revision_for(dj, configmaps)
        salt = f"{observed.generation}/{previous or ''}"
    else:
        template_hash = template_revision(template if isinstance(template, Mapping) else {})
    found = None if previous else _found_revision(state.job_views(), template_hash)
    return Revision(current_revision(template_hash, salt, observed.status, found), template_hash, previous)


def _found_revision(views: Iterable[JobView], template_hash: str) -> str | None:
    """The revision of the newest Job labelled with `template_hash`: a lost status recovered."""
    newest = max((v for v in views if v.template_hash == template_hash and v.revision),
                 key=lambda v: v.age_key, default=None)
    return newest.revision if newest is not None else None


def _spec_of(dj: Mapping[str, Any]) -> Mapping[str, Any]:
    spec = dj.get("spec")
    return spec if isinstance(spec, Mapping) else {}


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
    configmaps: Mapping[str, Mapping[str, Any] | None] | None = None,
    unreadable: Mapping[str, str] | None = None,
    rejected: Mapping[str, str] | None = None,
    state: PlanState | None = None,
) -> Decision:
    """Compute the Jobs to create and delete, the new status and the events for `dj`.

    `stalled` is the (reason, message) of an API error the act layer saw for the
    current spec (e.g. the Job template was rejected); it is surfaced as Stalled
    and limits creates to a single probe until it clears. `eligibility`: the node rules
    already compiled from this `dj` (compiled here if None). `memo`: keeps values derived
    from cached objects (the caches' `derived`); the default computes them each time.
    `conflicts`: node -> why its Job name is held by a Job this DaemonJob may not adopt;
    those nodes get no create, the others go on, and Stalled names them.
    `configmaps`: with rerunOnConfigChange, the ConfigMaps the pod template references, by
    name (None for one that does not exist), read by the caller; None: not read, and the
    revision covers the template only. `unreadable`: with rerunOnConfigChange, the referenced
    ConfigMaps the caller cannot read, by name, with why: Stalled, nothing starts, and the
    recorded revision is kept. `rejected`: node -> why the API server refused its Job, in the
    order they were refused; those nodes take their turns after every other node (oldest
    refusal first), so one node that admission always refuses cannot hold the others back.
    `state`: the plan kept across passes (planstate.py), which the caller has told of every
    node that changed; `jobs` and `nodes` are then not read. Without it the plan is made
    from `jobs` and `nodes`, from scratch.
    """
    if now.tzinfo is None:
        now = now.replace(tzinfo=timezone.utc)  # a naive time is UTC, as format_time reads it
    observed = _Observed.of(dj)
    if state is None:
        state = PlanState.of(jobs, nodes, memo)
    revision = _revision(dj, observed, configmaps, state, bool(unreadable))
    checked = validate(dj, eligibility)
    settings = checked.settings
    runs_matter = (_spec_of(dj).get("schedule") is not None or observed.status.get("currentRun")
                   or ANNOTATION_RUN_NOW in ((dj.get("metadata") or {}).get("annotations") or {}))
    step = schedule_step(dj, now, state.active_runs() if runs_matter else ())
    # validate() has reported the schedule's problems already (all of them, step.problem among them)
    spec = dj.get("spec") if isinstance(dj.get("spec"), Mapping) else {}
    run = step.current_run
    idle = None
    if run is None and spec.get("schedule") is not None and step.problem is None:
        nxt = step.status.get("nextScheduleTime", observed.status.get("nextScheduleTime"))
        idle = "no run has started yet" + (f"; the next tick is at {nxt}" if nxt else "")
    missing: list[str] = []
    if configmaps is not None and rerun_on_config_change(dj):
        missing = missing_configmaps(referenced_configmaps(pod_template_of(dj)), configmaps)
    ctx = PlanContext(checked.eligibility, revision.name, settings.never, settings.history_limit, run,
                      replaces_other_runs(spec))
    plan = state.plan_for(ctx, memo)
    budget = failure_budget(plan, settings)
    turns = _Turns.of(plan, conflicts, rejected)
    stall = stall_for(checked.problems, stalled, plan.ttl_jobs, checked.template_has_ttl,
                      observed.conditions.get(STALLED), observed.generation, conflicts, missing, unreadable,
                      turns.refused)
    actions = _actions(dj, revision, plan, turns, checked, stall, budget.exceeded, run, idle is not None)
    conditions = evaluate(plan, settings, actions, revision.name, stall, budget, run, idle)
    now_s = format_time(now)
    run_changed = run != observed.status.get("currentRun")
    status = _status(observed, revision, plan, conditions, now_s, step, run_changed)
    events = _events(observed, revision, plan, checked, conditions, budget.exceeded, step, idle is None)
    return Decision(
        creates=actions.creates,
        deletes=actions.deletes,
        status=status,
        events=events,
        run_started=step.start.run if step.start is not None else None,
        ticks_skipped=[(s.reason, s.count) for s in step.skipped],
        run_finished=_run_finished(observed, conditions, run, run_changed),
        requeue_at=step.requeue_at,
    )


@dataclass(frozen=True, slots=True)
class _Turns:
    """The plan's turns in the order nodes take them: nodes whose Job name another owner holds
    left out, nodes the API server refused last (oldest refusal first). The plan's own lists
    are used as they are when neither applies (the usual case: no copy of thousands of turns)."""

    replacing: Sequence[Turn]
    starting: Sequence[Turn]
    refused: Mapping[str, str] | None = None  # refused nodes that still need their Job

    @classmethod
    def of(cls, plan: Plan, conflicts: Mapping[str, str] | None, rejected: Mapping[str, str] | None) -> _Turns:
        if not conflicts and not rejected:
            return cls(plan.replacing, plan.starting)
        skip = conflicts or {}
        order = {node: i for i, node in enumerate(rejected or {})}

        def ordered(turns: Sequence[Turn]) -> list[Turn]:
            kept = [t for t in turns if t.node not in skip]
            later = sorted((t for t in kept if t.node in order), key=lambda t: order[t.node])
            return [t for t in kept if t.node not in order] + later

        starting = ordered(plan.starting)
        refused = {t.node: (rejected or {})[t.node] for t in starting if t.node in order}
        return cls(ordered(plan.replacing), starting, refused or None)


def _actions(dj: Mapping[str, Any], revision: Revision, plan: Plan, turns: _Turns, checked: Validation,
             stall: Stall | None, failure_stop: bool, run: str | None, no_run_yet: bool) -> Actions:
    settings = checked.settings
    slots = None
    if settings.max_parallel is not None:
        slots = max(1, scaled(settings.max_parallel, plan.desired, round_up=True))
    gate = Gate(
        blocked=(settings.suspend or failure_stop or no_run_yet or revision.unrecorded
                 or (stall is not None and stall.blocks)),
        probing=stall is not None and stall.probing,
    )
    return choose_actions(dj, revision.name, turns.replacing, turns.starting, plan.deletes, plan.extra_old, slots,
                          plan.busy, gate, run, revision.template_hash)


def _became_true(previous: Mapping[str, Mapping[str, Any]], kind: str, now_true: bool) -> bool:
    return now_true and (previous.get(kind) or {}).get("status") != "True"


def _run_finished(observed: _Observed, conditions: Conditions, run: str | None, run_changed: bool) -> str | None:
    """The current run's result, in the decision where it finished (Complete or Failed turned True)."""
    if run is None or run_changed:
        return None
    if _became_true(observed.conditions, COMPLETE, conditions.complete.status):
        return RUN_SUCCEEDED
    if _became_true(observed.conditions, FAILED_CONDITION, conditions.failed.status):
        return RUN_FAILED
    return None


def _status(observed: _Observed, revision: Revision, plan: Plan, conditions: Conditions, now: str,
            step: ScheduleStep, run_changed: bool) -> dict[str, Any]:
    previous = observed.status
    rollout_changed = revision.changed or run_changed
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
        startTime=(previous.get("startTime") if not rollout_changed else None) or now,
    )
    if conditions.complete.status:
        was_complete = (observed.conditions.get(COMPLETE) or {}).get("status") == "True"
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
        render(observed.conditions, kind, cond, now, observed.generation) for kind, cond in conditions.by_type()
    ]
    return status


def _events(observed: _Observed, revision: Revision, plan: Plan, checked: Validation, conditions: Conditions,
            failure_stop: bool, step: ScheduleStep, starts: bool) -> list[EventSpec]:
    previous = observed.conditions
    events: list[EventSpec] = [EventSpec(e.type, e.reason, e.message) for e in step.events]
    if revision.changed and not checked.problems and starts:
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
