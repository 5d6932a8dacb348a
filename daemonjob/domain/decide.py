"""The pure decision: `decide(DecisionInput) -> Decision`, actions and a status.

A short chain of named steps over one input value (`inputs.py`), each returning a named
value. First the reading, which the API's troubles do not change: the revision, the
validated spec, the schedule's step, the plan per node, the failure budget (`Reading`).
Then the conclusion from the reading and the troubles: turns, stall, actions, conditions,
status, events. No I/O and no mutation of the inputs (but the kept plan's own bookkeeping),
so every rule of the product contract is a plain unit test. Once act has heard the API
server, `Decision.after_act` concludes again from the same reading with what it heard.

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

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from daemonjob.domain.actions import Actions, CreateJob, DeleteJob, Gate, Turns, choose_actions
from daemonjob.domain.alertgate import AlertHalt, alert_halt
from daemonjob.domain.allowance import maintenance_refusal
from daemonjob.domain.conditions import (
    COMPLETE,
    FAILED_CONDITION,
    FAILED_NODE_NAMES_MAX,
    STALLED,
    Conditions,
    FailureBudget,
    Stall,
    evaluate,
    failure_budget,
    render,
    stall_for,
    turned_true,
)
from daemonjob.domain.configrefs import (
    missing_configmaps,
    pod_template_of,
    referenced_configmaps,
    rerun_on_config_change,
    revision_for,
)
from daemonjob.domain.gates import (
    ANNOTATION_PROMOTE,
    CANARY_PAUSED,
    GATE_CANARY,
    GATE_PAUSE,
    GATE_WINDOW,
    PAUSING_BETWEEN_NODES,
    WAITING_FOR_CANARY,
    WAITING_FOR_WINDOW,
    CanaryState,
    GateWait,
    PauseHold,
    WindowState,
    canary_message,
    canary_nodes,
    canary_state,
    pause_hold,
    window_state,
)
from daemonjob.domain.inputs import ApiTroubles, DecisionInput, Recorded
from daemonjob.domain.jobs import format_time, parse_time
from daemonjob.domain.maintenance import (
    NodeWork,
    Outcomes,
    Situation,
    cordons_for,
    has_finalizer,
    node_work,
    outcomes_of,
    with_outcomes,
)
from daemonjob.domain.order import DEPENDENCY_CYCLE, DEPENDENCY_NOT_FOUND, OrderHold, order_hold
from daemonjob.domain.plan import JobView, Plan, PlanContext
from daemonjob.domain.revision import Revision, current_revision, job_name, template_revision
from daemonjob.domain.schedule import ANNOTATION_RUN_NOW, ScheduleStep, replaces_other_runs, schedule_step
from daemonjob.domain.validate import RERUN_NEVER, RERUN_ON_TEMPLATE_CHANGE, Problem, Validation, scaled, validate

__all__ = [
    "CreateJob",
    "DeleteJob",
    "EventSpec",
    "Decision",
    "DecisionInput",
    "NODE_COUNT_FIELDS",
    "Reading",
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
EVENT_DRAIN_TIMED_OUT = "DrainTimedOut"

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
    gate: str | None = None  # the rollout gate holding new nodes back (gates.py), if any
    node_work: NodeWork | None = None  # Node writes of spec.nodeMaintenance (maintenance.py), if any
    reading: Reading | None = field(default=None, repr=False, compare=False)  # what it was concluded from

    def after_act(self, troubles: ApiTroubles) -> Decision:
        """This decision once act has heard the API server: concluded again from the same
        reading with `troubles` (a refusal, a name another owner holds, a stall cleared), so
        the status written says what the pass learned. Itself when nothing changed."""
        if self.reading is None or troubles == self.reading.input.troubles:
            return self
        return _conclude(replace(self.reading, input=replace(self.reading.input, troubles=troubles)))


def _revision(inp: DecisionInput) -> Revision:
    """With rerunOnConfigChange (and the ConfigMaps read), the hash covers their data too.

    A ConfigMap edit keeps the generation, so its revision is salted with the previous
    revision as well: editing a ConfigMap back and forth is a new revision each time.
    """
    dj, recorded, configmaps = inp.dj, inp.recorded, inp.configmaps.objects
    spec = dj.get("spec")
    template = spec.get("jobTemplate") if isinstance(spec, Mapping) else None
    previous = recorded.status.get("currentRevision")
    previous = previous if isinstance(previous, str) else None
    known = recorded.status.get("templateHash")
    if inp.configmaps.unreadable and previous and isinstance(known, str):
        return Revision(previous, known, previous)  # the ConfigMaps' content is unknown: keep what was
    salt: Any = recorded.generation
    if configmaps is not None and rerun_on_config_change(dj):
        template_hash = revision_for(dj, configmaps)
        salt = f"{recorded.generation}/{previous or ''}"
    else:
        template_hash = template_revision(template if isinstance(template, Mapping) else {})
    found = None if previous else _found_revision(inp.plan.job_views(), template_hash)
    return Revision(current_revision(template_hash, salt, recorded.status, found), template_hash, previous)


def _found_revision(views: Iterable[JobView], template_hash: str) -> str | None:
    """The revision of the newest Job labelled with `template_hash`: a lost status recovered."""
    newest = max(
        (v for v in views if v.template_hash == template_hash and v.revision), key=lambda v: v.age_key, default=None
    )
    return newest.revision if newest is not None else None


def _spec_of(dj: Mapping[str, Any]) -> Mapping[str, Any]:
    spec = dj.get("spec")
    return spec if isinstance(spec, Mapping) else {}


@dataclass(frozen=True, slots=True)
class Reading:
    """What a decision reads from its input before the API's troubles come in."""

    input: DecisionInput
    revision: Revision
    checked: Validation
    step: ScheduleStep
    idle: str | None  # why a scheduled DaemonJob starts nothing yet (no run has started)
    missing: list[str]  # referenced ConfigMaps that do not exist
    plan: Plan
    budget: FailureBudget
    canary: CanaryState
    outcomes: Outcomes | None = None  # drains timed out in this revision or run (nodeMaintenance)


