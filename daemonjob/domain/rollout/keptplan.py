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
from daemonjob.domain.results.recorded import with_recorded
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
        # A node's object and its Jobs' views in two maps, not one of pairs: a pair per node of
        # each DaemonJob was 72 bytes, an entry ~30 (10 DaemonJobs over 5000 nodes: 2 MB).
        # A node's one Job (most nodes) is its view itself, not a tuple of one (48 bytes a Job).
        self._nodes: dict[str, Mapping[str, Any] | None] = {}
        self._views: dict[str, Views] = {}
        self._parts: dict[str, NodePlan] = {}
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
        recorded success, with spec.results.deleteSucceededJobs (recorded.py)."""
        state = cls()
        for name, (node, views) in node_inputs(jobs, nodes, memo).items():
            state.set_node(name, node, node_views(node, views, recorded.get(name) if recorded else None))
        return state

    def set_node(self, name: str, node: Mapping[str, Any] | None, jobs: Sequence[JobView]) -> None:
        """`name`'s node object now (None: deleted) and its Jobs of this DaemonJob now."""
        old = self._views.get(name)
        if old is not None:
            self._count_runs(_unpacked(old), -1)
        views = tuple(jobs)
        if node is None and not views:
            self._nodes.pop(name, None)
            self._views.pop(name, None)
        else:
            self._nodes[name] = node
            self._views[name] = views[0] if len(views) == 1 else views
            self._count_runs(views, 1)
        self._dirty.add(name)

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
        views = self._views.get(name)
        return None if views is None else (self._nodes[name], _unpacked(views))

    def part(self, name: str) -> NodePlan | None:
        """`name`'s part of the plan last made by `plan_for`."""
        return self._parts.get(name)

    def job_views(self) -> Iterator[JobView]:
        for views in self._views.values():
            yield from _unpacked(views)

    def plan_for(self, ctx: PlanContext, memo: Memo = no_memo) -> Plan:
        """The plan in `ctx`: the changed nodes' parts recomputed, or all of them in a new context."""
        if ctx != self._ctx:
            views = self._views
            self._parts = {
                name: plan_node(name, node, _unpacked(views[name]), ctx, memo) for name, node in self._nodes.items()
            }
            self.plan = Plan.of(self._parts.items())
            self._ctx = ctx
        else:
            for name in self._dirty:
                before = self._parts.pop(name, None)
                if before is not None:
                    self.plan.remove(name, before)
                if name in self._nodes:
                    jobs = _unpacked(self._views[name])
                    part = self._parts[name] = plan_node(name, self._nodes[name], jobs, ctx, memo)
                    self.plan.add(name, part)
        self._dirty.clear()
        self.planned += 1
        return self.plan
