"""The one value a decision reads: `decide(DecisionInput) -> Decision`.

Everything a pass hands the pure decision travels in `DecisionInput`: the DaemonJob, its
per-node view (the kept plan, or one made from scratch), the clock, what the API server said
in earlier passes, the referenced ConfigMaps. A new input (a gate that holds the rollout
back, say) is one more field here with a default that changes nothing, read by the step of
`decide` that needs it; no signature down the chain changes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from daemonjob.domain.jobs.attempts import DeletedJobs
from daemonjob.domain.nodework.disruption import Disruption
from daemonjob.domain.nodework.maintenance import MaintenanceInput
from daemonjob.domain.nodework.nodecheck import HealthInput
from daemonjob.domain.order.rules import OrderInput
from daemonjob.domain.rollout.keptplan import KeptPlan
from daemonjob.domain.shared.memo import Memo, no_memo
from daemonjob.domain.spec.eligibility import Eligibility
from daemonjob.domain.spec.validate import Validation

__all__ = ["ApiTroubles", "ConfigMapsRead", "DecisionInput", "FiringAlerts", "Recorded"]

Obj = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class ApiTroubles:
    """What the API server told the act layer about this DaemonJob's Jobs, kept between passes."""

    stall: tuple[str, str] | None = None  # (reason, message): it refuses the spec's Jobs outright; probe
    rejected: Mapping[str, str] | None = None  # node -> why its Job was refused, oldest first: last turns
    conflicts: Mapping[str, str] | None = None  # node -> why its Job name is held by a Job not ours to adopt


@dataclass(frozen=True, slots=True)
class ConfigMapsRead:
    """The referenced ConfigMaps as far as their watches know them (rerunOnConfigChange)."""

    objects: dict[str, Obj | None] | None = None  # by name (None: missing); None: not opted in, not read
    pending: bool = False  # a watch has not listed yet: its sync listener wakes the DaemonJob
    unreadable: dict[str, str] = field(default_factory=dict)  # name -> why its list fails


@dataclass(frozen=True, slots=True)
class FiringAlerts:
    """The alerts firing in Prometheus as the controller last read them (spec.rollout.haltOnAlerts).

    `firing`: each alert's labels as sorted (name, value) pairs; `unknown`: why they are not
    known (no Prometheus configured, not read yet, unreachable), which halts like a firing
    match. The default is that no Prometheus is read: only a DaemonJob with haltOnAlerts reads
    this, and for it an unread Prometheus must halt, not let everything through."""

    firing: tuple[tuple[tuple[str, str], ...], ...] = ()
    unknown: str | None = "the controller runs without --prometheus-url"


@dataclass(frozen=True, slots=True)
class Recorded:
    """What decide reads of the DaemonJob besides its spec: what its status last recorded."""

    name: str
    generation: Any
    status: Mapping[str, Any]
    conditions: Mapping[str, Mapping[str, Any]]

    @classmethod
    def of(cls, dj: Obj) -> Recorded:
        meta = dj.get("metadata") or {}
        raw = dj.get("status")
        status: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
        conditions = {str(c.get("type")): c for c in status.get("conditions") or () if isinstance(c, Mapping)}
        return cls(meta.get("name") or "", meta.get("generation"), status, conditions)


@dataclass(frozen=True, slots=True)
class DecisionInput:
    """Everything one decision reads. Only with synced caches: a node missing from `kept_plan` is
    taken to be deleted, and its Jobs are deleted."""

    # the DaemonJob and its nodes
    dj: Obj
    kept_plan: KeptPlan  # the per-node view: kept across passes and told of every change, or from scratch
    now: datetime  # one instant for the whole decision (a naive time is UTC)
    # what earlier passes learned
    troubles: ApiTroubles = ApiTroubles()
    configmaps: ConfigMapsRead = ConfigMapsRead()
    # how to read the objects (no effect on the outcome)
    eligibility: Eligibility | None = None  # the node rules compiled from `dj` (compiled by decide if None)
    memo: Memo = no_memo  # keeps values derived from cached objects on them (the caches' ObjectMemo)
    # gates of the rollout go here, each a field whose default lets everything through
    alerts: FiringAlerts = FiringAlerts()  # read only with spec.rollout.haltOnAlerts (which then halts)
    order: OrderInput = OrderInput()  # the other DaemonJobs' per-node state (exclusionGroup, after)
    maintenance: MaintenanceInput = MaintenanceInput()  # its records on Nodes, drains' progress (nodeMaintenance)
    disruption: Disruption = Disruption()  # the cluster's nodes out of service and their limit (nodeMaintenance)
    health: HealthInput = HealthInput()  # the DaemonSet pods on nodes being checked (healthCheck)
    # how to read the spec (no effect on the outcome)
    checked: Validation | None = None  # `dj`'s spec as the rule book read it (read by decide if None)
    # what the caches saw go
    deleted: DeletedJobs = DeletedJobs()  # its Jobs seen deleted, until the status records the next attempt
    # the controller's bound: creates the Job watch's lag leaves room for now (None: no bound)
    create_room: int | None = None
    recorded: Recorded = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.now.tzinfo is None:
            object.__setattr__(self, "now", self.now.replace(tzinfo=timezone.utc))  # as format_time reads it
        object.__setattr__(self, "recorded", Recorded.of(self.dj))
