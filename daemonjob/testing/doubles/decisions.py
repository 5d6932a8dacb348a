"""Deciding over Jobs and nodes as tests hold them, and applying a decision to a list of Jobs
as the act layer and the API server would: for tests of `decide`, one or several in a row."""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import KW_ONLY, dataclass
from datetime import datetime
from typing import Any

from daemonjob.domain.decision.decide import Decision, decide
from daemonjob.domain.jobs.standins import standin_of
from daemonjob.domain.nodework.disruption import Disruption
from daemonjob.domain.nodework.maintenance import MaintenanceInput
from daemonjob.domain.nodework.nodecheck import HealthInput
from daemonjob.domain.order.rules import OrderInput
from daemonjob.domain.rollout.inputs import ApiTroubles, ConfigMapsRead, DecisionInput, FiringAlerts
from daemonjob.domain.rollout.keptplan import KeptPlan
from daemonjob.domain.shared.memo import Memo, no_memo
from daemonjob.domain.shared.timestamps import format_time
from daemonjob.domain.spec.eligibility import Eligibility

__all__ = ["Given", "decide_over", "apply"]

Obj = Mapping[str, Any]


@dataclass(frozen=True)
class Given:
    """A decision's input as a test holds it: the DaemonJob, its Jobs and the nodes, the clock,
    and what else the controller would hand over, each defaulting to nothing in the way.

    The plan is made from scratch out of `jobs` and `nodes`, or is `kept_plan` as it is; the
    API's troubles (`stalled`, `conflicts`, `rejected`), the ConfigMaps read, the firing alerts,
    the other DaemonJobs' per-node state (`order`), the Nodes' maintenance records and the
    cluster's nodes out of service (`disruption`), the recorded results (`recorded`)."""

    dj: Obj
    jobs: Iterable[Obj]
    nodes: Iterable[Obj]
    now: datetime
    stalled: tuple[str, str] | None = None
    _: KW_ONLY
    conflicts: Mapping[str, str] | None = None
    rejected: Mapping[str, str] | None = None
    configmaps: dict[str, Obj | None] | None = None
    unreadable: dict[str, str] | None = None
    eligibility: Eligibility | None = None
    memo: Memo = no_memo
    kept_plan: KeptPlan | None = None
    alerts: FiringAlerts = FiringAlerts()
    order: OrderInput = OrderInput()
    maintenance: MaintenanceInput = MaintenanceInput()
    disruption: Disruption = Disruption()
    health: HealthInput = HealthInput()
    recorded: Iterable[Obj] | None = None  # recorded results, as the reports hold them (deleteSucceededJobs)

    def input(self) -> DecisionInput:
        plan = self.kept_plan
        if plan is None:
            standins = None if self.recorded is None else [standin_of(r) for r in self.recorded]
            recorded = None if standins is None else {v.node: v for v in standins if v is not None and v.node}
            plan = KeptPlan.of(self.jobs, self.nodes, self.memo, recorded)
        return DecisionInput(
            self.dj,
            plan,
            self.now,
            troubles=ApiTroubles(self.stalled, self.rejected, self.conflicts),
            configmaps=ConfigMapsRead(self.configmaps, False, dict(self.unreadable or {})),
            eligibility=self.eligibility,
            memo=self.memo,
            alerts=self.alerts,
            order=self.order,
            maintenance=self.maintenance,
            disruption=self.disruption,
            health=self.health,
        )


def decide_over(given: Given | DecisionInput) -> Decision:
    """`decide` on `given` (a test's holdings, or the input value itself)."""
    return decide(given.input() if isinstance(given, Given) else given)


def apply(decision: Decision, jobs: list[dict[str, Any]], now: datetime) -> list[dict[str, Any]]:
    """The Jobs after the act layer: deleted ones start terminating, created ones appear active."""
    gone = {d.name for d in decision.deletes}
    out = []
    for j in jobs:
        j = copy.deepcopy(j)
        if j["metadata"]["name"] in gone:
            j["metadata"]["deletionTimestamp"] = format_time(now)
        out.append(j)
    for c in decision.creates:
        body = copy.deepcopy(c.body)
        body["metadata"]["creationTimestamp"] = format_time(now)
        out.append(body)
    return out
