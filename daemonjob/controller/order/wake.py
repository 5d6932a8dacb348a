"""The order's wake policy: which DaemonJobs an event wakes because of spec.after and
exclusion groups (controller/order/index.py keeps who is ordered with whom).

A member's Job that stops running frees its node for the next in line of its group; a Job
that succeeds lets the DaemonJobs that come after its owner start there; a status write wakes
only those that read what it changed; a node event holds back, for a short while, the
DaemonJobs the order keeps off that node. Nothing here decides: it only enqueues.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any

from daemonjob.controller.order.index import OrderIndex, done_view, waits_for_turns
from daemonjob.controller.runtime.informers import RUNNING_INDEX, running_index
from daemonjob.controller.runtime.keptplans import TURN, KeptPlans
from daemonjob.domain.decision.decide import Decision
from daemonjob.domain.jobs.contract import job_node
from daemonjob.domain.jobs.owners import owner_id
from daemonjob.domain.jobs.turnverdict import turn_succeeded
from daemonjob.domain.order.rules import order_key
from daemonjob.domain.spec.eligibility import Eligibility
from daemonjob.machinery.cache.informer import SharedInformer
from daemonjob.machinery.queue.workqueue import RateLimitingQueue

__all__ = ["OrderWakes"]

Obj = Mapping[str, Any]


class OrderWakes:
    """Wakes the DaemonJobs ordered with the one an event concerns, and no others."""

    def __init__(
        self,
        daemonjobs: SharedInformer,
        jobs: SharedInformer,
        order_index: OrderIndex,
        plans: KeptPlans,
        queue: RateLimitingQueue,
        delay: Callable[[str], float],
    ) -> None:
        """`delay`: how long a DaemonJob woken by a Job or status event waits (the router's Job event delay)."""
        self.daemonjobs, self.jobs = daemonjobs, jobs
        self.order_index = order_index
        self.plans = plans
        self.queue = queue
        self._delay = delay
        self._lock = threading.Lock()
        self._turns: dict[str, frozenset[str]] = {}  # by key of a group member: the nodes its last pass left waiting

    def forget(self, key: str) -> None:
        with self._lock:
            self._turns.pop(key, None)

    def job_changed(self, key: str, old: Obj, new: Obj | None) -> None:
        """A member's Job that stops running frees its node for the rest of its group; a Job
        that succeeds lets the DaemonJobs that come after its owner start there."""
        stopped = bool(running_index(old)) and (new is None or not running_index(new))
        succeeded = new is not None and turn_succeeded(new) and not turn_succeeded(old)
        node = job_node(new if new is not None else old)
        nodes = [node] if node else []
        if stopped:
            self._wake_next_in_line(key, nodes)
        if succeeded:
            self._wake_concerned(self._done_readers(key), nodes)

    def status_changed(self, key: str, old: Obj, new: Obj) -> None:
        """A write of `key`'s status wakes the DaemonJobs that read what it changed, and only
        then: those that come after it when the revision or run its done nodes count in
        changed, the rest of its group when whether it waits for its turns changed (it became
        Stalled, say). Most status writes change neither and wake nobody."""
        wake: set[str] = set()
        if done_view(old) != done_view(new):
            wake.update(self._done_readers(key))
        spec = self.order_index.spec_of(new)  # one generation: the spec of both
        if waits_for_turns(old, spec) != waits_for_turns(new, spec):
            wake.update(self.order_index.peers(key))
        wake.discard(key)
        for other in wake:
            self.queue.add_after(other, self._delay(other))

    def done_changed(self, key: str) -> None:
        """Where `key` succeeded was read anew (its recorded results): wake who reads it."""
        for other in self._done_readers(key) - {key}:
            self.queue.add_after(other, self._delay(other))

    def _done_readers(self, key: str) -> set[str]:
        """Who reads where `key` succeeded: the DaemonJobs that come after it, and the rest of the
        group of each of them (an older member goes first only where its dependencies are done)."""
        readers = set(self.order_index.dependents(key))
        for dependent in list(readers):
            readers.update(self.order_index.peers(dependent))
        return readers

    def pass_done(self, key: str, decision: Decision) -> None:
        """A pass over `key` reported: a group member's turns taken."""
        if decision.reading is not None and self.order_index.group(key):
            plan = decision.reading.plan
            self.turns_taken(key, len(plan.replacing) + len(plan.starting))

    def turns_taken(self, key: str, turns: int) -> None:
        """After a pass: `turns`, how many nodes its plan leaves waiting. A group member whose
        turns went down wakes the members of its group concerned with a node it no longer waits
        for and does not run a Job on (it needs it no more): a younger member that yielded such
        a node to it may take it now (no Job event says so). A node it started is busy: the
        end of that Job wakes them."""
        dj = self.daemonjobs.store.get(key)
        uid = (dj["metadata"].get("uid") or "") if dj is not None else ""
        nodes = frozenset(self.plans.turn_nodes(uid)) if turns else frozenset()
        with self._lock:
            before = self._turns.get(key)
            self._turns[key] = nodes
        if before is None or turns >= len(before):
            return
        gone = before - nodes
        gone -= {job_node(j) for j in self.jobs.store.by_index(RUNNING_INDEX, owner_id(key.partition("/")[0], uid))}
        if gone:
            self._wake_next_in_line(key, gone)

    def _wake_next_in_line(self, key: str, nodes: Collection[str]) -> None:
        """`nodes` freed in `key`'s group: wake, oldest first, the other members a node concerns,
        up to the first that goes first there (a turn there, waiting for its turns and for no
        dependency there). The younger ones yield the node to it, and the end of its Job there
        wakes the next in line; their pass now would only say so again."""
        line = sorted(
            (order_key(dj), peer, dj)
            for peer in self.order_index.peers(key)
            if (dj := self.daemonjobs.store.get(peer)) is not None
        )
        wake: set[str] = set()
        for node in nodes:
            for _, peer, dj in line:
                how = self.plans.concern(dj["metadata"].get("uid") or "", node)
                if not how:
                    continue
                wake.add(peer)
                if (
                    how == TURN
                    and waits_for_turns(dj, self.order_index.spec_of(dj))
                    and not self._after_pending(peer, dj, node)
                ):
                    break
        for peer in wake:
            self.queue.add_after(peer, self._delay(peer))

    def _wake_concerned(self, keys: Iterable[str], nodes: Collection[str]) -> None:
        """Wake those of `keys` that `nodes` concern (KeptPlans.concerned): a node's change
        wakes the DaemonJobs waiting there, not every DaemonJob of the order."""
        for key in keys:
            dj = self.daemonjobs.store.get(key)
            uid = (dj["metadata"].get("uid") or "") if dj is not None else ""
            if dj is None or any(self.plans.concerned(uid, node) for node in nodes):
                self.queue.add_after(key, self._delay(key))

    def daemonjob_changed(self, key: str, *versions: Obj) -> None:
        """A DaemonJob appeared, changed its spec or revision, or went: the rest of its group
        (their turns may come now) and the DaemonJobs that name it in spec.after."""
        ns, _, _ = key.rpartition("/")
        wake = self._done_readers(key)
        for dj in versions:
            group = self.order_index.spec_of(dj, keep=False).exclusion_group  # old versions are not kept
            if group:
                wake.update(self.order_index.members(ns, group))
        wake.discard(key)
        for other in wake:
            self.queue.add(other)

    def holds(self, key: str, node: Obj, eligibility: Mapping[str, Eligibility]) -> bool:
        """Whether the order holds `key` back on `node` for now, as the caches show it: a
        DaemonJob it comes after has not succeeded there, or an older member of its group that
        waits for its turns (and is not held there itself) goes first there."""
        dj = self.daemonjobs.store.get(key)
        if dj is None or not self.order_index.ordered(key):
            return False
        name = node["metadata"]["name"]
        if self._after_pending(key, dj, name):
            return True
        mine = order_key(dj)
        for peer in self.order_index.peers(key):
            other, elig = self.daemonjobs.store.get(peer), eligibility.get(peer)
            if (
                other is not None
                and elig is not None
                and order_key(other) < mine
                and waits_for_turns(other, self.order_index.spec_of(other))
                and elig.eligible(node)
                and not self._after_pending(peer, other, name)
            ):
                return True
        return False

    def _after_pending(self, key: str, dj: Obj, node: str) -> bool:
        """A DaemonJob `dj` comes after has no succeeded Job on `node` of its current revision and run."""
        ns = key.rpartition("/")[0]
        for name in self.order_index.spec_of(dj).after:
            dep = self.daemonjobs.store.get(f"{ns}/{name}")
            if dep is None:
                return False  # Stalled: its status says so at once
            revision, run = done_view(dep)
            if not self.order_index.succeeded.has(dep, revision, run, node):
                return True
        return False
