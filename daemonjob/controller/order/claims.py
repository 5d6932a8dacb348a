"""Nodes claimed in an exclusion group by creates the Jobs cache does not show yet.

Two members of a group that decide at the same moment read the same caches: neither sees
the other's new Job on a node until the informer delivers it, so both could create there.
So a member claims (namespace, group, node) for each create just before carrying it out,
and only then looks at the Jobs cache for a peer's running Job there: of two members, the
later claim finds the earlier one, or (once that was released on its Job's arrival in the
cache) the Job itself. A peer's decision counts a live claim as a busy node (OrderReader).

A claim ends when its Job shows in the cache (the router sees it), when its create fails or
is not attempted (Act), or after `ttl` in case its Job never shows (a claim read after that
counts for nothing). A claim that ends with no Job wakes the rest of the group: they may have
held the node for it. The claims live in the one process that writes (the leader).
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from daemonjob import defaults
from daemonjob.controller.order.index import OrderIndex
from daemonjob.controller.runtime.informers import RUNNING_INDEX
from daemonjob.domain.decision.decide import Decision
from daemonjob.domain.jobs.changes import CreateJob
from daemonjob.domain.jobs.contract import job_node
from daemonjob.domain.jobs.owners import owner_id
from daemonjob.machinery.cache.informer import SharedInformer

__all__ = ["NodeClaims"]

Obj = Mapping[str, Any]
Place = tuple[str, str, str]  # (namespace, group, node)


@dataclass(frozen=True, slots=True)
class _Claim:
    uid: str  # of the DaemonJob that holds it
    name: str  # its name, for the peers' status ("waiting for DaemonJob x")
    key: str  # its namespace/name, so a release can wake the rest of its group
    job: str  # the Job whose create it covers
    since: float


class NodeClaims:
    def __init__(
        self,
        daemonjobs: SharedInformer,
        jobs: SharedInformer,
        order_index: OrderIndex,
        wake: Callable[[str], None],
        timer: Callable[[], float],
        ttl: float = defaults.EXPECTATIONS_TTL,
    ) -> None:
        self.daemonjobs, self.jobs, self.order_index = daemonjobs, jobs, order_index
        self._wake = wake
        self._timer = timer
        self.ttl = ttl
        self._lock = threading.Lock()
        self._groups: dict[tuple[str, str], dict[str, _Claim]] = {}  # (namespace, group) -> node -> claim
        self._jobs: dict[tuple[str, str], Place] = {}  # (holder uid, Job name) -> where

    # -- a pass's act step -------------------------------------------------------------------
    def take(self, key: str, dj: Obj, decision: Decision) -> Decision:
        """`decision` without the creates on nodes where another member of `dj`'s group has a
        claim or a running Job; the nodes of the creates left are claimed for `dj`."""
        group = self.order_index.spec_of(dj).exclusion_group
        if group is None or not decision.creates:
            return decision
        ns = key.rpartition("/")[0]
        meta = dj["metadata"]
        uid, name = meta.get("uid") or "", meta["name"]
        now = self._timer()
        refused: set[str] = set()
        taken: list[CreateJob] = []
        with self._lock:
            claims = self._groups.setdefault((ns, group), {})
            for create in decision.creates:
                held = claims.get(create.node)
                if held is not None and held.uid != uid and now - held.since < self.ttl:
                    refused.add(create.node)
                    continue
                if held is not None:
                    self._jobs.pop((held.uid, held.job), None)
                claims[create.node] = _Claim(uid, name, key, create.name, now)
                self._jobs[(uid, create.name)] = (ns, group, create.node)
                taken.append(create)
        # Only now the cache: a peer's claim released before ours was taken had its Job shown there.
        busy = self._peers_running(ns, group, key) & {c.node for c in taken}
        if busy:
            self.release((uid, c.name) for c in taken if c.node in busy)
            refused |= busy
        if not refused:
            return decision
        return dataclasses.replace(decision, creates=[c for c in decision.creates if c.node not in refused])

    def settle(self, uid: str, creates: Iterable[CreateJob], created: Iterable[CreateJob]) -> None:
        """After the creates: the claims of those not created end (failed, or not attempted)."""
        done = {c.name for c in created}
        gone = self.release((uid, c.name) for c in creates if c.name not in done)
        for key in gone:
            ns = key.rpartition("/")[0]
            group = self.order_index.group(key)
            for peer in self.order_index.members(ns, group) if group else ():
                if peer != key:
                    self._wake(peer)

    def _peers_running(self, ns: str, group: str, key: str) -> set[str]:
        nodes: set[str] = set()
        for peer in self.order_index.members(ns, group):
            other = self.daemonjobs.store.get(peer) if peer != key else None
            if other is not None:
                nodes.update(
                    n
                    for j in self.jobs.store.by_index(RUNNING_INDEX, owner_id(ns, other["metadata"].get("uid") or ""))
                    if (n := job_node(j))
                )
        return nodes

    # -- the router: a Job shows in the cache ------------------------------------------------------
    def observed(self, uid: str, job: str) -> None:
        self.release([(uid, job)])

    def release(self, jobs: Iterable[tuple[str, str]]) -> set[str]:
        """End the claims of these (holder uid, Job name); the holders' keys of those that ended."""
        ended: set[str] = set()
        with self._lock:
            for uid, job in jobs:
                place = self._jobs.pop((uid, job), None)
                if place is None:
                    continue
                ns, group, node = place
                claims = self._groups.get((ns, group))
                claim = claims.get(node) if claims is not None else None
                if claims is not None and claim is not None and claim.uid == uid and claim.job == job:
                    del claims[node]
                    ended.add(claim.key)
                    if not claims:
                        del self._groups[(ns, group)]
        return ended

    def forget(self, uid: str) -> None:
        """A DaemonJob deleted or re-created: its claims end."""
        with self._lock:
            mine = [k for k in self._jobs if k[0] == uid]
        self.release(mine)

    # -- a peer's OrderReader ----------------------------------------------------------------------
    def held(self, ns: str, group: str, uid: str) -> dict[str, str]:
        """Node -> the name of the other member that holds a live claim there."""
        cutoff = self._timer() - self.ttl
        with self._lock:
            claims = self._groups.get((ns, group))
            if not claims:
                return {}
            return {node: c.name for node, c in claims.items() if c.uid != uid and c.since > cutoff}