def decide(inp: DecisionInput) -> Decision:
    """The Jobs to create and delete, the new status and the events for `inp.dj`.

    The input's troubles: `stall` (reason, message), an API error the act layer saw for the
    current spec (the Job template was rejected, say), is surfaced as Stalled and limits
    creates to a single probe until it clears; `conflicts`, nodes whose Job name is held by a
    Job this DaemonJob may not adopt, get no create while the others go on, and Stalled names
    them; `rejected`, nodes whose Job the API server refused, take their turns after every
    other node (oldest refusal first), so one node that admission always refuses cannot hold
    the others back. Its ConfigMaps (rerunOnConfigChange): the revision covers their data;
    unreadable ones set Stalled, nothing starts and the recorded revision is kept.
    """
    return _conclude(_read(inp))


def _read(inp: DecisionInput) -> Reading:
    dj, recorded = inp.dj, inp.recorded
    revision = _revision(inp)
    checked = validate(dj, inp.eligibility)
    spec = _spec_of(dj)
    runs_matter = (
        spec.get("schedule") is not None
        or recorded.status.get("currentRun")
        or ANNOTATION_RUN_NOW in ((dj.get("metadata") or {}).get("annotations") or {})
    )
    step = schedule_step(dj, inp.now, inp.plan.active_runs() if runs_matter else ())
    # validate() has reported the schedule's problems already (all of them, step.problem among them)
    checked.problems.extend(_order_problems(inp))
    refusal = maintenance_refusal(dj, inp.maintenance.allowed_namespaces)
    if refusal is not None:
        checked.problems.append(refusal)
    idle = None
    if step.current_run is None and spec.get("schedule") is not None and step.problem is None:
        nxt = step.status.get("nextScheduleTime", recorded.status.get("nextScheduleTime"))
        idle = "no run has started yet" + (f"; the next tick is at {nxt}" if nxt else "")
    missing: list[str] = []
    if inp.configmaps.objects is not None and rerun_on_config_change(dj):
        missing = missing_configmaps(referenced_configmaps(pod_template_of(dj)), inp.configmaps.objects)
    settings = checked.settings
    ctx = PlanContext(
        checked.eligibility,
        revision.name,
        settings.never,
        settings.history_limit,
        step.current_run,
        replaces_other_runs(spec),
        successes=checked.rollout.pause is not None,
    )
    plan = inp.plan.plan_for(ctx, inp.memo)
    outcomes = None
    if checked.maintenance is not None or inp.maintenance.records:
        outcomes = outcomes_of(
            checked.maintenance,
            inp.maintenance,
            recorded.status,
            revision.name,
            step.current_run,
            inp.now,
            _started(inp, revision.name, step.current_run),
        )
        plan = with_outcomes(plan, outcomes)
    promoted = ((dj.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION_PROMOTE)
    canary = canary_state(checked.rollout.canary, plan, step.current_run or revision.name, promoted, settings.never)
    budget = failure_budget(plan, settings)
    if canary.failed:
        budget = FailureBudget(0, True, canary=True)  # a canary failure stops the rollout as maxFailedNodes does
    return Reading(inp, revision, checked, step, idle, missing, plan, budget, canary, outcomes)


def _started(inp: DecisionInput, revision: str, run: str | None) -> dict[str, bool]:
    """Nodes carrying this DaemonJob's record -> whether a Job of the record's rollout exists there."""
    out = {}
    for node in inp.maintenance.records:
        known = inp.plan.node(node)
        out[node] = known is not None and any(j.revision == revision and j.run == run for j in known[1])
    return out


def _conclude(reading: Reading) -> Decision:
    inp, plan, step, recorded = reading.input, reading.plan, reading.step, reading.input.recorded
    run = step.current_run
    turns, order = order_hold(inp.order, plan.turns(inp.troubles.conflicts, inp.troubles.rejected))
    stall = stall_for(inp, reading.checked, plan, reading.missing, turns.refused)
    slots = _slots(reading)
    pause = pause_hold(plan, reading.checked.rollout.pause, inp.now) if slots is not None else PauseHold()
    window = window_state(reading.checked.rollout.window, inp.now)
    alerts = alert_halt(reading.checked.rollout.halt_on_alerts, inp.alerts)
    gate = _gate(reading, stall, window)
    if alerts.halted:
        gate = replace(gate, blocked=True)
    work = _node_work(reading, stall, turns)
    if work is not None and work.turns is not None:
        turns = work.turns
    actions = choose_actions(inp.dj, reading.revision, replace(turns, held=turns.held + pause.held), slots, gate, run)
    if work is not None:
        actions = _with_node_work(reading, work, actions)
    waiting = (
        _alerts_wait(actions, alerts)
        or _gate_wait(reading, actions, slots, turns.held, pause, window)
        or _order_wait(order)
    )
    conditions = evaluate(
        plan,
        reading.checked.settings,
        actions,
        reading.revision.name,
        stall,
        reading.budget,
        run,
        reading.idle,
        waiting,
    )
    run_changed = run != recorded.status.get("currentRun")
    status = _status(recorded, reading.revision, plan, conditions, format_time(inp.now), step, run_changed)
    events = _events(
        recorded,
        reading.revision,
        plan,
        reading.checked,
        conditions,
        reading.budget.exceeded,
        step,
        reading.idle is None,
    )
    requeue = [step.requeue_at, waiting and waiting.wake]
    if work is not None:
        status = _with_maintenance_status(status, work)
        events.extend(_maintenance_events(reading))
        if reading.outcomes is not None and reading.outcomes.new:
            requeue.append(inp.now)  # released once the status records the timeout: look again then
    return Decision(
        creates=actions.creates,
        deletes=actions.deletes,
        status=status,
        events=events,
        run_started=step.start.run if step.start is not None else None,
        ticks_skipped=[(s.reason, s.count) for s in step.skipped],
        run_finished=_run_finished(recorded, conditions, run, run_changed),
        requeue_at=min((t for t in requeue if t is not None), default=None),
        gate=waiting.gate if waiting is not None else None,
        node_work=work,
        reading=reading,
    )


def _node_work(reading: Reading, stall: Stall | None, turns: Turns) -> NodeWork | None:
    """spec.nodeMaintenance's step: the nodes this DaemonJob holds, released or carried on, and
    the turns left for the others (a node in maintenance keeps its slot)."""
    inp, checked = reading.input, reading.checked
    spec = checked.maintenance
    if reading.outcomes is None:
        return None
    refused = maintenance_refusal(inp.dj, inp.maintenance.allowed_namespaces)
    refusal = refused.message if refused is not None else None
    settings = checked.settings
    stopped = (
        settings.suspend or reading.budget.exceeded or reading.idle is not None or (stall is not None and stall.blocks)
    )
    eligible: dict[str, bool] = {}
    jobs: dict[str, Any] = {}
    for node in inp.maintenance.records:
        known, part = inp.plan.node(node), inp.plan.part(node)
        if known is None or known[0] is None:
            continue  # the node is gone
        eligible[node] = part is not None and part.eligible
        jobs[node] = known[1]
    situation = Situation(
        inp.dj,
        None if refusal else spec,
        refusal,
        reading.revision.name,
        reading.step.current_run,
        inp.now,
        stopped,
        eligible,
        jobs,
    )
    work = node_work(situation, inp.maintenance, reading.outcomes, turns)
    work.add_finalizer = situation.spec is not None and not has_finalizer(inp.dj)
    return work


def _with_node_work(reading: Reading, work: NodeWork, actions: Actions) -> Actions:
    """A turn taken by a maintenance DaemonJob cordons its node first; a node in maintenance
    whose drain is done gets its Job now, tolerating the cordon."""
    spec = reading.checked.maintenance
    if spec is None or work.refusal is not None:
        return actions
    inp, revision, run = reading.input, reading.revision, reading.step.current_run
    dj_name = inp.recorded.name
    work.cordons = cordons_for(inp.dj, revision.name, run, inp.now, [c.node for c in actions.creates])
    starts = [
        CreateJob(
            node,
            job_name(dj_name, node, revision.name, run),
            revision.name,
            inp.dj,
            run,
            revision.template_hash,
            tolerate_cordon=True,
        )
        for node in work.start
    ]
    return replace(actions, creates=starts)


def _with_maintenance_status(status: dict[str, Any], work: NodeWork) -> dict[str, Any]:
    if work.status is not None:
        status["nodeMaintenance"] = work.status
    return status


def _maintenance_events(reading: Reading) -> list[EventSpec]:
    outcomes, spec = reading.outcomes, reading.checked.maintenance
    if outcomes is None or not outcomes.new or spec is None or spec.drain is None:
        return []
    progress = reading.input.maintenance.drains
    out = []
    for node in outcomes.new:
        p = progress.get(node)
        detail = ""
        if p is not None and p.waiting:
            detail = f"; pods still there: {', '.join(p.waiting[:5])}"
            if p.blocked:
                detail += f" ({p.blocked})"
        then = (
            "the node fails and is uncordoned"
            if spec.drain.on_timeout == "Fail"
            else "the node is skipped and uncordoned; the rollout goes on"
        )
        out.append(
            EventSpec(
                WARNING,
                EVENT_DRAIN_TIMED_OUT,
                f"drain of node {node} timed out after {spec.drain.timeout}{detail}: {then}",
            )
        )
    return out


def _slots(reading: Reading) -> int | None:
    """maxParallel as a number of nodes (a percentage of the desired nodes, rounded up); 1 when
    unset and nodes are taken out of service (spec.nodeMaintenance)."""
    max_parallel = reading.checked.settings.max_parallel
    if max_parallel is None and reading.checked.maintenance is not None:
        return 1  # nodes out of service: one at a time unless maxParallel says otherwise (as kured and SUC)
    return None if max_parallel is None else max(1, scaled(max_parallel, reading.plan.desired, round_up=True))


def _gate(reading: Reading, stall: Stall | None, window: WindowState) -> Gate:
    settings = reading.checked.settings
    return Gate(
        blocked=(
            settings.suspend
            or reading.budget.exceeded
            or reading.idle is not None
            or reading.revision.unrecorded
            or (stall is not None and stall.blocks)
            or not window.open
        ),
        probing=stall is not None and stall.probing,
        limit=reading.canary.limit,
    )


def _gate_wait(
    reading: Reading, actions: Actions, slots: int | None, held: int, pause: PauseHold, window: WindowState
) -> GateWait | None:
    """The rollout gate that holds waiting turns back now (the window first: it holds them all)."""
    if not actions.waiting_turns:
        return None
    rollout = reading.checked.rollout
    if not window.open and rollout.window is not None:
        return GateWait(GATE_WINDOW, WAITING_FOR_WINDOW, window.message(rollout.window), window.opens_at)
    canary = reading.canary
    if actions.limited:
        inp = reading.input
        nodes = canary_nodes(inp.plan.job_views(), reading.revision.name, reading.step.current_run)
        return GateWait(
            GATE_CANARY,
            CANARY_PAUSED if canary.paused else WAITING_FOR_CANARY,
            canary_message(canary, nodes, inp.recorded.name),
            None,
        )
    if pause.held and rollout.pause is not None and slots is not None and held < slots and not actions.free_slots:
        return GateWait(GATE_PAUSE, PAUSING_BETWEEN_NODES, pause.message(rollout.pause), pause.until)
    return None


def _alerts_wait(actions: Actions, alerts: AlertHalt) -> GateWait | None:
    """haltOnAlerts holds every waiting turn back (as a closed window does), so it is named first."""
    return alerts.wait() if alerts.halted and actions.waiting_turns else None


def _order_problems(inp: DecisionInput) -> list[Problem]:
    """What only the other DaemonJobs can tell of spec.after: a name with no DaemonJob, a cycle."""
    order, out = inp.order, []
    if order.missing:
        names = ", ".join(order.missing)
        out.append(
            Problem(
                DEPENDENCY_NOT_FOUND,
                f"spec.after: Not found: {names}: no DaemonJob of that name in the "
                f"namespace, so no node starts until it exists",
            )
        )
    if order.cycle:
        out.append(
            Problem(
                DEPENDENCY_CYCLE,
                f"spec.after: Invalid value: a cycle: {' -> '.join(order.cycle)}, so no node can start",
            )
        )
    return out


def _order_wait(order: OrderHold) -> GateWait | None:
    """The order across DaemonJobs holding nodes back: an event of the DaemonJob waited for wakes this one."""
    return GateWait(order.gate, order.reason, order.message(), None) if order else None


def _became_true(previous: Mapping[str, Mapping[str, Any]], kind: str, now_true: bool) -> bool:
    return now_true and (previous.get(kind) or {}).get("status") != "True"


def _run_finished(recorded: Recorded, conditions: Conditions, run: str | None, run_changed: bool) -> str | None:
    """The current run's result, in the decision where it finished (Complete or Failed turned True)."""
    if run is None or run_changed:
        return None
    if _became_true(recorded.conditions, COMPLETE, conditions.complete.status):
        return RUN_SUCCEEDED
    if _became_true(recorded.conditions, FAILED_CONDITION, conditions.failed.status):
        return RUN_FAILED
    return None


def _status(
    recorded: Recorded,
    revision: Revision,
    plan: Plan,
    conditions: Conditions,
    now: str,
    step: ScheduleStep,
    run_changed: bool,
) -> dict[str, Any]:
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


def _events(
    recorded: Recorded,
    revision: Revision,
    plan: Plan,
    checked: Validation,
    conditions: Conditions,
    failure_stop: bool,
    step: ScheduleStep,
    starts: bool,
) -> list[EventSpec]:
    previous = recorded.conditions
    events: list[EventSpec] = [EventSpec(e.type, e.reason, e.message) for e in step.events]
    if revision.changed and not checked.problems and starts:
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
        reason = EVENT_FAILURE_THRESHOLD if failure_stop else EVENT_NODES_FAILED
        events.append(EventSpec(WARNING, reason, conditions.failed.message))
    if turned_true(previous, COMPLETE, conditions.complete):
        events.append(EventSpec(NORMAL, EVENT_COMPLETED, conditions.complete.message))
    return events
