"""spec.nodeMaintenance's hold (domain/nodework/maintenance.py): a node carrying this DaemonJob's record
keeps its maxParallel slot until it is released and takes no new turn meanwhile. Never named
in Reconciling (the status's nodeMaintenance says what each node waits for)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from daemonjob.domain.gates.hold import Gate, GateContext
from daemonjob.domain.jobs.changes import CreateJob
from daemonjob.domain.nodework.allowance import maintenance_refusal
from daemonjob.domain.nodework.maintenance import NodeWork, cordons_for, has_finalizer
from daemonjob.domain.nodework.releasing import Situation, node_work
from daemonjob.domain.rollout.gating import Hold
from daemonjob.domain.rollout.inputs import DecisionInput
from daemonjob.domain.rollout.reading import Reading
from daemonjob.domain.rollout.turns import Actions
from daemonjob.domain.shared.events import WARNING, EventSpec
from daemonjob.domain.spec.revision import job_name
from daemonjob.domain.spec.validate import Problem

__all__ = ["GATE", "GATE_MAINTENANCE", "EVENT_DRAIN_TIMED_OUT", "with_node_work", "drain_timeout_events"]

GATE_MAINTENANCE = "nodeMaintenance"
EVENT_DRAIN_TIMED_OUT = "DrainTimedOut"


def _problems(inp: DecisionInput) -> list[Problem]:
    spec = inp.checked.spec if inp.checked is not None else None  # None: read here
    refusal = maintenance_refusal(inp.dj, inp.maintenance.allowed_namespaces, spec)
    return [refusal] if refusal is not None else []


def hold(at: GateContext) -> Hold:
    """The nodes this DaemonJob holds, released or carried on, and the turns left for the others."""
    reading, stall = at.reading, at.stall
    inp, checked = reading.input, reading.checked
    if reading.drain_timeouts is None:
        return Hold(GATE_MAINTENANCE)
    refused = maintenance_refusal(inp.dj, inp.maintenance.allowed_namespaces, checked.spec)
    refusal = refused.message if refused is not None else None
    settings = checked.settings
    stopped = (
        settings.suspend or reading.budget.exceeded or reading.idle is not None or (stall is not None and stall.blocks)
    )
    eligible: dict[str, bool] = {}
    jobs: dict[str, Any] = {}
    for node in inp.maintenance.records:
        known, part = inp.kept_plan.node(node), inp.kept_plan.part(node)
        if known is None or known[0] is None:
            continue  # the node is gone
        eligible[node] = part is not None and part.eligible
        jobs[node] = known[1]
    awaiting = frozenset(a.node for a in reading.plan.awaiting)
    states: dict[str, str | None] = {}
    if checked.spec.checks.any:
        for node in eligible:
            part = inp.kept_plan.part(node)
            if part is not None and part.state is not None:
                states[node] = part.state
    situation = Situation(
        inp.dj,
        None if refusal else checked.maintenance,
        refusal,
        reading.revision.name,
        reading.step.current_run,
        inp.now,
        stopped,
        eligible,
        jobs,
        awaiting,
        states,
    )
    work = node_work(situation, inp.maintenance, reading.drain_timeouts)
    work.add_finalizer = situation.spec is not None and not has_finalizer(inp.dj)
    turns = at.turns
    if inp.maintenance.records:  # a node carrying a record takes no new turn until its release is seen
        turns = replace(turns, starting=[t for t in turns.starting if t.node not in inp.maintenance.records])
    # the slots `held` counts are added by the gate step
    return Hold(GATE_MAINTENANCE, turns=turns, slots=work.held, work=work)


def with_node_work(reading: Reading, work: NodeWork, actions: Actions) -> Actions:
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
            template=reading.checked.spec.job_template,
        )
        for node in work.start
    ]
    return replace(actions, creates=starts)


def drain_timeout_events(reading: Reading) -> list[EventSpec]:
    timeouts, spec = reading.drain_timeouts, reading.checked.maintenance
    if timeouts is None or not timeouts.new or spec is None or spec.drain is None:
        return []
    progress = reading.input.maintenance.drains
    out = []
    for node in timeouts.new:
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


GATE = Gate(hold, problems=_problems)
