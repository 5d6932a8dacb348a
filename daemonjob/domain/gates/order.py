"""spec.exclusionGroup and spec.after (domain/order/rules.py): the order across DaemonJobs keeps the
nodes it holds out of the turns, naming what each waits for; an event of the DaemonJob waited
for wakes this one, so there is no wake-up by the clock."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from daemonjob.domain.gates.hold import Gate, GateContext
from daemonjob.domain.order.rules import (
    DEPENDENCY_CYCLE,
    DEPENDENCY_NOT_FOUND,
    GATE_AFTER,
    GATE_EXCLUSION,
    WAITING_FOR_DEPENDENCIES,
    WAITING_FOR_EXCLUSION_GROUP,
    OrderInput,
)
from daemonjob.domain.rollout.gating import Hold
from daemonjob.domain.rollout.inputs import DecisionInput
from daemonjob.domain.rollout.turns import Turn, Turns
from daemonjob.domain.spec.validate import Problem

__all__ = ["GATE", "OrderHold", "order_hold", "order_problems"]

NODES_SHOWN = 10


@dataclass(frozen=True, slots=True)
class OrderHold:
    """Nodes whose turn the order holds back: node -> the DaemonJob it waits for."""

    exclusion: Mapping[str, str] = field(default_factory=dict)
    after: Mapping[str, str] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.exclusion or self.after)

    def message(self) -> str:
        parts = []
        if self.after:
            parts.append(
                f"waiting on {_nodes(self.after)} for {_names(self.after)} to succeed there first (spec.after)"
            )
        if self.exclusion:
            parts.append(
                f"waiting on {_nodes(self.exclusion)} for {_names(self.exclusion)} of the same "
                f"exclusionGroup, which goes first there"
            )
        return "; ".join(parts)

    @property
    def reason(self) -> str:
        return WAITING_FOR_DEPENDENCIES if self.after else WAITING_FOR_EXCLUSION_GROUP

    @property
    def gate(self) -> str:
        return GATE_AFTER if self.after else GATE_EXCLUSION


def _nodes(held: Mapping[str, str]) -> str:
    names = sorted(held)
    shown = ", ".join(names[:NODES_SHOWN])
    more = f" (+{len(names) - NODES_SHOWN} more)" if len(names) > NODES_SHOWN else ""
    return f"node{'s' if len(names) > 1 else ''} {shown}{more}"


def _names(held: Mapping[str, str]) -> str:
    return ", ".join(f"DaemonJob {n}" for n in sorted(set(held.values())))


def order_hold(order: OrderInput, turns: Turns) -> tuple[Turns, OrderHold]:
    """The turns the order lets through, and the nodes it holds back (with what they wait for).
    The turns are returned as they are when no order applies (no copy of thousands of turns)."""
    if not order.active:
        return turns, OrderHold()
    exclusion: dict[str, str] = {}
    after: dict[str, str] = {}

    def held(turn: Turn) -> bool:
        node = turn.node
        for dep in order.after:
            if node not in order.done.get(dep, ()):
                after[node] = dep
                return True
        blocker = order.busy.get(node) or order.ahead.get(node)
        if blocker is not None:
            exclusion[node] = blocker
            return True
        return False

    replacing = [t for t in turns.replacing if not held(t)]
    starting = [t for t in turns.starting if not held(t)]
    if not exclusion and not after:
        return turns, OrderHold()
    kept = Turns(replacing, starting, turns.always, turns.extra_old, turns.held, turns.refused)
    return kept, OrderHold(exclusion, after)


def order_problems(inp: DecisionInput) -> list[Problem]:
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


def hold(at: GateContext) -> Hold:
    turns, held = order_hold(at.reading.input.order, at.turns)
    if not held:
        return Hold(GATE_EXCLUSION)
    return Hold(held.gate, turns=turns, reason=held.reason, message=held.message())


GATE = Gate(
    hold,
    {WAITING_FOR_EXCLUSION_GROUP: GATE_EXCLUSION, WAITING_FOR_DEPENDENCIES: GATE_AFTER},
    order_problems,
)
