"""Deciding over Jobs and nodes as tests hold them, and applying a decision to a list of Jobs
as the act layer and the API server would: for tests of `decide`, one or several in a row."""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from daemonjob.domain.decide import Decision, decide
from daemonjob.domain.eligibility import Eligibility
from daemonjob.domain.inputs import ApiTroubles, ConfigMapsRead, DecisionInput, FiringAlerts
from daemonjob.domain.jobs import format_time
from daemonjob.domain.keptplan import KeptPlan
from daemonjob.domain.memo import Memo, no_memo
from daemonjob.domain.order import OrderInput

Obj = Mapping[str, Any]


def decide_over(
    dj: Obj,
    jobs: Iterable[Obj],
    nodes: Iterable[Obj],
    now: datetime,
    stalled: tuple[str, str] | None = None,
    *,
    conflicts: Mapping[str, str] | None = None,
    rejected: Mapping[str, str] | None = None,
    configmaps: dict[str, Obj | None] | None = None,
    unreadable: dict[str, str] | None = None,
    eligibility: Eligibility | None = None,
    memo: Memo = no_memo,
    plan: KeptPlan | None = None,
    alerts: FiringAlerts = FiringAlerts(),
    order: OrderInput = OrderInput(),
) -> Decision:
    """`decide` on the input value made of these: the plan from scratch out of `jobs` and
    `nodes`, or `plan` (a kept one) as it is; the API's troubles (`stalled`, `conflicts`,
    `rejected`), the ConfigMaps and the firing alerts read as the controller would hand them
    over; `order`: the other DaemonJobs' per-node state (exclusionGroup, after)."""
    troubles = ApiTroubles(stalled, rejected, conflicts)
    read = ConfigMapsRead(configmaps, False, dict(unreadable or {}))
    if plan is None:
        return decide(
            DecisionInput.from_objects(
                dj,
                jobs,
                nodes,
                now,
                memo=memo,
                troubles=troubles,
                configmaps=read,
                eligibility=eligibility,
                alerts=alerts,
                order=order,
            )
        )
    return decide(DecisionInput(dj, plan, now, troubles, read, eligibility, memo, alerts, order=order))


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
