"""One DaemonJob's `OrderInput` (order/rules.py) composed from what the other DaemonJobs show,
their gate in force among it: so it sits with the gates, above the order's rules.

The rules of what the order reads (who is busy on a node, which older member goes first
there, where a dependency counts as done, a cycle of spec.after) live here once; where the
facts come from is the caller's (`OrderFacts`): the controller reads its caches
(controller/order/reader.py), `kubectl daemonjob plan` the lists it read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol

from daemonjob.domain.gates.step import gate_in_force
from daemonjob.domain.order.rules import GATE_AFTER, GATE_EXCLUSION, OrderInput, order_key
from daemonjob.domain.spec.spec import DaemonJobSpec

__all__ = ["OrderFacts", "order_input", "waits_for_turns", "after_cycle", "done_view"]

Obj = Mapping[str, Any]


def done_view(dj: Obj) -> tuple[Any, Any]:
    """What the DaemonJobs that come after `dj` read of its status: which revision and run of
    its Jobs count as done."""
    status = dj.get("status") or {}
    return status.get("currentRevision"), status.get("currentRun")


def waits_for_turns(dj: Obj, spec: DaemonJobSpec) -> bool:
    """What the younger members of its exclusion group read of it. An older member counts as
    waiting for its turns unless it cannot start any now: suspended, Stalled or Failed, or held
    by a rollout gate (its written status says which); the order's own gates do not count (its
    turns where its dependencies have not succeeded are left out)."""
    if spec.runs.suspended:
        return False
    status = dj.get("status") or {}
    for cond in status.get("conditions") or ():
        if isinstance(cond, Mapping) and cond.get("type") in ("Stalled", "Failed") and cond.get("status") == "True":
            return False
    gate = gate_in_force(status)
    return gate is None or gate[0] in (GATE_EXCLUSION, GATE_AFTER)


def after_cycle(name: str, after: Iterable[str], after_of: Callable[[str], Sequence[str] | None]) -> list[str]:
    """A path of spec.after from `name` back to itself, if there is one (depth first);
    `after_of(other)`: that DaemonJob's spec.after (None: no such DaemonJob)."""
    stack: list[tuple[str, list[str]]] = [(d, [name, d]) for d in after]
    seen: set[str] = set()
    while stack:
        current, path = stack.pop()
        if current == name:
            return path
        if current in seen:
            continue
        seen.add(current)
        stack.extend((d, [*path, d]) for d in after_of(current) or ())
    return []


class OrderFacts(Protocol):
    """What the order reads of the other DaemonJobs of the namespace."""

    def spec_of(self, dj: Obj) -> DaemonJobSpec: ...

    def named(self, name: str) -> Obj | None:
        """The DaemonJob of that name in the namespace, if any."""
        ...

    def done(self, dj: Obj) -> frozenset[str]:
        """The nodes where `dj` has a succeeded Job of its current revision and run (`done_view`)."""
        ...

    def peers(self) -> Iterable[Obj]:
        """The other members of the exclusion group."""
        ...

    def running_nodes(self, dj: Obj) -> Iterable[str]:
        """The nodes where `dj` has a Job that may still run."""
        ...

    def claimed(self) -> Mapping[str, str]:
        """Node -> another member whose create there is not visible yet."""
        ...

    def turn_nodes(self, dj: Obj) -> Sequence[str]:
        """The nodes where `dj` waits for its turn."""
        ...


def order_input(dj: Obj, spec: DaemonJobSpec, facts: OrderFacts) -> OrderInput:
    """`dj`'s OrderInput: its exclusion group's busy and older waiting members per node, where
    each DaemonJob of spec.after succeeded, the names missing and a cycle."""
    group, after = spec.exclusion_group, spec.after
    if not group and not after:
        return OrderInput()
    name = str((dj.get("metadata") or {}).get("name") or "")
    done_cache: dict[str, frozenset[str] | None] = {}

    def done(dep: str) -> frozenset[str] | None:
        if dep not in done_cache:
            other = facts.named(dep)
            done_cache[dep] = facts.done(other) if other is not None else None
        return done_cache[dep]

    busy: dict[str, str] = {}
    ahead: dict[str, str] = {}
    if group:
        mine = order_key(dj)
        busy.update(facts.claimed())
        for other in facts.peers():
            peer_name = other["metadata"]["name"]
            for node in facts.running_nodes(other):
                busy.setdefault(node, peer_name)
            other_spec = facts.spec_of(other)
            if order_key(other) < mine and waits_for_turns(other, other_spec):
                ahead_nodes = list(facts.turn_nodes(other))
                for dep in other_spec.after:  # it waits for its own dependencies there, not for us
                    dep_done = done(dep) or frozenset()
                    ahead_nodes = [n for n in ahead_nodes if n in dep_done]
                for node in ahead_nodes:
                    ahead.setdefault(node, peer_name)

    def after_of(other: str) -> Sequence[str] | None:
        obj = facts.named(other)
        return facts.spec_of(obj).after if obj is not None else None

    return OrderInput(
        group=group,
        busy=busy,
        ahead=ahead,
        after=after,
        done={d: nodes for d in after if (nodes := done(d)) is not None},
        missing=tuple(d for d in after if done(d) is None),
        cycle=tuple(after_cycle(name, after, after_of)),
    )
