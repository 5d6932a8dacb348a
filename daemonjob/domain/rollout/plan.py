"""Step 2 of a decision: what the nodes and Jobs say, node by node, before any limit applies.

Each existing node is one of: pending (eligible, no Job standing for it yet: its turn to
come, or waiting for a terminating Job to go), active, succeeded or failed (by the Job
that stands for it, its record). A node that stopped being eligible is left alone,
except that while its record is active it stays counted (desired and active) and holds
its slot: its Job may still run, or wait for the node to come back.

With runs (scheduled or run-now), a node's record is its Job of the current run; Jobs of
other runs are history like older revisions. A node whose Job of another run is still
active either has it deleted first (concurrencyPolicy Replace, a turn like an older
revision's) or waits for it to finish (Forbid), so a node never runs two Jobs at once.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from daemonjob.domain.jobs.changes import DeleteJob
from daemonjob.domain.jobs.contract import ACTIVE, FAILED, SUCCEEDED
from daemonjob.domain.jobs.jobview import JobView, job_view, node_inputs
from daemonjob.domain.jobs.turnverdict import Awaiting
from daemonjob.domain.rollout.nodeplan import (
    HISTORY,
    NODE_GONE,
    OLD_REVISION,
    OLD_RUN,
    RECORDED,
    Held,
    NodePlan,
    PlanContext,
    plan_node,
)
from daemonjob.domain.rollout.retries import Retrying
from daemonjob.domain.rollout.starts import Unstarted
from daemonjob.domain.rollout.turns import Turn, Turns
from daemonjob.domain.shared.memo import Memo, no_memo
from daemonjob.domain.shared.sortedparts import sorted_apply

__all__ = [
    "JobView",
    "job_view",
    "Held",
    "NodePlan",
    "Plan",
    "PlanContext",
    "plan_node",
    "plan_nodes",
    "node_inputs",
    "NODE_GONE",
    "OLD_REVISION",
    "OLD_RUN",
    "HISTORY",
    "RECORDED",
]


def _by_node(item: Any) -> str:
    return item.node


@dataclass(slots=True)
class Plan:
    """The sum of the nodes' plans: counts, turns and always-safe deletes.

    `pending` follows from the counts and `busy` is the slots held. Lists are kept sorted
    by node and parts are added and removed one node at a time, so a plan kept across
    passes costs what changed. Readers must not change it.
    """

    eligible: int = 0
    active: int = 0  # eligible or held nodes whose record is active
    succeeded: int = 0
    failed: int = 0
    failed_names: list[str] = field(default_factory=list)
    failed_current_names: list[str] = field(default_factory=list)  # failed Jobs of the current revision
    held: list[Held] = field(default_factory=list)
    busy: int = 0  # nodes running a Job of this DaemonJob (any revision or run): each holds a slot
    replacing: list[Turn] = field(default_factory=list)  # turns that first delete a running older Job
    starting: list[Turn] = field(default_factory=list)  # turns that create
    by_node_deletes: dict[str, tuple[DeleteJob, ...]] = field(default_factory=dict)
    by_node_extra_old: dict[str, tuple[DeleteJob, ...]] = field(default_factory=dict)
    by_node_ttl: dict[str, tuple[JobView, ...]] = field(default_factory=dict)
    successes: list[tuple[datetime, str]] = field(default_factory=list)  # (finished, node), oldest first
    retrying: list[Retrying] = field(default_factory=list)  # soonest first; their turns are in `starting`
    unstarted: list[Unstarted] = field(default_factory=list)  # oldest first
    suspended: list[tuple[str, str]] = field(default_factory=list)  # (node, Job)
    awaiting: list[Awaiting] = field(default_factory=list)  # turns waiting for their verdict, by node

    @property
    def desired(self) -> int:
        return self.eligible + len(self.held)

    @property
    def pending(self) -> int:
        return self.desired - self.active - self.succeeded - self.failed

    @property
    def deletes(self) -> list[DeleteJob]:
        return [d for ds in self.by_node_deletes.values() for d in ds]

    @property
    def extra_old(self) -> list[DeleteJob]:
        return [d for ds in self.by_node_extra_old.values() for d in ds]

    @property
    def ttl_jobs(self) -> list[JobView]:
        return [j for js in self.by_node_ttl.values() for j in js]

    def turns(
        self, conflicts: Mapping[str, str] | None, rejected: Mapping[str, str] | None, now: datetime | None = None
    ) -> Turns:
        """The turns in the order nodes take them: nodes whose Job name another owner holds or
        whose retry's backoff runs at `now` left out, nodes the API server refused last (oldest
        refusal first). The plan's own lists are used as they are when none applies (the usual
        case: no copy of thousands of turns)."""
        backoff = self.backing_off(now)
        if not conflicts and not rejected and not backoff:
            return Turns(self.replacing, self.starting, self.deletes, self.extra_old, self.busy)
        skip = {**(conflicts or {}), **backoff}
        order = {node: i for i, node in enumerate(rejected or {})}

        def ordered(turns: Sequence[Turn]) -> list[Turn]:
            kept = [t for t in turns if t.node not in skip]
            later = sorted((t for t in kept if t.node in order), key=lambda t: order[t.node])
            return [t for t in kept if t.node not in order] + later

        starting = ordered(self.starting)
        refused = {t.node: (rejected or {})[t.node] for t in starting if t.node in order}
        return Turns(ordered(self.replacing), starting, self.deletes, self.extra_old, self.busy, refused or None)

    def backing_off(self, now: datetime | None) -> dict[str, str]:
        """node -> why: the retrying nodes whose backoff has not passed at `now`."""
        if now is None or not self.retrying:
            return {}
        return {r.node: f"retry at {r.at.isoformat()}" for r in self.retrying if r.at > now}

    @classmethod
    def of(cls, parts: Iterable[tuple[str, NodePlan]]) -> Plan:
        """The sum of many parts: appended, then sorted once."""
        plan = cls()
        for name, part in parts:
            plan._apply(name, part, 1, insort=False)
        plan.failed_names.sort()
        plan.failed_current_names.sort()
        plan.successes.sort()
        plan.retrying.sort()
        plan.unstarted.sort()
        plan.suspended.sort()
        for items in (plan.held, plan.replacing, plan.starting, plan.awaiting):
            items.sort(key=_by_node)
        return plan

    def add(self, name: str, part: NodePlan) -> None:
        self._apply(name, part, 1)

    def remove(self, name: str, part: NodePlan) -> None:
        self._apply(name, part, -1)

    def _apply(self, name: str, part: NodePlan, sign: int, insort: bool = True) -> None:
        self.eligible += sign * part.eligible
        self.busy += sign * part.busy
        if part.state == ACTIVE:
            self.active += sign
        elif part.state == SUCCEEDED:
            self.succeeded += sign
        elif part.state == FAILED:
            self.failed += sign
            sorted_apply(self.failed_names, name, sign, insort)
            if part.failed_current:
                sorted_apply(self.failed_current_names, name, sign, insort)
        if part.succeeded_at is not None:
            sorted_apply(self.successes, (part.succeeded_at, name), sign, insort)
        for items, item in ((self.retrying, part.retry), (self.unstarted, part.unstarted)):
            if item is not None:
                sorted_apply(items, item, sign, insort)
        if part.suspended is not None:
            sorted_apply(self.suspended, (name, part.suspended), sign, insort)
        if part.held is not None:
            sorted_apply(self.held, part.held, sign, insort, _by_node)
        if part.awaiting is not None:
            sorted_apply(self.awaiting, part.awaiting, sign, insort, _by_node)
        if part.turn is not None:
            sorted_apply(self.replacing if part.turn.replace else self.starting, part.turn, sign, insort, _by_node)
        by_node: tuple[tuple[dict[str, Any], tuple[Any, ...]], ...] = (
            (self.by_node_deletes, part.deletes),
            (self.by_node_extra_old, part.extra_old),
            (self.by_node_ttl, part.ttl_jobs),
        )
        for attr, value in by_node:
            if value:
                if sign > 0:
                    attr[name] = value
                else:
                    attr.pop(name, None)


def plan_nodes(
    jobs: Iterable[Mapping[str, Any]], nodes: Iterable[Mapping[str, Any]], ctx: PlanContext, memo: Memo = no_memo
) -> Plan:
    """The whole plan, every node's part summed: what the incremental plan must always equal."""
    inputs = node_inputs(jobs, nodes, memo)
    return Plan.of((name, plan_node(name, node, views, ctx, memo)) for name, (node, views) in inputs.items())
