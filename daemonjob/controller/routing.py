"""Event routing: what an informer event means for which DaemonJob. Handlers only note and enqueue.

A DaemonJob event enqueues it (not a status write of its own, unless it records a new
revision, which lets that revision's first Jobs start); a status write also wakes the
DaemonJobs ordered after it or beside it when it changed what they read of it (order.py).
A Job event records what it shows of the controller's own writes (expectations), marks the
Job's node for its owner's kept plan and enqueues the owner after a short delay, so a burst
of Job events costs one pass.
A node event marks the node for every kept plan and enqueues only the DaemonJobs whose
answer for that node changed, or that have Jobs there.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any

from daemonjob import defaults
from daemonjob.controller.claims import NodeClaims
from daemonjob.controller.configmaps import ConfigMapTracker
from daemonjob.controller.expectations import Expectations, NameHolds
from daemonjob.controller.informers import NODE_INDEX, RUNNING_INDEX, Informers, orphan_index, running_index
from daemonjob.controller.keptplans import TURN, KeptPlans
from daemonjob.controller.metrics import Metrics
from daemonjob.controller.order import OrderIndex, after_of, done_view, group_of, waits_for_turns
from daemonjob.domain.eligibility import Eligibility, InvalidSpec, compile_eligibility
from daemonjob.domain.jobs import ACTIVE, SUCCEEDED, daemonjob_ref, job_node, job_state, owner_uid
from daemonjob.domain.noderecord import record_of
from daemonjob.domain.order import order_key
from daemonjob.machinery.frozen import thaw
from daemonjob.machinery.informer import Handlers, Tombstone, deleted_object
from daemonjob.machinery.memo import MEMO_CAPACITY, ObjectMemo
from daemonjob.machinery.store import meta_namespace_key
from daemonjob.machinery.workqueue import RateLimitingQueue

__all__ = ["Router", "job_event_delay", "owner_key"]

Obj = Mapping[str, Any]


def job_event_delay(decide_seconds: float) -> float:
    """Seconds to wait after a Job event before reconciling its DaemonJob."""
    scaled = defaults.JOB_EVENT_COST_FACTOR * decide_seconds
    return min(defaults.JOB_EVENT_DELAY_MAX, max(defaults.JOB_EVENT_DELAY, scaled))


def owner_key(job: Obj) -> str | None:
    """namespace/name of the DaemonJob controlling this Job, if any."""
    ref = daemonjob_ref(job)
    return None if ref is None else f"{job['metadata'].get('namespace', '')}/{ref.get('name')}"


def _revision_of(dj: Obj) -> tuple[Any, Any]:
    """What the status records of the revision: once a new one is recorded, its Jobs may start."""
    status = dj.get("status") or {}
    return status.get("currentRevision"), status.get("templateHash")


class Router:
    def __init__(
        self,
        informers: Informers,
        queue: RateLimitingQueue,
        *,
        expectations: Expectations,
        name_holds: NameHolds,
        plans: KeptPlans,
        metrics: Metrics,
        configmaps: ConfigMapTracker | None,
        memo: ObjectMemo,
        forget_uid: Callable[[str], None],
        order: OrderIndex | None = None,
        claims: NodeClaims | None = None,
    ) -> None:
        self.daemonjobs, self.jobs, self.nodes = informers.daemonjobs, informers.jobs, informers.nodes
        self.queue = queue
        self.expectations = expectations
        self.name_holds = name_holds
        self.plans = plans
        self.metrics = metrics
        self.configmaps = configmaps
        self.forget_uid = forget_uid
        self.order = order if order is not None else OrderIndex(informers.jobs)
        self.claims = claims
        self.memo = memo  # sized here to the node rule sets in use: one memo entry each per node
        self._eligibility: dict[str, tuple[str, Eligibility | None]] = {}
        self._lock = threading.Lock()
        self._decide_seconds: dict[str, float] = {}  # by key, of its last decision
        self._turns: dict[str, frozenset[str]] = {}  # by key of a group member: the nodes its last pass left waiting

    def register(self) -> None:
        self.daemonjobs.add_handlers(Handlers(self.dj_added, self.dj_updated, self.dj_deleted))
        self.jobs.add_handlers(Handlers(self.job_added, self.job_updated, self.job_deleted))
        self.nodes.add_handlers(Handlers(self.node_added, self.node_updated, self.node_deleted))

    # -- node rules, compiled once per DaemonJob generation --------------------------------
    def eligibility_for(self, key: str, dj: Obj) -> Eligibility | None:
        version = f"{dj['metadata'].get('generation', '')}/{dj['metadata'].get('uid', '')}"
        with self._lock:
            cached = self._eligibility.get(key)
            if cached is not None and cached[0] == version:
                return cached[1]
        try:
            elig: Eligibility | None = compile_eligibility(thaw(dj))  # the compiler reads plain lists
        except InvalidSpec:
            elig = None  # decide() reports it as Stalled
        with self._lock:
            self._eligibility[key] = (version, elig)
            self._size_memo()
        return elig

    def _size_memo(self) -> None:
        """Room for every rule set in use, the Job views and slack; called under the lock."""
        rule_sets = {e.rules for _, e in self._eligibility.values() if e is not None and e.rules is not None}
        self.memo.capacity = max(MEMO_CAPACITY, 2 * len(rule_sets) + 8)

    def _dj_items(self) -> list[tuple[str, Eligibility | None]]:
        with self._lock:
            return [(k, v[1]) for k, v in self._eligibility.items()]

    def decided(self, key: str, seconds: float) -> None:
        """How long the last decision for `key` took (CPU): Job events wait in proportion."""
        self._decide_seconds[key] = seconds

    def decide_seconds(self, key: str) -> float:
        return self._decide_seconds.get(key, 0.0)

    # -- DaemonJobs --------------------------------------------------------------------------
    def dj_added(self, dj: Obj) -> None:
        key = meta_namespace_key(dj)
        self.eligibility_for(key, dj)
        self.order.set(key, dj)
        self.queue.add(key)
        self._wake_order(key, dj)

    def dj_updated(self, old: Obj, new: Obj) -> None:
        om, nm = old["metadata"], new["metadata"]
        if om.get("uid") != nm.get("uid"):
            self.forget_uid(om.get("uid") or "")  # deleted and re-created: nothing carries over
        elif (
            om.get("generation") == nm.get("generation")
            and om.get("labels") == nm.get("labels")
            and om.get("annotations") == nm.get("annotations")
            and om.get("deletionTimestamp") == nm.get("deletionTimestamp")
            and _revision_of(old) == _revision_of(new)
        ):
            self._order_status_changed(meta_namespace_key(new), old, new)
            return  # a status write that records no new revision: nothing to decide for it
        key = meta_namespace_key(new)
        self.eligibility_for(key, new)
        self.order.set(key, new)
        self.queue.add(key)
        if om.get("generation") != nm.get("generation") or _revision_of(old) != _revision_of(new):
            self._wake_order(key, old, new)  # its turns or its current revision may have changed
        else:
            self._order_status_changed(key, old, new)

    def dj_deleted(self, obj: Obj | Tombstone) -> None:
        dj = deleted_object(obj)
        key = meta_namespace_key(dj)
        with self._lock:
            self._eligibility.pop(key, None)
            self._size_memo()
        self.forget_uid(dj["metadata"].get("uid") or "")
        self._wake_order(key, dj)
        self.order.set(key, None)
        with self._lock:
            self._turns.pop(key, None)
        self._decide_seconds.pop(key, None)
        if self.configmaps is not None:
            self.configmaps.forget(key)
        self.metrics.forget(
            dj["metadata"].get("namespace", ""), dj["metadata"]["name"], dj["metadata"].get("uid") or ""
        )
        self.queue.add(key)

    # -- Jobs ----------------------------------------------------------------------------------
    def job_added(self, job: Obj) -> None:
        self.order.succeeded.job_changed(None, job)
        key = owner_key(job)
        if key is None:
            self._maybe_orphan(job)
            return
        uid = owner_uid(job)
        self.expectations.creation_observed(uid, job["metadata"]["name"])
        if self.claims is not None:
            self.claims.observed(uid, job["metadata"]["name"])  # the cache shows it: the claim's work is done
        if job["metadata"].get("deletionTimestamp"):
            self.expectations.deletion_observed(uid, job["metadata"]["name"])
        self.plans.job_changed(job)
        self.queue.add_after(key, self._job_event_delay(key))

    def job_updated(self, old: Obj, new: Obj) -> None:
        self.plans.job_changed(old, new)
        self.order.succeeded.job_changed(old, new)
        key = owner_key(new)
        if key is None:
            self._maybe_orphan(new)
            return
        if old["metadata"].get("uid") != new["metadata"].get("uid"):
            # Deleted and re-created under the same name, seen as one change (a relist): both
            # the delete and the create were observed.
            self.expectations.deletion_observed(owner_uid(old), old["metadata"]["name"])
            self.expectations.creation_observed(owner_uid(new), new["metadata"]["name"])
            if self.claims is not None:
                self.claims.observed(owner_uid(new), new["metadata"]["name"])
        if new["metadata"].get("deletionTimestamp"):
            self.expectations.deletion_observed(owner_uid(new), new["metadata"]["name"])
        if (
            old.get("status") != new.get("status")
            or owner_key(old) != key
            or old["metadata"].get("deletionTimestamp") != new["metadata"].get("deletionTimestamp")
            or old["metadata"].get("labels") != new["metadata"].get("labels")
        ):
            self.queue.add_after(key, self._job_event_delay(key))
            self._job_order_changed(key, old, new)

    def job_deleted(self, obj: Obj | Tombstone) -> None:
        job = deleted_object(obj)
        self.plans.job_changed(job)
        self.order.succeeded.job_changed(job, None)
        key = owner_key(job)
        if key is None:
            return
        uid, name = owner_uid(job), job["metadata"]["name"]
        self.expectations.deletion_observed(uid, name)
        if job_state(job) == ACTIVE:  # deleted while its pod may still be on its way: see NameHolds
            self.name_holds.hold(uid, name)
            self.metrics.name_holds.inc()
        self.queue.add_after(key, self._job_event_delay(key))
        self._job_order_changed(key, job, None)

    # -- order across DaemonJobs ---------------------------------------------------------------
    def _job_order_changed(self, key: str, old: Obj, new: Obj | None) -> None:
        """A member's Job that stops running frees its node for the rest of its group; a Job
        that succeeds lets the DaemonJobs that come after its owner start there."""
        stopped = bool(running_index(old)) and (new is None or not running_index(new))
        succeeded = new is not None and job_state(new) == SUCCEEDED and job_state(old) != SUCCEEDED
        node = job_node(new if new is not None else old)
        nodes = [node] if node else []
        if stopped:
            self._wake_next_in_line(key, nodes)
        if succeeded:
            self._wake_concerned(self._done_readers(key), nodes)

    def _order_status_changed(self, key: str, old: Obj, new: Obj) -> None:
        """A write of `key`'s status wakes the DaemonJobs that read what it changed, and only
        then: those that come after it when the revision or run its done nodes count in
        changed, the rest of its group when whether it waits for its turns changed (it became
        Stalled, say). Most status writes change neither and wake nobody."""
        wake: set[str] = set()
        if done_view(old) != done_view(new):
            wake.update(self._done_readers(key))
        if waits_for_turns(old) != waits_for_turns(new):
            wake.update(self.order.peers(key))
        wake.discard(key)
        for other in wake:
            self.queue.add_after(other, self._job_event_delay(other))

    def _done_readers(self, key: str) -> set[str]:
        """Who reads where `key` succeeded: the DaemonJobs that come after it, and the rest of the
        group of each of them (an older member goes first only where its dependencies are done)."""
        readers = set(self.order.dependents(key))
        for dependent in list(readers):
            readers.update(self.order.peers(dependent))
        return readers

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
        gone -= {job_node(j) for j in self.jobs.store.by_index(RUNNING_INDEX, uid)}
        if gone:
            self._wake_next_in_line(key, gone)

    def _wake_next_in_line(self, key: str, nodes: Collection[str]) -> None:
        """`nodes` freed in `key`'s group: wake, oldest first, the other members a node concerns,
        up to the first that goes first there (a turn there, waiting for its turns and for no
        dependency there). The younger ones yield the node to it, and the end of its Job there
        wakes the next in line; their pass now would only say so again."""
        line = sorted(
            (order_key(dj), peer, dj)
            for peer in self.order.peers(key)
            if (dj := self.daemonjobs.store.get(peer)) is not None
        )
        wake: set[str] = set()
        for node in nodes:
            for _, peer, dj in line:
                how = self.plans.concern(dj["metadata"].get("uid") or "", node)
                if not how:
                    continue
                wake.add(peer)
                if how == TURN and waits_for_turns(dj) and not self._after_pending(peer, dj, node):
                    break
        for peer in wake:
            self.queue.add_after(peer, self._job_event_delay(peer))

    def _wake_concerned(self, keys: Iterable[str], nodes: Collection[str]) -> None:
        """Wake those of `keys` that `nodes` concern (KeptPlans.concerned): a node's change
        wakes the DaemonJobs waiting there, not every DaemonJob of the order."""
        for key in keys:
            dj = self.daemonjobs.store.get(key)
            uid = (dj["metadata"].get("uid") or "") if dj is not None else ""
            if dj is None or any(self.plans.concerned(uid, node) for node in nodes):
                self.queue.add_after(key, self._job_event_delay(key))

    def _wake_order(self, key: str, *versions: Obj) -> None:
        """A DaemonJob appeared, changed its spec or revision, or went: the rest of its group
        (their turns may come now) and the DaemonJobs that name it in spec.after."""
        ns, _, _ = key.rpartition("/")
        wake = self._done_readers(key)
        for dj in versions:
            group = group_of(dj)
            if group:
                wake.update(self.order.members(ns, group))
        wake.discard(key)
        for other in wake:
            self.queue.add(other)

    def _maybe_orphan(self, job: Obj) -> None:
        """A Job with no controller that names a DaemonJob: that DaemonJob may adopt it."""
        for key in orphan_index(job):
            if self.daemonjobs.store.get(key) is not None:
                self.queue.add(key)

    def _job_event_delay(self, key: str) -> float:
        return job_event_delay(self._decide_seconds.get(key, 0.0))

    # -- nodes -----------------------------------------------------------------------------------
    def node_added(self, node: Obj) -> None:
        self._node_changed(node)

    def node_updated(self, old: Obj, new: Obj) -> None:
        om, nm = old["metadata"], new["metadata"]
        if (
            old.get("spec") == new.get("spec")
            and om.get("labels") == nm.get("labels")
            and om.get("annotations") == nm.get("annotations")
        ):
            return  # heartbeats and status changes do not change any answer
        self._node_changed(new, old)

    def node_deleted(self, obj: Obj | Tombstone) -> None:
        node = deleted_object(obj)
        self._node_changed(node, node, deleted=True)

    def _node_changed(self, node: Obj, old: Obj | None = None, deleted: bool = False) -> None:
        """Mark the node for every kept plan; enqueue the DaemonJobs for which it became or
        stopped being eligible (`old`: the node before, None when it joined), those with Jobs
        on it (why a node holding a Job is not eligible may have changed), and the one whose
        maintenance record it carries or carried (its cordon, its release, seen). Those the
        order holds back there come a little later (`_order_holds`): what they have to do is
        count the node, and a few node events then cost one pass, while the DaemonJobs that may
        start there go first, ahead of the queued work (urgent) when it just became eligible for
        them, since a node waiting for its Jobs is the wait operators feel, and a node event
        adds each DaemonJob at most once."""
        name = node["metadata"]["name"]
        self.plans.node_changed(name)
        owners = {k for k in (owner_key(j) for j in self.jobs.store.by_index(NODE_INDEX, name)) if k is not None}
        owners.update(r.daemon_job for r in (record_of(node), record_of(old)) if r is not None)
        for key in owners:
            self.queue.add(key)
        eligibility = {key: elig for key, elig in self._dj_items() if elig is not None}
        for key, elig in eligibility.items():
            if key in owners:
                continue
            now = not deleted and elig.eligible(node)
            if now == (old is not None and elig.eligible(old)):
                continue  # no change for this DaemonJob
            if self._order_holds(key, node, eligibility):
                self.queue.add_after(key, defaults.JOB_EVENT_DELAY_MAX)
            else:
                self.queue.add(key, urgent=now)

    def _order_holds(self, key: str, node: Obj, eligibility: Mapping[str, Eligibility]) -> bool:
        """Whether the order holds `key` back on `node` for now, as the caches show it: a
        DaemonJob it comes after has not succeeded there, or an older member of its group that
        waits for its turns (and is not held there itself) goes first there."""
        dj = self.daemonjobs.store.get(key)
        if dj is None or not self.order.ordered(key):
            return False
        name = node["metadata"]["name"]
        if self._after_pending(key, dj, name):
            return True
        mine = order_key(dj)
        for peer in self.order.peers(key):
            other, elig = self.daemonjobs.store.get(peer), eligibility.get(peer)
            if (
                other is not None
                and elig is not None
                and order_key(other) < mine
                and waits_for_turns(other)
                and elig.eligible(node)
                and not self._after_pending(peer, other, name)
            ):
                return True
        return False

    def _after_pending(self, key: str, dj: Obj, node: str) -> bool:
        """A DaemonJob `dj` comes after has no succeeded Job on `node` of its current revision and run."""
        ns = key.rpartition("/")[0]
        for name in after_of(dj):
            dep = self.daemonjobs.store.get(f"{ns}/{name}")
            if dep is None:
                return False  # Stalled: its status says so at once
            revision, run = done_view(dep)
            if not self.order.succeeded.has(dep, revision, run, node):
                return True
        return False
