"""The cluster's disruption budget (domain/nodework/disruption.py): a DaemonJob with node maintenance
starts no cordon while --max-unavailable-nodes nodes of the cluster are unschedulable or
NotReady, whoever did it, and never cordons the last node in service of the protected set.

Last in the precedence: it counts the turns every other gate let through, each of which
cordons a node (maintenance took out the nodes it holds already, which go on). A node
coming back wakes the DaemonJobs it holds (the controller's Node handlers), so there is no
wake-up by the clock.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from daemonjob.domain.gates.hold import Gate, GateContext
from daemonjob.domain.nodework.disruption import Disruption, is_protected
from daemonjob.domain.rollout.gating import Hold
from daemonjob.domain.rollout.turns import Turns

__all__ = ["GATE", "GATE_DISRUPTION", "CLUSTER_DISRUPTION_BUDGET", "protected_message"]

GATE_DISRUPTION = "clusterDisruptionBudget"
CLUSTER_DISRUPTION_BUDGET = "ClusterDisruptionBudget"

NODES_SHOWN = 5


def protected_message(d: Disruption, nodes: list[str]) -> str:
    shown = ", ".join(nodes[:NODES_SHOWN]) + (
        f" (+{len(nodes) - NODES_SHOWN} more)" if len(nodes) > NODES_SHOWN else ""
    )
    return (
        f"node {shown} would leave no Ready schedulable node matching {d.protected_selector!r} "
        "(--protected-node-selector): never cordoned while it is the last"
    )


def _without(turns: Turns, nodes: set[str]) -> Turns:
    return replace(turns, starting=[t for t in turns.starting if t.node not in nodes])


def hold(at: GateContext) -> Hold:
    """At the limit, every turn that would take a node out of service (one on a node out of
    service already, cordoned by someone else and tolerated, goes on); below it, at most the
    room left (the slots decide the rest), and the turns of protected nodes past the last one
    in service taken out."""
    reading = at.reading
    d = reading.input.disruption
    room = d.room
    if reading.checked.maintenance is None or room is None:
        return Hold(GATE_DISRUPTION)
    count = d.count_text()
    if room > 0 and d.protected is None:
        return Hold(
            GATE_DISRUPTION,
            limit=room,
            reason=CLUSTER_DISRUPTION_BUDGET,
            message=f"cluster disruption budget: {count}: {room} more node(s) may be cordoned now",
        )
    costing: list[tuple[str, Mapping[str, Any]]] = []  # turns that would take a node out of service
    for turn in at.turns.starting:
        known = reading.input.kept_plan.node(turn.node)
        node = known[0] if known is not None else None
        if node is not None and d.costs(turn.node, node):
            costing.append((turn.node, node))
    if room <= 0:
        if not costing:
            return Hold(GATE_DISRUPTION)  # its turns are on nodes out of service already: they go on
        return Hold(
            GATE_DISRUPTION,
            turns=_without(at.turns, {name for name, _ in costing}),
            reason=CLUSTER_DISRUPTION_BUDGET,
            message=f"cluster disruption budget: {count}: no node is cordoned until one comes back; "
            "nodes this DaemonJob holds already go on",
        )
    held: list[str] = []
    up = d.protected_up
    for name, node in costing:
        if not is_protected(d.protected, node):
            continue
        if up <= 1:
            held.append(name)
        else:
            up -= 1
    turns = None
    message = f"cluster disruption budget: {count}: {room} more node(s) may be cordoned now"
    if held:
        turns = _without(at.turns, set(held))
        message = f"cluster disruption budget: {count}; {protected_message(d, held)}"
    return Hold(GATE_DISRUPTION, limit=room, turns=turns, reason=CLUSTER_DISRUPTION_BUDGET, message=message)


GATE = Gate(hold, {CLUSTER_DISRUPTION_BUDGET: GATE_DISRUPTION})
