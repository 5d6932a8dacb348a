"""What a DaemonJob would do on the cluster as it is now: `kubectl daemonjob plan`.

Computed by the controller's own decision (`decide`), passes in a row as the controller
would make them: a pass that only records a new revision or run in the status is followed
by the next, which starts the first wave. The first wave is that decision's own choice
(its creates, the older Jobs it replaces, the nodes it cordons); the order is the turns the
gates let through, and the later waves follow it `maxParallel` nodes at a time, assuming
each wave ends before the next starts. A closed window is looked at again at the moment it
opens. Node maintenance: each node's pods to evict by the drain's rule book
(drainpods.py) and the PodDisruptionBudget that would refuse an eviction now.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from daemonjob.domain.decision.decide import Decision, decide
from daemonjob.domain.gates.alerts import GATE_ALERTS
from daemonjob.domain.gates.maintenance import GATE_MAINTENANCE
from daemonjob.domain.gates.window import GATE_WINDOW, WindowState, window_state
from daemonjob.domain.jobs.contract import ACTIVE, FAILED, SUCCEEDED
from daemonjob.domain.jobs.standins import standins
from daemonjob.domain.nodework.disruption import Disruption
from daemonjob.domain.nodework.drainpods import budgets_of, pods_to_evict, refusing_budgets
from daemonjob.domain.nodework.maintenance import MaintenanceInput
from daemonjob.domain.order.rules import OrderInput
from daemonjob.domain.preview.report import (
    DONE,
    DRAIN_TIMED_OUT,
    FAILED_STATE,
    HELD,
    IN_MAINTENANCE,
    KEEPS,
    KEPT_CORDONED,
    LEFT_OUT,
    NODE_NAME,
    RUNNING,
    RUNS,
    SKIPPED,
    WAITS,
    GateLine,
    NodeLine,
    Preview,
    WindowLine,
)
from daemonjob.domain.rollout.canarystate import canary_nodes
from daemonjob.domain.rollout.inputs import DecisionInput, FiringAlerts
from daemonjob.domain.rollout.keptplan import KeptPlan
from daemonjob.domain.rollout.plan import OLD_REVISION, OLD_RUN
from daemonjob.domain.rollout.turns import Turns
from daemonjob.domain.shared.noderecord import outcomes_of, record_of
from daemonjob.domain.shared.timestamps import format_time
from daemonjob.domain.spec.eligibility import POD_SPEC_PATH, Ineligible
from daemonjob.domain.spec.validate import Validation, validate

__all__ = ["PreviewInput", "Preview", "preview", "with_applied", "PASSES_MAX"]

ALERTS_NOT_READ = "AlertsNotRead"
ALERTS_NOT_READ_MESSAGE = (
    "spec.rollout.haltOnAlerts: the controller halts while a matching alert fires in Prometheus; "
    "not read here (--prometheus-url), taken as none firing"
)
PASSES_MAX = 4  # passes that only write the status (a revision, a run) before the first wave

Obj = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class PreviewInput:
    """The DaemonJob as it would stand once applied (an applied one's metadata and status kept),
    and the cluster's objects as listed."""

    dj: Obj
    nodes: Sequence[Obj]
    jobs: Sequence[Obj]  # its Jobs
    now: datetime
    order: OrderInput = OrderInput()
    pods: Sequence[Obj] = ()  # the pods bound to nodes (node maintenance)
    budgets: Sequence[Obj] = ()  # PodDisruptionBudgets
    alerts: FiringAlerts = FiringAlerts(unknown=None)  # none firing unless told
    alerts_read: bool = False  # `alerts` was read from Prometheus (haltOnAlerts)
    disruption: Disruption = Disruption()  # the cluster's nodes out of service and their limit
    allowed_namespaces: frozenset[str] | None = None  # node maintenance (None: the DaemonJob's namespace)
    recorded: Sequence[Obj] = ()  # its recorded results (spec.results.deleteSucceededJobs: recorded.py)


def _decide(inp: PreviewInput, dj: Obj, kept: KeptPlan, now: datetime, checked: Validation) -> Decision:
    namespace = str((dj.get("metadata") or {}).get("namespace") or "")
    allowed = inp.allowed_namespaces if inp.allowed_namespaces is not None else frozenset({namespace})
    uid = (dj.get("metadata") or {}).get("uid")
    records = {
        str(n["metadata"]["name"]): r for n in inp.nodes if (r := record_of(n)) is not None and uid and r.uid == uid
    }
    outcomes = {str(n["metadata"]["name"]): o for n in inp.nodes for o in outcomes_of(n) if uid and o.uid == uid}
    return decide(
        DecisionInput(
            dj,
            kept,
            now,
            alerts=inp.alerts,
            order=inp.order,
            maintenance=MaintenanceInput(records, {}, allowed, outcomes),
            disruption=inp.disruption,
            checked=checked,
        )
    )


def _passes(inp: PreviewInput, checked: Validation, now: datetime) -> tuple[Decision, KeptPlan, int, str | None]:
    """The controller's passes until one acts (or changes nothing more in the status): each
    writes its status, which the next reads."""
    dj = inp.dj
    passes = 0
    previous = None  # the revision the applied status records, as the first pass reads it
    standing = standins(inp.recorded) if checked.spec.delete_succeeded_jobs else None
    kept = KeptPlan.of(inp.jobs, inp.nodes, recorded=standing)  # kept across passes, as the controller keeps it
    while True:
        decision = _decide(inp, dj, kept, now, checked)
        if not passes and decision.reading is not None:
            previous = decision.reading.revision.previous
        passes += 1
        status = dict(dj.get("status") or {})
        acts = decision.creates or decision.deletes or (decision.node_work is not None and decision.node_work.writes)
        recorded = all(status.get(k) == decision.status.get(k) for k in ("currentRevision", "currentRun"))
        if acts or recorded or passes >= PASSES_MAX:
            return decision, kept, passes, previous
        dj = {**dj, "status": {**status, **decision.status}}


def _first_wave(decision: Decision) -> list[str]:
    nodes = [c.node for c in decision.creates]
    nodes += [d.node for d in decision.deletes if d.reason in (OLD_REVISION, OLD_RUN) and d.node]
    if decision.node_work is not None:
        nodes += [c.node for c in decision.node_work.cordons]
    return list(dict.fromkeys(nodes))


def _turn_nodes(turns: Turns) -> list[str]:
    return [t.node for t in (*turns.replacing, *turns.starting)]


def _gates(decision: Decision, all_turns: list[str]) -> tuple[list[GateLine], dict[str, str]]:
    """Each gate that holds turns back, and which nodes each holds (by the turns it took out)."""
    gating = decision.gating
    assert gating is not None
    lines: list[GateLine] = []
    held: dict[str, str] = {}
    before = all_turns
    for hold in gating.holds:
        after = _turn_nodes(hold.turns) if hold.turns is not None else before
        kept = set(after)
        taken = [n for n in before if n not in kept]
        for node in taken:
            held.setdefault(node, hold.gate)
        if hold.reason and (hold.blocks or taken or hold.limit is not None):
            until = format_time(hold.wake) if hold.wake is not None and hold.gate == GATE_WINDOW else None
            nodes = tuple(before) if hold.blocks else tuple(taken)
            lines.append(GateLine(hold.gate, hold.reason, hold.message, nodes, until))
        before = after
    return lines, held


def _chunks(nodes: list[str], size: int | None) -> list[list[str]]:
    if not nodes:
        return []
    size = size or len(nodes)
    return [nodes[i : i + size] for i in range(0, len(nodes), size)]


def preview(inp: PreviewInput) -> Preview:
    """The plan of `inp.dj` over `inp`'s cluster objects."""
    dj = inp.dj
    meta = dj.get("metadata") or {}
    checked = validate(dj)
    decision, kept, passes, previous = _passes(inp, checked, inp.now)
    reading = decision.reading
    gating = decision.gating
    assert reading is not None and gating is not None
    plan = reading.plan
    all_turns = _turn_nodes(plan.turns(None, None))
    gates, held = _gates(decision, all_turns)
    if checked.rollout.halt_on_alerts and not inp.alerts_read:
        gates.append(GateLine(GATE_ALERTS, ALERTS_NOT_READ, ALERTS_NOT_READ_MESSAGE))
    order = [n for n in _turn_nodes(gating.turns) if n not in held]
    first = starting = _first_wave(decision)
    window = window_state(checked.rollout.window, inp.now)
    if not first and not window.open and window.opens_at is not None:
        first = _first_wave(_passes(inp, checked, window.opens_at)[0])  # the wave the window lets through
    canary = reading.canary
    canary_now: list[str] = []
    starts = set(first)
    rest = [n for n in order if n not in starts]
    promote_before = None
    if canary.limit is not None:  # the nodes with a Job of this rollout, and the next ones to start it
        known = canary_nodes(kept.job_views(), reading.revision.name, reading.step.current_run)
        head = [*first, *rest][: canary.limit]
        canary_now = sorted({*known, *head})
        canaries = set(head)
        tail = [n for n in rest if n not in canaries]
        waves = [w for w in [first, *_chunks([n for n in rest if n in canaries], gating.slots)] if w]
        promote_before = len(waves) + 1 if tail else None
        waves += _chunks(tail, gating.slots)
    else:
        waves = [first, *_chunks(rest, gating.slots)] if first else _chunks(rest, gating.slots)
    wave_of = {n: i + 1 for i, wave in enumerate(waves) for n in wave}
    left_out: dict[str, tuple[str, str]] = {}  # node -> (state, why): out of this rollout by node maintenance
    timeouts = reading.drain_timeouts
    if timeouts is not None:
        left_out = {n: (LEFT_OUT, KEPT_CORDONED) for n in timeouts.kept}
        left_out |= {n: (LEFT_OUT, DRAIN_TIMED_OUT) for n in timeouts.skipped}
        left_out |= {n: (FAILED_STATE, DRAIN_TIMED_OUT) for n in timeouts.failed}
    lines = _node_lines(inp, checked, kept, wave_of, held, set(canary_now), left_out)
    reruns = [n for n in [*first, *rest] if (kept.node(n) or (None, ()))[1]]
    return Preview(
        name=str(meta.get("name") or ""),
        namespace=str(meta.get("namespace") or ""),
        revision=reading.revision.name,
        previous=previous,
        template_hash=reading.revision.template_hash,
        reruns=reruns,
        nodes=lines,
        order=[*first, *rest],
        waves=waves,
        slots=gating.slots,
        canary=canary_now,
        promote_before=promote_before,
        starting=starting,
        canary_count=canary.count,
        window=_window(window, checked),
        gates=gates,
        conditions=list(decision.status.get("conditions") or ()),
        passes=passes,
    )


def _node_lines(
    inp: PreviewInput,
    checked: Validation,
    kept: KeptPlan,
    wave_of: Mapping[str, int],
    held: Mapping[str, str],
    canary: set[str],
    left_out: Mapping[str, tuple[str, str]],
) -> list[NodeLine]:
    """Every node's line: its state, why it is not eligible, its wave, a drain's evictions."""
    meta = inp.dj.get("metadata") or {}
    pods_by_node: dict[str, list[Obj]] = {}
    for pod in inp.pods:
        node = (pod.get("spec") or {}).get("nodeName")
        if node:
            pods_by_node.setdefault(node, []).append(pod)
    drain = checked.maintenance.drain if checked.maintenance is not None else None
    budgets = budgets_of(inp.budgets) if drain is not None else []  # compiled once, spent per node
    eligibility = checked.eligibility
    lines = []
    for node in sorted(inp.nodes, key=lambda n: str(n["metadata"]["name"])):
        name = str(node["metadata"]["name"])
        verdict: Ineligible | None = eligibility.ineligible(node) if eligibility is not None else None
        part = kept.part(name)
        line = NodeLine(name, SKIPPED, wave=wave_of.get(name), canary=name in canary)
        if verdict is not None:
            nodename = verdict.message.endswith(f"{POD_SPEC_PATH}.nodeName")
            line.why, line.message = (NODE_NAME if nodename else verdict.kind), verdict.message
            if part is not None and part.held is not None:
                line.state = KEEPS
        elif name in left_out and name not in wave_of:
            line.state, line.why = left_out[name]
        elif held.get(name) == GATE_MAINTENANCE:
            line.state = IN_MAINTENANCE
        elif name in held:
            line.state, line.why = HELD, held[name]
        elif name in wave_of:
            line.state = RUNS
        elif part is not None and part.state in (SUCCEEDED, ACTIVE, FAILED):
            line.state = {SUCCEEDED: DONE, ACTIVE: RUNNING, FAILED: FAILED_STATE}[part.state]
        else:
            line.state = WAITS
        if drain is not None and line.state in (RUNS, IN_MAINTENANCE):
            verdicts = pods_to_evict(pods_by_node.get(name, ()), drain, str(meta.get("namespace") or ""), meta["name"])
            line.evict = [f"{p['metadata'].get('namespace')}/{p['metadata'].get('name')}" for p in verdicts.evict]
            line.blocked = verdicts.blocked
            line.refused = refusing_budgets(verdicts.evict, [replace(b) for b in budgets])
        lines.append(line)
    return lines


def _window(state: WindowState, checked: Validation) -> WindowLine | None:
    window = checked.rollout.window
    if window is None:
        return None
    opens = format_time(state.opens_at) if state.opens_at is not None else None
    closes = format_time(state.closes_at) if state.closes_at is not None else None
    return WindowLine(state.open, window.schedule.expression, window.schedule.zone_name, opens, closes)


def with_applied(new: Obj, applied: Obj | None, now: datetime) -> dict[str, Any]:
    """`new` as the API server would store it over `applied`: the applied one's identity and
    status kept, the generation moved when the spec changes; a new one created `now` (the
    youngest of an exclusion group)."""
    if applied is None:
        meta = {**(new.get("metadata") or {}), "generation": 1, "creationTimestamp": format_time(now)}
        return {**new, "metadata": meta, "status": {}}
    old_meta = applied.get("metadata") or {}
    meta = {**old_meta, **{k: v for k, v in (new.get("metadata") or {}).items() if k in ("labels", "annotations")}}
    generation = old_meta.get("generation") or 1
    if (new.get("spec") or {}) != (applied.get("spec") or {}):
        meta["generation"] = generation + 1
    return {**applied, "spec": new.get("spec") or {}, "metadata": meta}
