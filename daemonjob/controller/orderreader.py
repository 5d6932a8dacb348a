"""One DaemonJob's `OrderInput` (domain/order.py) as the caches show it.

`OrderReader.read` costs what the group and the dependencies hold: the other members' Jobs
that may still run (the Jobs cache's RUNNING_INDEX, a few per member) and their creates the
cache does not show yet (claims.py), the nodes where older members wait for their turn
(their kept plans' turns), and where each dependency succeeded (succeeded.py, kept from the
Job events for the DaemonJobs named in spec.after: a set, not a look at each of its Jobs).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from daemonjob.controller.claims import NodeClaims
from daemonjob.controller.informers import RUNNING_INDEX
from daemonjob.controller.keptplans import KeptPlans
from daemonjob.controller.order import OrderIndex, done_view, ns_name, waits_for_turns
from daemonjob.domain.jobs import job_node
from daemonjob.domain.order import OrderInput, order_key
from daemonjob.machinery.informer import SharedInformer

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

    def read(self, key: str, dj: Obj) -> OrderInput:
        spec = self.order_index.spec_of(dj)
        group, after = spec.exclusion_group, spec.after
        if not group and not after:
            return OrderInput()
        ns, name = ns_name(key)
        done_cache: dict[str, frozenset[str] | None] = {}
        missing = [d for d in after if self._done(ns, d, done_cache) is None]
        done = {d: nodes for d in after if (nodes := self._done(ns, d, done_cache)) is not None}
        busy: dict[str, str] = {}
        ahead: dict[str, str] = {}
        if group:
            mine = order_key(dj)
            if self.claims is not None:  # the other members' creates not in the cache yet
                busy.update(self.claims.held(ns, group, dj["metadata"].get("uid") or ""))
            for peer in self.order_index.peers(key):
                other = self.daemonjobs.store.get(peer)
                if other is None:
                    continue
                peer_name = other["metadata"]["name"]
                uid = other["metadata"].get("uid") or ""
                for job in self.jobs.store.by_index(RUNNING_INDEX, uid):
                    node = job_node(job)
                    if node:
                        busy.setdefault(node, peer_name)
                other_spec = self.order_index.spec_of(other)
                if order_key(other) < mine and waits_for_turns(other, other_spec):
                    ahead_nodes = self.plans.turn_nodes(uid)
                    for dep in other_spec.after:  # it waits for its own dependencies there, not for us
                        dep_done = self._done(ns, dep, done_cache) or frozenset()
                        ahead_nodes = [n for n in ahead_nodes if n in dep_done]
                    for node in ahead_nodes:
                        ahead.setdefault(node, peer_name)
        return OrderInput(
            group=group,
            busy=busy,
            ahead=ahead,
            after=after,
            done=done,
            missing=tuple(missing),
            cycle=tuple(self._cycle(ns, name, after)),
        )

    def _done(self, ns: str, name: str, cache: dict[str, frozenset[str] | None]) -> frozenset[str] | None:
        """The nodes where DaemonJob `name` succeeded in its current revision and run (None: no such DaemonJob)."""
        if name in cache:
            return cache[name]
        dep = self.daemonjobs.store.get(f"{ns}/{name}")
        out: frozenset[str] | None = None
        if dep is not None:
            revision, run = done_view(dep)
            out = self.order_index.succeeded.nodes(dep, revision, run)
        cache[name] = out
        return out

    def _cycle(self, ns: str, name: str, after: Iterable[str]) -> list[str]:
        """A path of spec.after from `name` back to itself, if there is one (depth first)."""
        stack: list[tuple[str, list[str]]] = [(d, [name, d]) for d in after]
        seen: set[str] = set()
        while stack:
            current, path = stack.pop()
            if current == name:
                return path
            if current in seen:
                continue
            seen.add(current)
            other = self.daemonjobs.store.get(f"{ns}/{current}")
            if other is not None:
                stack.extend((d, [*path, d]) for d in self.order_index.spec_of(other).after)
        return []
