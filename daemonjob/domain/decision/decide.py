"""The pure decision: `decide(DecisionInput) -> Decision`, actions and a status.

A short chain of named steps over one input value (`inputs.py`), each returning a named
value. First the reading, which the API's troubles do not change: the revision, the
validated spec, the schedule's step, the plan per node, the failure budget (`Reading`).
Then the conclusion from the reading and the troubles: turns, stall, the gates (`gates/`,
one value for every gate), actions, conditions, status, events (`rolloutstatus.py`). No I/O
and no mutation of the inputs (but the kept plan's own bookkeeping), so every rule of the
product contract is a plain unit test. Once act has heard the API
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

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from daemonjob.domain.gates.health import GATE_HEALTH, MarkJob, with_boot_ids
from daemonjob.domain.gates.maintenance import GATE_MAINTENANCE, drain_timeout_events, with_node_work
from daemonjob.domain.gates.step import gate_problems, run_gates
from daemonjob.domain.jobs.attempts import STATUS_FIELD as ATTEMPTS_FIELD
from daemonjob.domain.jobs.attempts import assign as assign_attempts
from daemonjob.domain.jobs.changes import CreateJob, DeleteJob
from daemonjob.domain.nodework.draintimeouts import drain_timeouts
from daemonjob.domain.nodework.maintenance import NodeWork
from daemonjob.domain.rollout.actions import Origin, choose_actions
from daemonjob.domain.rollout.canarystate import ANNOTATION_PROMOTE, canary_state
from daemonjob.domain.rollout.conditions import FAILED_NODE_NAMES_MAX, evaluate, noted
from daemonjob.domain.rollout.drained import with_drain_timeouts
from daemonjob.domain.rollout.gating import Gating
from daemonjob.domain.rollout.inputs import ApiTroubles, DecisionInput
from daemonjob.domain.rollout.plan import JobView, PlanContext
from daemonjob.domain.rollout.reading import Reading
from daemonjob.domain.rollout.retries import STATUS_FIELD as RETRYING_FIELD
from daemonjob.domain.rollout.retries import next_retry, retrying_status
from daemonjob.domain.rollout.stalls import FailureBudget, failure_budget, stall_for
from daemonjob.domain.rollout.starts import StartCheck, due_start_checks
from daemonjob.domain.rollout.status import (
    NODE_COUNT_FIELDS,
    RUN_FAILED,
    RUN_SUCCEEDED,
    events_of,
    run_finished,
    status_of,
)
from daemonjob.domain.schedule.runs import ANNOTATION_RUN_NOW, schedule_step
from daemonjob.domain.shared.events import EventSpec
from daemonjob.domain.spec.configrefs import (
    missing_configmaps,
    referenced_configmaps,
    revision_for,
)
from daemonjob.domain.spec.nodeparams import node_values
from daemonjob.domain.spec.revision import Revision, current_revision, template_revision
from daemonjob.domain.spec.spec import DaemonJobSpec
from daemonjob.domain.spec.validate import RERUN_NEVER, RERUN_ON_TEMPLATE_CHANGE, validate

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
    "RUN_SUCCEEDED",
    "RUN_FAILED",
]


@dataclass(slots=True)
class Decision:
    """What to do, the status to write, and what happened to runs if that status is written.

    `run_started`, `ticks_skipped` and `run_finished` are facts only once the status
    carrying them is written (the status records them, so a later decision does not repeat
    them): count them then, not per decision. `requeue_at`: the next tick, to reconcile at.
    """

    creates: list[CreateJob] = field(default_factory=list)
    deletes: list[DeleteJob] = field(default_factory=list)
    capped: int = 0  # creates beyond the input's create_room: the act layer holds the DaemonJob for them
    status: dict[str, Any] = field(default_factory=dict)
    events: list[EventSpec] = field(default_factory=list)
    run_started: str | None = None
    ticks_skipped: list[tuple[str, int]] = field(default_factory=list)  # (reason, count)
    run_finished: str | None = None  # RUN_SUCCEEDED or RUN_FAILED: the current run finished now
    requeue_at: datetime | None = None
    gate: str | None = None  # the rollout gate holding new nodes back (gates/), if any
    node_work: NodeWork | None = None  # Node writes of spec.nodeMaintenance (maintenance.py), if any
    start_checks: list[StartCheck] = field(default_factory=list)  # Jobs past spec.startTimeout (starts.py)
    marks: list[MarkJob] = field(default_factory=list)  # verdicts of nodes' turns to write on their Jobs
    health_reads: list[str] = field(default_factory=list)  # nodes whose DaemonSet pods to read (healthCheck)
    reading: Reading | None = field(default=None, repr=False, compare=False)  # what it was concluded from
    gating: Gating | None = field(default=None, repr=False, compare=False)  # every gate's hold (a preview reads them)

    def after_act(self, troubles: ApiTroubles) -> Decision:
        """This decision once act has heard the API server: concluded again from the same
        reading with `troubles` (a refusal, a name another owner holds, a stall cleared), so
        the status written says what the pass learned. Itself when nothing changed."""
        if self.reading is None or troubles == self.reading.input.troubles:
            return self
        return _conclude(replace(self.reading, input=replace(self.reading.input, troubles=troubles)))


def _revision(inp: DecisionInput, spec: DaemonJobSpec) -> Revision:
    """With rerunOnConfigChange (and the ConfigMaps read), the hash covers their data too.

    A ConfigMap edit keeps the generation, so its revision is salted with the previous
    revision as well: editing a ConfigMap back and forth is a new revision each time.
    """
    recorded, configmaps = inp.recorded, inp.configmaps.objects
    previous = recorded.status.get("currentRevision")
    previous = previous if isinstance(previous, str) else None
    known = recorded.status.get("templateHash")
    if inp.configmaps.unreadable and previous and isinstance(known, str):
        return Revision(previous, known, previous)  # the ConfigMaps' content is unknown: keep what was
    salt: Any = recorded.generation
    if configmaps is not None and spec.rerun_on_config_change:
        template_hash = revision_for(spec, configmaps)
        salt = f"{recorded.generation}/{previous or ''}"
    else:
        template_hash = template_revision(spec.revision_source)
    found = None if previous else _found_revision(inp.kept_plan.job_views(), template_hash)
    return Revision(current_revision(template_hash, salt, recorded.status, found), template_hash, previous)


def _found_revision(views: Iterable[JobView], template_hash: str) -> str | None:
    """The revision of the newest Job labelled with `template_hash`: a lost status recovered."""
    newest = max(
        (v for v in views if v.template_hash == template_hash and v.revision), key=lambda v: v.age_key, default=None
    )
    return newest.revision if newest is not None else None


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
    read = inp.checked if inp.checked is not None else validate(dj, inp.eligibility)
    spec = read.spec
    revision = _revision(inp, spec)
    runs_matter = (
        spec.runs.scheduled
        or recorded.status.get("currentRun")
        or ANNOTATION_RUN_NOW in ((dj.get("metadata") or {}).get("annotations") or {})
    )
    step = schedule_step(dj, spec.runs, inp.now, inp.kept_plan.active_runs() if runs_matter else ())
    # validate() has reported the schedule's problems already (all of them, step.problem among them)
    # and what only the other DaemonJobs or the controller's flags tell
    checked = replace(read, problems=[*read.problems, *gate_problems(inp)])
    idle = None
    if step.current_run is None and spec.runs.scheduled and step.problem is None:
        nxt = step.status.get("nextScheduleTime", recorded.status.get("nextScheduleTime"))
        idle = "no run has started yet" + (f"; the next tick is at {nxt}" if nxt else "")
    missing: list[str] = []
    if inp.configmaps.objects is not None and spec.rerun_on_config_change:
        missing = missing_configmaps(referenced_configmaps(spec.pod_template), inp.configmaps.objects)
    settings = checked.settings
    ctx = PlanContext(
        checked.eligibility,
        revision.name,
        settings.never,
        settings.history_limit,
        step.current_run,
        spec.runs.replaces,
        successes=checked.rollout.pause is not None,
        retry=spec.retry,
        checked=spec.checks.any,
        reboot=spec.checks.reboot,
        let_go=spec.delete_succeeded_jobs,
    )
    plan = inp.kept_plan.plan_for(ctx, inp.memo)
    timeouts = None
    if checked.maintenance is not None or inp.maintenance.records:
        timeouts = drain_timeouts(
            checked.maintenance,
            inp.maintenance,
            recorded.status,
            revision.name,
            step.current_run,
            inp.now,
            _started(inp, revision.name, step.current_run),
        )
        plan = with_drain_timeouts(plan, timeouts)
    promoted = ((dj.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION_PROMOTE)
    canary = canary_state(checked.rollout.canary, plan, step.current_run or revision.name, promoted, settings.never)
    budget = failure_budget(plan, settings)
    if canary.failed:
        budget = FailureBudget(0, True, canary=True)  # a canary failure stops the rollout as maxFailedNodes does
    return Reading(inp, revision, checked, step, idle, missing, plan, budget, canary, timeouts)


def _started(inp: DecisionInput, revision: str, run: str | None) -> dict[str, bool]:
    """Nodes carrying this DaemonJob's record -> whether a Job of the record's rollout exists there."""
    out = {}
    for node in inp.maintenance.records:
        known = inp.kept_plan.node(node)
        out[node] = known is not None and any(j.revision == revision and j.run == run for j in known[1])
    return out


def _conclude(reading: Reading) -> Decision:
    inp, step = reading.input, reading.step
    run = step.current_run
    turns = reading.plan.turns(inp.troubles.conflicts, inp.troubles.rejected, inp.now)
    stall = stall_for(inp, reading.checked, reading.plan, reading.missing, turns.refused)
    gating = run_gates(reading, stall, turns)
    origin = Origin(inp.dj, reading.revision, run, reading.checked.spec.job_template)
    actions = choose_actions(origin, gating, inp.create_room)
    maintenance = gating.hold(GATE_MAINTENANCE)
    work = maintenance.work if maintenance is not None else None
    if work is not None:
        actions = with_node_work(reading, work, actions)
    attempts = assign_attempts(
        actions.creates, inp.recorded.status, reading.revision.name, run, inp.kept_plan.node, inp.deleted
    )
    actions = replace(actions, creates=with_boot_ids(reading, _with_node_env(reading, attempts.creates)))
    waiting = gating.in_force(actions)
    conditions = evaluate(reading, actions, stall, gating)
    creating = bool(actions.creates or actions.capped)
    conditions = noted(conditions, reading.plan, inp.now, creating, FAILED_NODE_NAMES_MAX)
    run_changed = run != inp.recorded.status.get("currentRun")
    status = status_of(reading, conditions, run_changed)
    if attempts.status is not None:
        status[ATTEMPTS_FIELD] = attempts.status  # before the creates of the attempts it records
    spec = reading.checked.spec
    if reading.plan.retrying and spec.retry is not None:
        status[RETRYING_FIELD] = retrying_status(reading.plan.retrying, spec.retry.limit, FAILED_NODE_NAMES_MAX)
    checks, check_wake = due_start_checks(reading.plan.unstarted, spec.start_timeout, inp.now)
    events = events_of(reading, conditions)
    requeue = [step.requeue_at, waiting.wake if waiting is not None else None, check_wake]
    requeue.append(next_retry(reading.plan.retrying, inp.now))
    health = gating.hold(GATE_HEALTH)
    requeue.append(health.wake if health else None)
    if work is not None:
        status = _with_maintenance_status(status, work)
        events.extend(drain_timeout_events(reading))  # released in this pass, the outcome on the Node
    return Decision(
        creates=actions.creates,
        deletes=actions.deletes,
        capped=actions.capped,
        status=status,
        events=events,
        run_started=step.start.run if step.start is not None else None,
        ticks_skipped=[(s.reason, s.count) for s in step.skipped],
        run_finished=run_finished(inp.recorded, conditions, run, run_changed),
        requeue_at=min((t for t in requeue if t is not None), default=None),
        gate=waiting.gate if waiting is not None else None,
        node_work=work,
        start_checks=checks,
        marks=list(health.marks) if health is not None else [],
        health_reads=list(health.reads) if health is not None else [],
        reading=reading,
        gating=gating,
    )


def _with_node_env(reading: Reading, creates: list[CreateJob]) -> list[CreateJob]:
    """Each create with its node's values of spec.nodeParameters, read from the node now."""
    parameters = reading.checked.spec.node_parameters
    if not parameters:
        return creates
    known = reading.input.kept_plan.node
    return [replace(c, node_env=node_values(parameters, (known(c.node) or (None, ()))[0])) for c in creates]


def _with_maintenance_status(status: dict[str, Any], work: NodeWork) -> dict[str, Any]:
    if work.status is not None:
        status["nodeMaintenance"] = work.status
    return status
