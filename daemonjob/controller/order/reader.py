"""One DaemonJob's `OrderInput` (domain/order/rules.py) as the caches show it.

The rules are domain/gates/orderview.py's; this reads the facts they need from the caches, at a
cost of what the group and the dependencies hold: the other members' Jobs that may still
run (the Jobs cache's RUNNING_INDEX, a few per member) and their creates the cache does not
show yet (claims.py), the nodes where older members wait for their turn (their kept plans'
turns), and where each dependency succeeded (succeeded.py, kept from the Job events for the
DaemonJobs named in spec.after: a set, not a look at each of its Jobs).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from daemonjob.controller.order.claims import NodeClaims
from daemonjob.controller.order.index import OrderIndex, ns_name
from daemonjob.controller.runtime.informers import RUNNING_INDEX
from daemonjob.controller.runtime.keptplans import KeptPlans
from daemonjob.domain.gates.orderview import done_view, order_input
from daemonjob.domain.jobs.contract import job_node
from daemonjob.domain.jobs.owners import owner_id
from daemonjob.domain.order.rules import OrderInput
from daemonjob.domain.spec.spec import DaemonJobSpec
from daemonjob.machinery.cache.informer import SharedInformer

__all__ = ["OrderReader"]

Obj = Mapping[str, Any]


class OrderReader:
    """Reads one DaemonJob's `OrderInput` from the caches (the observe step's part for the order)."""

    def __init__(
        self,
        daemonjobs: SharedInformer,
        jobs: SharedInformer,
        plans: KeptPlans,
        order_index: OrderIndex,
        claims: NodeClaims | None = None,
    ) -> None:
        self.daemonjobs, self.jobs, self.plans, self.order_index = daemonjobs, jobs, plans, order_index
        self.claims = claims
        # (dependency, revision, run) -> where its recorded successes stand for deleted Jobs (resultstatus.py)
        self.recorded: Callable[[Obj, str | None, str | None], frozenset[str]] = lambda _dj, _rev, _run: frozenset()

    def read(self, key: str, dj: Obj) -> OrderInput:
        return order_input(dj, self.order_index.spec_of(dj), _CachedFacts(self, key, dj))


class _CachedFacts:
    """The facts of `domain.orderview.OrderFacts` for the DaemonJob `key`, from the caches."""

    def __init__(self, reader: OrderReader, key: str, dj: Obj) -> None:
        self.reader, self.key, self.dj = reader, key, dj
        self.ns, _ = ns_name(key)

    def spec_of(self, dj: Obj) -> DaemonJobSpec:
        return self.reader.order_index.spec_of(dj)

    def named(self, name: str) -> Obj | None:
        found: Obj | None = self.reader.daemonjobs.store.get(f"{self.ns}/{name}")
        return found

    def done(self, dj: Obj) -> frozenset[str]:
        revision, run = done_view(dj)
        done = self.reader.order_index.succeeded.nodes(dj, revision, run)
        recorded = self.reader.recorded(dj, revision, run)
        return done | recorded if recorded else done

    def peers(self) -> Iterable[Obj]:
        for peer in self.reader.order_index.peers(self.key):
            other = self.reader.daemonjobs.store.get(peer)
            if other is not None:
                yield other

    def running_nodes(self, dj: Obj) -> Iterable[str]:
        meta = dj["metadata"]
        for job in self.reader.jobs.store.by_index(RUNNING_INDEX, owner_id(meta["namespace"], meta.get("uid") or "")):
            node = job_node(job)
            if node:
                yield node

    def claimed(self) -> Mapping[str, str]:
        claims, group = self.reader.claims, self.spec_of(self.dj).exclusion_group
        if claims is None or not group:  # the other members' creates not in the cache yet
            return {}
        return claims.held(self.ns, group, self.dj["metadata"].get("uid") or "")

    def turn_nodes(self, dj: Obj) -> Sequence[str]:
        return self.reader.plans.turn_nodes(dj["metadata"].get("uid") or "")
