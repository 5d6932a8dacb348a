"""The order across DaemonJobs as the caches show it: who shares an exclusion group, who comes
after whom, and the `OrderInput` of one DaemonJob's decision (domain/order.py).

`OrderIndex` keeps DaemonJobs by (namespace, exclusionGroup) and by (namespace, a name they
come after), updated by the DaemonJob events, so an event wakes only the DaemonJobs it
concerns: a member's Job that stops running wakes the rest of its group, a Job that succeeds
wakes the DaemonJobs that come after its owner. Nothing scans every DaemonJob per event.

`OrderReader.read` costs what the group and the dependencies hold: the other members' Jobs
that may still run (the Jobs cache's RUNNING_INDEX, a few per member) and their creates the
cache does not show yet (claims.py), the nodes where older members wait for their turn
(their kept plans' turns), and where each dependency succeeded (succeeded.py, kept from the
Job events for the DaemonJobs named in spec.after: a set, not a look at each of its Jobs).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from daemonjob.controller.informers import OWNER_INDEX, RUNNING_INDEX
from daemonjob.controller.keptplans import KeptPlans
from daemonjob.controller.succeeded import SucceededNodes
from daemonjob.domain.gates import gate_in_force
from daemonjob.domain.jobs import job_node
from daemonjob.domain.order import GATE_AFTER, GATE_EXCLUSION, OrderInput, order_key
from daemonjob.machinery.informer import SharedInformer

if TYPE_CHECKING:
    from daemonjob.controller.claims import NodeClaims

__all__ = ["OrderIndex", "OrderReader", "group_of", "after_of", "done_view", "waits_for_turns"]

Obj = Mapping[str, Any]


def _spec(dj: Obj) -> Mapping[str, Any]:
    spec = dj.get("spec")
    return spec if isinstance(spec, Mapping) else {}


def group_of(dj: Obj) -> str | None:
    group = _spec(dj).get("exclusionGroup")
    return group if isinstance(group, str) and group else None


def after_of(dj: Obj) -> tuple[str, ...]:
    after = _spec(dj).get("after")
    if not isinstance(after, (list, tuple)):
        return ()
    return tuple(dict.fromkeys(a for a in after if isinstance(a, str) and a))


def done_view(dj: Obj) -> tuple[Any, Any]:
    """What the DaemonJobs that come after `dj` read of its status: which revision and run of
    its Jobs count as done (`OrderReader._done`)."""
    status = dj.get("status") or {}
    return status.get("currentRevision"), status.get("currentRun")


def _ns_name(key: str) -> tuple[str, str]:
    ns, _, name = key.rpartition("/")
    return ns, name


class OrderIndex:
    """DaemonJob keys by (namespace, group) and by (namespace, name they come after)."""

    def __init__(self, jobs: SharedInformer | None = None) -> None:
        """`jobs`: the Jobs cache, from which where a DaemonJob named in spec.after succeeded is
        built the first time it is read (without it, as if it had no Jobs)."""
        self._lock = threading.Lock()
        self._jobs = jobs
        # what spec.after reads, kept from the Job events (the router's) for the DaemonJobs named there
        self.succeeded = SucceededNodes(self._owned, self.named)
        self._groups: dict[tuple[str, str], set[str]] = {}
        self._dependents: dict[tuple[str, str], set[str]] = {}
        self._of: dict[str, tuple[str | None, tuple[str, ...]]] = {}  # key -> (group, after)

    def set(self, key: str, dj: Obj | None) -> None:
        """`dj` now (None: deleted)."""
        ns, _ = _ns_name(key)
        now = (group_of(dj), after_of(dj)) if dj is not None else (None, ())
        with self._lock:
            old = self._of.pop(key, (None, ()))
            if old == now and dj is not None:
                self._of[key] = now
                return
            _discard(self._groups, (ns, old[0]) if old[0] else None, key)
            for dep in old[1]:
                _discard(self._dependents, (ns, dep), key)
            if dj is not None:
                self._of[key] = now
                if now[0]:
                    self._groups.setdefault((ns, now[0]), set()).add(key)
                for dep in now[1]:
                    self._dependents.setdefault((ns, dep), set()).add(key)
            unnamed = [dep for dep in old[1] if (ns, dep) not in self._dependents]
        for dep in unnamed:  # named by no DaemonJob any more: where it succeeded is not kept
            self.succeeded.drop(ns, dep)

    def ordered(self, key: str) -> bool:
        """Whether `key` is in an exclusion group or comes after another DaemonJob."""
        with self._lock:
            group, after = self._of.get(key, (None, ()))
        return bool(group or after)

    def group(self, key: str) -> str | None:
        with self._lock:
            return self._of.get(key, (None, ()))[0]

    def members(self, namespace: str, group: str) -> list[str]:
        with self._lock:
            return sorted(self._groups.get((namespace, group), ()))

    def peers(self, key: str) -> list[str]:
        """The other members of `key`'s group."""
        ns, _ = _ns_name(key)
        group = self.group(key)
        return [k for k in self.members(ns, group) if k != key] if group else []

    def dependents(self, key: str) -> list[str]:
        """The DaemonJobs that name `key` in spec.after."""
        ns, name = _ns_name(key)
        with self._lock:
            return sorted(self._dependents.get((ns, name), ()))

    def named(self, namespace: str, name: str) -> bool:
        """Whether some DaemonJob names `namespace/name` in spec.after."""
        with self._lock:
            return (namespace, name) in self._dependents

    def _owned(self, uid: str) -> list[Obj]:
        return self._jobs.store.by_index(OWNER_INDEX, uid) if self._jobs is not None else []


