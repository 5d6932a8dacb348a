"""Order across DaemonJobs (same namespace): spec.exclusionGroup and spec.after.

Both are gates of the pure decision (gates/order.py): the other DaemonJobs' per-node state is
one more input (`OrderInput`, read from the caches by the controller), and the gate keeps the
nodes it holds out of the turns, naming what each waits for.

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

__all__ = [
    "OrderInput",
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
