"""The gate step of a decision: every gate asked once, in the declared precedence, and one
value (`Gating`) that choosing the actions and the conditions read.

Precedence: the gate in force is the first in `PRECEDENCE` whose hold keeps turns waiting
(haltOnAlerts and the window hold every turn back, so they come first; the canary, the
pause, the order across DaemonJobs, the last node's reboot and health check; node maintenance
is never named; the cluster's disruption budget last, counting the cordons the turns left would
start). The turns pass
through the gates in the same order, each taking out the nodes it holds.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from daemonjob.domain.gates import alerts, canary, disruption, health, maintenance, order, pause, window
from daemonjob.domain.gates.hold import Gate, GateContext
from daemonjob.domain.rollout.condition import Stall
from daemonjob.domain.rollout.gating import Gating
from daemonjob.domain.rollout.inputs import DecisionInput
from daemonjob.domain.rollout.reading import Reading
from daemonjob.domain.rollout.turns import Turns
from daemonjob.domain.spec.validate import Problem, scaled

__all__ = ["PRECEDENCE", "GATES", "run_gates", "gate_problems", "gate_in_force", "slots_of"]

# Every gate, first the one named before the others. A new gate: its module, and its entry here.
PRECEDENCE: tuple[Gate, ...] = (
    alerts.GATE,
    window.GATE,
    canary.GATE,
    pause.GATE,
    order.GATE,
    health.GATE,
    maintenance.GATE,
    disruption.GATE,
)

# Gate names (the status and metrics name the gate in force)
GATES: tuple[str, ...] = tuple(dict.fromkeys(name for gate in PRECEDENCE for name in gate.names))
_GATE_OF_REASON: dict[str, str] = {reason: name for gate in PRECEDENCE for reason, name in gate.reasons.items()}


def slots_of(reading: Reading) -> int | None:
    """maxParallel as a number of nodes (a percentage of the desired nodes, rounded up); 1 when
    unset and nodes are taken out of service (spec.nodeMaintenance)."""
    max_parallel = reading.checked.settings.max_parallel
    if max_parallel is None and reading.checked.maintenance is not None:
        return 1  # nodes out of service: one at a time unless maxParallel says otherwise (as kured and SUC)
    return None if max_parallel is None else max(1, scaled(max_parallel, reading.plan.desired, round_up=True))


def run_gates(reading: Reading, stall: Stall | None, turns: Turns) -> Gating:
    """Each gate asked with the turns the gates before it let through."""
    slots = slots_of(reading)
    holds = []
    for gate in PRECEDENCE:
        hold = gate.hold(GateContext(reading, stall, turns, slots))
        if hold.turns is not None:
            turns = hold.turns
        holds.append(hold)
    held = turns.held + sum(h.slots for h in holds)
    settings = reading.checked.settings
    stopped = (
        settings.suspend
        or reading.budget.exceeded
        or reading.idle is not None
        or reading.revision.unrecorded
        or (stall is not None and stall.blocks)
    )
    probing = stall is not None and stall.probing
    return Gating(tuple(holds), replace(turns, held=held), slots, bool(stopped), probing)


def gate_problems(inp: DecisionInput) -> list[Problem]:
    """What the gates find wrong with the spec (a spec.after name with no DaemonJob, node
    maintenance where it is not allowed), in precedence order."""
    return [p for gate in PRECEDENCE for p in gate.problems(inp)]


def gate_in_force(status: Mapping[str, Any]) -> tuple[str, str] | None:
    """(gate, reason) of the gate a written status says holds the rollout: its Reconciling reason."""
    for cond in status.get("conditions") or ():
        if isinstance(cond, Mapping) and cond.get("type") == "Reconciling" and cond.get("status") == "True":
            gate = _GATE_OF_REASON.get(str(cond.get("reason")))
            return (gate, str(cond.get("reason"))) if gate is not None else None
    return None
