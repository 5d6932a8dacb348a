"""spec.nodeMaintenance's Node writes (cordon, drain, keep, release) and what the step reads.

A node's turn (within maxParallel, which counts nodes in maintenance) first writes this
DaemonJob's record on the Node and cordons it, in one patch; then drains it (the act layer
evicts, and reports back what is left); then the node's Job is created, tolerating the
cordon; once the Job has finished, the node is released: the record goes and, only if the
record says this DaemonJob cordoned a schedulable node, the cordon goes with it.

The Node's record is the truth a successor reads after a crash at any step, so each node
is cordoned once per revision or run, and released once. A node is released when its Job
finished, when its drain timed out (the release writes the outcome on the Node in the same
patch, so neither a crash nor the status's cut at 1000 names drains it again), and, while
no Job of ours runs there, when the rollout stops (suspend, an unusable spec, the failure
budget, the namespace no longer allowed), when its record is of an older revision or run,
or when the node stops being selected. A deleted DaemonJob's finalizer releases the rest
(`releases_on_delete`).

With keepFailedCordoned a node whose Job failed is kept: its record is marked `kept` (a Node
write, once), and it stays cordoned through later revisions and runs, out of their
rollouts, until a person releases it (`kubectl daemonjob release`, domain/nodework/releases.py), the
DaemonJob no longer uses node maintenance (its spec, its namespace), or it is deleted.

Pure: the records, the drain outcomes, the drains' progress and the allowed namespaces come
in the input (`MaintenanceInput`); the Node writes go out in `NodeWork`, which the step
(releasing.py) fills; drain timeouts are draintimeouts.py's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from daemonjob.domain.shared.noderecord import DrainOutcome, NodeRecord
from daemonjob.domain.shared.timestamps import format_time

__all__ = [
    "FINALIZER",
    "DrainProgress",
    "MaintenanceInput",
    "Cordon",
    "DrainNode",
    "Keep",
    "Release",
    "NodeWork",
    "cordons_for",
    "releases_on_delete",
    "has_finalizer",
]

FINALIZER = "daemonjob.io/node-maintenance"  # on a DaemonJob: what it cordoned is released before it goes
DELETED = "the DaemonJob is being deleted"  # why its finalizer releases a node (the Uncordoned Event says it)


@dataclass(frozen=True, slots=True)
class DrainProgress:
    """What the act layer's last look at a draining node found (kept between passes, not across restarts)."""

    drained: bool = False
    waiting: tuple[str, ...] = ()  # namespace/name of the pods still on the node, first few
    blocked: str | None = None  # why they are still there: a PodDisruptionBudget, a pod not evictable


@dataclass(frozen=True, slots=True)
class MaintenanceInput:
    """What the maintenance step reads besides the DaemonJob and its plan."""

    records: Mapping[str, NodeRecord] = field(default_factory=dict)  # node -> this DaemonJob's record on it
    drains: Mapping[str, DrainProgress] = field(default_factory=dict)  # node -> its drain's progress
    allowed_namespaces: frozenset[str] = frozenset()  # --node-maintenance-namespaces
    outcomes: Mapping[str, DrainOutcome] = field(default_factory=dict)  # node -> this DaemonJob's drain outcome on it


@dataclass(frozen=True, slots=True)
class Cordon:
    """Write `record` on the node and cordon it (if schedulable), in one patch."""

    node: str
    record: NodeRecord


@dataclass(frozen=True, slots=True)
class DrainNode:
    """Evict what is left on a cordoned node (the act layer reports back a DrainProgress)."""

    node: str
    record: NodeRecord


@dataclass(frozen=True, slots=True)
class Keep:
    """Mark `record` kept: its node stays cordoned until a person releases it."""

    node: str
    record: NodeRecord


@dataclass(frozen=True, slots=True)
class Release:
    """Remove `record` from the node and, if it says we cordoned it, uncordon it; `outcome`:
    a timed-out drain's, written in the same patch."""

    node: str
    record: NodeRecord
    why: str
    outcome: DrainOutcome | None = None


@dataclass(slots=True)
class NodeWork:
    """The Node writes of one decision, and what the status and the slots make of them."""

    cordons: list[Cordon] = field(default_factory=list)
    drains: list[DrainNode] = field(default_factory=list)
    releases: list[Release] = field(default_factory=list)
    keeps: list[Keep] = field(default_factory=list)
    start: list[str] = field(default_factory=list)  # nodes in maintenance whose Job is created now
    held: int = 0  # slots held by nodes in maintenance with no running Job of ours
    add_finalizer: bool = False
    refusal: str | None = None
    status: dict[str, Any] | None = None

    @property
    def writes(self) -> bool:
        return bool(self.cordons or self.drains or self.releases or self.keeps or self.add_finalizer)


def cordons_for(
    dj: Mapping[str, Any], revision: str, run: str | None, now: datetime, nodes: Iterable[str]
) -> list[Cordon]:
    """The records written on the nodes whose turn came in this decision."""
    meta = dj.get("metadata") or {}
    name = f"{meta.get('namespace') or ''}/{meta.get('name') or ''}"
    since = format_time(now)
    return [Cordon(node, NodeRecord(name, meta.get("uid") or "", revision, run, True, since)) for node in nodes]


def releases_on_delete(records: Mapping[str, NodeRecord]) -> list[Release]:
    """A deleted DaemonJob's finalizer: every node still carrying its record is released."""
    return [Release(node, record, DELETED) for node, record in sorted(records.items())]


def has_finalizer(dj: Mapping[str, Any]) -> bool:
    return FINALIZER in ((dj.get("metadata") or {}).get("finalizers") or ())