def _discard(index: dict[tuple[str, str], set[str]], at: tuple[str, str] | None, key: str) -> None:
    if at is None:
        return
    keys = index.get(at)
    if keys is not None:
        keys.discard(key)
        if not keys:
            del index[at]


class OrderReader:
    """Reads one DaemonJob's `OrderInput` from the caches (the observe step's part for the order)."""

    def __init__(
        self,
        daemonjobs: SharedInformer,
        jobs: SharedInformer,
        plans: KeptPlans,
        index: OrderIndex,
        claims: NodeClaims | None = None,
    ) -> None:
        self.daemonjobs, self.jobs, self.plans, self.index = daemonjobs, jobs, plans, index
        self.claims = claims

    def read(self, key: str, dj: Obj) -> OrderInput:
        group, after = group_of(dj), after_of(dj)
        if not group and not after:
            return OrderInput()
        ns, name = _ns_name(key)
        done_cache: dict[str, frozenset[str] | None] = {}
        missing = [d for d in after if self._done(ns, d, done_cache) is None]
        done = {d: nodes for d in after if (nodes := self._done(ns, d, done_cache)) is not None}
        busy: dict[str, str] = {}
        ahead: dict[str, str] = {}
        if group:
            mine = order_key(dj)
            if self.claims is not None:  # the other members' creates not in the cache yet
                busy.update(self.claims.held(ns, group, dj["metadata"].get("uid") or ""))
            for peer in self.index.peers(key):
                other = self.daemonjobs.store.get(peer)
                if other is None:
                    continue
                peer_name = other["metadata"]["name"]
                uid = other["metadata"].get("uid") or ""
                for job in self.jobs.store.by_index(RUNNING_INDEX, uid):
                    node = job_node(job)
                    if node:
                        busy.setdefault(node, peer_name)
                if order_key(other) < mine and waits_for_turns(other):
                    ahead_nodes = self.plans.turn_nodes(uid)
                    for dep in after_of(other):  # it waits for its own dependencies there, not for us
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
            out = self.index.succeeded.nodes(dep, revision, run)
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
                stack.extend((d, [*path, d]) for d in after_of(other))
        return []


def waits_for_turns(dj: Obj) -> bool:
    """What the younger members of its exclusion group read of it. An older member counts as
    waiting for its turns unless it cannot start any now: suspended, Stalled or Failed, or held
    by a rollout gate (its written status says which); the order's own gates do not count (its
    turns where its dependencies have not succeeded are left out)."""
    if _spec(dj).get("suspend") is True:
        return False
    status = dj.get("status") or {}
    for cond in status.get("conditions") or ():
        if isinstance(cond, Mapping) and cond.get("type") in ("Stalled", "Failed") and cond.get("status") == "True":
            return False
    gate = gate_in_force(status)
    return gate is None or gate[0] in (GATE_EXCLUSION, GATE_AFTER)
