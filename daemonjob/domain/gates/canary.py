"""spec.rollout.canary: the first nodes of a revision (or run) go first, the rest waits.

The canary nodes are the first `count` nodes to start it, as the Jobs record; once they all
succeeded the rest waits for a promote (the annotation names the revision or run), and a
canary node's failure stops the rollout as maxFailedNodes does.
"""

from __future__ import annotations

from daemonjob.domain.gates.hold import Gate, GateContext
from daemonjob.domain.rollout.canarystate import ANNOTATION_PROMOTE, CanaryState, canary_nodes
from daemonjob.domain.rollout.gating import Hold

__all__ = [
    "GATE",
    "GATE_CANARY",
    "CANARY_PAUSED",
    "WAITING_FOR_CANARY",
    "canary_message",
]

GATE_CANARY = "canary"
CANARY_PAUSED = "CanaryPaused"
WAITING_FOR_CANARY = "WaitingForCanary"

CANARY_NODES_SHOWN = 10


def canary_message(state: CanaryState, nodes: list[str], name: str) -> str:
    shown = ", ".join(nodes[:CANARY_NODES_SHOWN]) + (
        f" (+{len(nodes) - CANARY_NODES_SHOWN} more)" if len(nodes) > CANARY_NODES_SHOWN else ""
    )
    if state.paused:
        return (
            f"canary of {state.target} succeeded on {shown}; the other nodes wait for a promote: "
            f"kubectl daemonjob promote {name} (annotation {ANNOTATION_PROMOTE}={state.target})"
        )
    return f"canary of {state.target} on {state.count} node(s) first: {shown}; the other nodes wait for it"


def hold(at: GateContext) -> Hold:
    """At most the canary's nodes still to start take a turn (the state is read with the plan)."""
    reading = at.reading
    state = reading.canary
    if state.limit is None:
        return Hold(GATE_CANARY)
    inp = reading.input
    nodes = canary_nodes(inp.kept_plan.job_views(), reading.revision.name, reading.step.current_run)
    return Hold(
        GATE_CANARY,
        limit=state.limit,
        reason=CANARY_PAUSED if state.paused else WAITING_FOR_CANARY,
        message=canary_message(state, nodes, inp.recorded.name),
    )


GATE = Gate(hold, {CANARY_PAUSED: GATE_CANARY, WAITING_FOR_CANARY: GATE_CANARY})
