"""Order across DaemonJobs (same namespace): spec.exclusionGroup and spec.after.

Both are gates of the pure decision: the other DaemonJobs' per-node state is one more input
(`OrderInput`, read from the caches by the controller), and one step (`order_hold`) keeps
the nodes it holds out of the turns, naming what each waits for. Like every gate, it holds
back only new node Jobs (and the delete of a running older Job that would make way for one).

- exclusionGroup: on a node, a DaemonJob of the group starts only while no other member has
  a Job there that may still run, and no older member (creationTimestamp, then name: both
  recorded on the objects, so a restart reads the same order) waits for its turn there.
- after: on a node, a DaemonJob starts only once each DaemonJob it names has a succeeded Job
  there of that DaemonJob's current revision (and run). A name that does not exist, or a
  cycle through this DaemonJob, is a problem of the spec (Stalled).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from daemonjob.domain.actions import Turn, Turns

__all__ = [
    "OrderInput",
    "OrderHold",
    "order_hold",
    "order_key",
    "GATE_EXCLUSION",
    "GATE_AFTER",
    "WAITING_FOR_EXCLUSION_GROUP",
    "WAITING_FOR_DEPENDENCIES",
    "DEPENDENCY_NOT_FOUND",
    "DEPENDENCY_CYCLE",
]

# Gate names and Reconciling reasons while they hold nodes back
GATE_EXCLUSION = "exclusionGroup"
GATE_AFTER = "after"
WAITING_FOR_EXCLUSION_GROUP = "WaitingForExclusionGroup"
WAITING_FOR_DEPENDENCIES = "WaitingForDependencies"

# Stalled reasons: what only the other DaemonJobs can tell
DEPENDENCY_NOT_FOUND = "DependencyNotFound"
DEPENDENCY_CYCLE = "DependencyCycle"

NODES_SHOWN = 10


def order_key(dj: Mapping[str, object]) -> tuple[str, str]:
    """Who goes first in an exclusion group: the older DaemonJob, then the name."""
    meta = dj.get("metadata") or {}
    assert isinstance(meta, Mapping)
    return (str(meta.get("creationTimestamp") or ""), str(meta.get("name") or ""))


@dataclass(frozen=True, slots=True)
class OrderInput:
    """The other DaemonJobs' per-node state as the caches show it. The default holds nothing."""

    group: str | None = None  # spec.exclusionGroup
    busy: Mapping[str, str] = field(default_factory=dict)  # node -> member with a Job there that may still run
    ahead: Mapping[str, str] = field(default_factory=dict)  # node -> older member waiting for its turn there
    after: Sequence[str] = ()  # spec.after
    done: Mapping[str, frozenset[str]] = field(default_factory=dict)  # dependency -> nodes where it succeeded
    missing: Sequence[str] = ()  # names in spec.after with no DaemonJob
    cycle: Sequence[str] = ()  # a cycle of spec.after through this DaemonJob (names, in order)

    @property
    def active(self) -> bool:
        return bool(self.group or self.after)


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
