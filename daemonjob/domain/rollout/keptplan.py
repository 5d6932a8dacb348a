"""A DaemonJob's plan kept across passes: a node's part is recomputed only when it changed.

The caller says which nodes changed (their node object and their Jobs of this DaemonJob,
read from its caches); each changed part is recomputed by the one rule book, `plan_node`,
and the plan's sums move by the difference, so a Job finishing or a node joining costs
one node's work, not the cluster's. Every part is recomputed when the context changes
(revision, run, settings, node rules): a template edit or a new run. A plan from scratch
(`plan_nodes`) must always equal it; the controller compares the two now and then, and
property tests do at every step of random event sequences.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from daemonjob.domain.jobs.contract import ACTIVE
from daemonjob.domain.jobs.standins import with_recorded
from daemonjob.domain.rollout.plan import JobView, NodePlan, Plan, PlanContext, node_inputs, plan_node
from daemonjob.domain.shared.memo import Memo, no_memo

__all__ = ["KeptPlan", "node_views"]

Inputs = tuple[Mapping[str, Any] | None, tuple[JobView, ...]]
Views = JobView | tuple[JobView, ...]  # a node's one Job's view, or its Jobs' views (none, or several)


def _unpacked(views: Views) -> tuple[JobView, ...]:
    return views if isinstance(views, tuple) else (views,)


def node_views(
    node: Mapping[str, Any] | None, views: Sequence[JobView], standin: JobView | None
) -> tuple[JobView, ...]:
    """A node's Jobs with its recorded success; a deleted node's record is of no use."""
    if standin is None or (node is None and not views):
        return tuple(views)
    return with_recorded(views, standin)


class KeptPlan:
    """The inputs and parts of every node of one DaemonJob, and their sum. Not thread-safe:
    one reconcile of a DaemonJob at a time uses it (the work queue's promise)."""

    def __init__(self) -> None:
        # A node's object, its Jobs' views and its part in three lists at one slot, its name
        # once in `_slot`: three maps by name cost an entry each, 30-40 bytes a node of each
        # DaemonJob (the tables of 65,000 names are half empty), a list's item 8. A node's one
        # Job (most nodes) is its view itself, not a tuple of one (48 bytes a Job).
        self._slot: dict[str, int] = {}
        self._nodes: list[Mapping[str, Any] | None] = []
        self._views: list[Views | None] = []  # None: the node is gone, its part kept until the next plan
        self._parts: list[NodePlan | None] = []  # None: not planned yet
        self._free: list[int] = []  # the slots of nodes gone, taken again by the next ones
        self._dirty: set[str] = set()
        self._runs: Counter[str | None] = Counter()  # active Jobs per run: the schedule's step reads it
        self._ctx: PlanContext | None = None
        self.plan = Plan()
        self.planned = 0  # how many times `plan` was made: a reader tells a plan in the making

    @classmethod
    def of(
        cls,
        jobs: Iterable[Mapping[str, Any]],
        nodes: Iterable[Mapping[str, Any]],
        memo: Memo = no_memo,
        recorded: Mapping[str, JobView] | None = None,
    ) -> KeptPlan:
        """Everything at once, from the caches' content; `recorded`: each node's newest
        recorded success, with spec.results.deleteSucceededJobs (jobs/standins.py)."""
        state = cls()
        for name, (node, views) in node_inputs(jobs, nodes, memo).items():
            state.set_node(name, node, node_views(node, views, recorded.get(name) if recorded else None))
        return state

    def set_node(self, name: str, node: Mapping[str, Any] | None, jobs: Sequence[JobView]) -> None:
        """`name`'s node object now (None: deleted) and its Jobs of this DaemonJob now."""
        i = self._slot.get(name)
        old = None if i is None else self._views[i]
        if old is not None:
            self._count_runs(_unpacked(old), -1)
        views = tuple(jobs)
        if node is None and not views:
            if i is not None:  # its slot is freed with its part, at the next plan
                self._nodes[i] = self._views[i] = None
        else:
            if i is None:
                i = self._take_slot(name)
            self._nodes[i] = node
            self._views[i] = views[0] if len(views) == 1 else views
            self._count_runs(views, 1)
        self._dirty.add(name)

    def _take_slot(self, name: str) -> int:
        if self._free:
            i = self._slot[name] = self._free.pop()
            return i
        i = self._slot[name] = len(self._views)
        self._nodes.append(None)
        self._views.append(None)
        self._parts.append(None)
        return i

    def _free_slot(self, name: str, i: int) -> None:
        del self._slot[name]
        self._nodes[i] = self._views[i] = self._parts[i] = None
        self._free.append(i)

    def _count_runs(self, views: Iterable[JobView], sign: int) -> None:
        for view in views:
            if view.state == ACTIVE:
                self._runs[view.run] += sign
                if not self._runs[view.run]:
                    del self._runs[view.run]

    def active_runs(self) -> set[str | None]:
        """The runs that have an active Job (None: Jobs without a run)."""
        return set(self._runs)

    def node(self, name: str) -> Inputs | None:
        """`name`'s node object (None: deleted) and its Jobs of this DaemonJob, as last told."""
        i = self._slot.get(name)
        views = None if i is None else self._views[i]
        return None if i is None or views is None else (self._nodes[i], _unpacked(views))

    def part(self, name: str) -> NodePlan | None:
        """`name`'s part of the plan last made by `plan_for`."""
        i = self._slot.get(name)
        return None if i is None else self._parts[i]

    def job_views(self) -> Iterator[JobView]:
        for views in self._views:
            if views is not None:
                yield from _unpacked(views)

    def plan_for(self, ctx: PlanContext, memo: Memo = no_memo) -> Plan:
        """The plan in `ctx`: the changed nodes' parts recomputed, or all of them in a new context."""
        nodes, views, parts = self._nodes, self._views, self._parts
        if ctx != self._ctx:
            for name, i in [(name, i) for name, i in self._slot.items() if views[i] is None]:
                self._free_slot(name, i)
            made: list[tuple[str, NodePlan]] = []
            for name, i in self._slot.items():
                part = parts[i] = plan_node(name, nodes[i], _unpacked(views[i] or ()), ctx, memo)
                made.append((name, part))
            self.plan = Plan.of(made)
            self._ctx = ctx
        else:
            for name in self._dirty:
                slot = self._slot.get(name)
                if slot is None:
                    continue
                before = parts[slot]
                if before is not None:
                    self.plan.remove(name, before)
                jobs = views[slot]
                if jobs is None:
                    self._free_slot(name, slot)
                else:
                    part = parts[slot] = plan_node(name, nodes[slot], _unpacked(jobs), ctx, memo)
                    self.plan.add(name, part)
        self._dirty.clear()
        self.planned += 1
        return self.plan
