"""Event routing: what an informer event means for which DaemonJob. Handlers only note and enqueue.

A DaemonJob event enqueues it (not a status write of its own, unless it records a new
revision or a node's new attempt, which lets their Jobs start); a status write also wakes the
DaemonJobs ordered after it or beside it when it changed what they read of it (orderwake.py).
A Job event records what it shows of the controller's own writes (expectations), marks the
Job's node for its owner's kept plan and enqueues the owner after a short delay, so a burst
of Job events costs one pass. A Job carrying the uid of a DaemonJob of another namespace is
ignored (ownership.py): owner references are namespace-local.
A node event marks the node for every kept plan and enqueues only the DaemonJobs whose
answer for that node changed, or that have Jobs there.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any

from daemonjob import defaults
from daemonjob.controller.metrics.metrics import Metrics
from daemonjob.controller.order.claims import NodeClaims
from daemonjob.controller.order.index import OrderIndex
from daemonjob.controller.order.wake import OrderWakes
from daemonjob.controller.passes.deletedjobs import DeletedJobsSeen
from daemonjob.controller.runtime.configmaps import ConfigMapTracker
from daemonjob.controller.runtime.expectations import Expectations
from daemonjob.controller.runtime.informers import NODE_INDEX, Informers, orphan_index
from daemonjob.controller.runtime.keptplans import KeptPlans
from daemonjob.controller.runtime.ownership import ForeignJobs
from daemonjob.controller.runtime.specs import SpecCache
from daemonjob.domain.jobs.attempts import STATUS_FIELD as ATTEMPTS_FIELD
from daemonjob.domain.jobs.owners import daemonjob_ref, owner_uid
from daemonjob.domain.shared.noderecord import record_of
from daemonjob.domain.spec.eligibility import Eligibility
from daemonjob.machinery.cache.informer import Handlers, Tombstone, deleted_object
from daemonjob.machinery.cache.memo import MEMO_CAPACITY, ObjectMemo
from daemonjob.machinery.cache.store import meta_namespace_key
from daemonjob.machinery.queue.workqueue import RateLimitingQueue

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


def _attempts_recorded(old: Obj, new: Obj) -> bool:
    """The status records a node's attempt it did not before: that Job may be created now
    (daemonjob/domain/jobs/attempts.py). An entry dropped once its Job is seen wakes nothing."""
    before, after = ((o.get("status") or {}).get(ATTEMPTS_FIELD) or {} for o in (old, new))
    if not after.get("nodes"):
        return False
    known = (
        {(e.get("node"), e.get("attempt")) for e in before.get("nodes") or ()}
        if before.get("rollout") == after.get("rollout")
        else set()
    )
    return any((e.get("node"), e.get("attempt")) not in known for e in after["nodes"])


class Router:
    def __init__(
        self,
        informers: Informers,
        queue: RateLimitingQueue,
        *,
        expectations: Expectations,
        deleted_jobs: DeletedJobsSeen,
        plans: KeptPlans,
        metrics: Metrics,
        configmaps: ConfigMapTracker | None,
        memo: ObjectMemo,
        forget_uid: Callable[[str], None],
        order_index: OrderIndex | None = None,
        claims: NodeClaims | None = None,
        specs: SpecCache | None = None,
        foreign: ForeignJobs | None = None,
    ) -> None:
        self.daemonjobs, self.jobs, self.nodes = informers.daemonjobs, informers.jobs, informers.nodes
        self.foreign = foreign if foreign is not None else ForeignJobs(self.daemonjobs, metrics.foreign_job_seen)
        self.queue = queue
        self.expectations = expectations
        self.deleted_jobs = deleted_jobs
        self.plans = plans
        self.metrics = metrics
        self.configmaps = configmaps
        self.forget_uid = forget_uid
        # whether a deleted Job's recorded success stands for it (results/status.py wires it)
        self.recorded_success: Callable[[Obj], bool] = lambda job: False
        self.order_index = order_index if order_index is not None else OrderIndex(informers.jobs)
        self.claims = claims
        self.memo = memo  # sized here to the node rule sets in use: one memo entry each per node
        self.specs = specs if specs is not None else self.order_index.specs
        self.specs.on_change = self._size_memo
        self._lock = threading.Lock()
        self._decide_seconds: dict[str, float] = {}  # by key, of its last decision
        self.order_wakes = OrderWakes(self.daemonjobs, self.jobs, self.order_index, plans, queue, self._job_event_delay)

    def register(self) -> None:
        self.daemonjobs.add_handlers(Handlers(self.dj_added, self.dj_updated, self.dj_deleted))
        self.jobs.add_handlers(Handlers(self.job_added, self.job_updated, self.job_deleted))
        self.nodes.add_handlers(Handlers(self.node_added, self.node_updated, self.node_deleted))

    # -- node rules, read with the spec once per DaemonJob generation (specs.py) ------------------
    def eligibility_for(self, key: str, dj: Obj) -> Eligibility | None:
        """None: the node rules do not compile (decide() reports it as Stalled)."""
        return self.specs.get(key, dj).eligibility

    def _size_memo(self) -> None:
        """Room for every rule set in use, the Job views and slack."""
        rule_sets = {e.rules for _, e in self._dj_items() if e is not None and e.rules is not None}
        self.memo.capacity = max(MEMO_CAPACITY, 2 * len(rule_sets) + 8)

    def _dj_items(self) -> list[tuple[str, Eligibility | None]]:
        return [(k, checked.eligibility) for k, checked in self.specs.items()]

    def decided(self, key: str, seconds: float) -> None:
        """How long the last decision for `key` took (CPU): Job events wait in proportion."""
        self._decide_seconds[key] = seconds

    # -- DaemonJobs --------------------------------------------------------------------------
    def dj_added(self, dj: Obj) -> None:
        key = meta_namespace_key(dj)
        self.eligibility_for(key, dj)
        self.order_index.set(key, dj)
        self.queue.add(key)
        self.order_wakes.daemonjob_changed(key, dj)

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
            and not _attempts_recorded(old, new)
        ):
            self.order_wakes.status_changed(meta_namespace_key(new), old, new)
            return  # a status write that records no new revision: nothing to decide for it
        key = meta_namespace_key(new)
        self.eligibility_for(key, new)
        self.order_index.set(key, new)
        self.queue.add(key)
        if om.get("generation") != nm.get("generation") or _revision_of(old) != _revision_of(new):
            self.order_wakes.daemonjob_changed(key, old, new)  # its turns or its current revision may have changed
        else:
            self.order_wakes.status_changed(key, old, new)

    def dj_deleted(self, obj: Obj | Tombstone) -> None:
        dj = deleted_object(obj)
        key = meta_namespace_key(dj)
        self.specs.forget(key)
        self.forget_uid(dj["metadata"].get("uid") or "")
        self.order_wakes.daemonjob_changed(key, dj)
        self.order_index.set(key, None)
        self.order_wakes.forget(key)
        self._decide_seconds.pop(key, None)
        if self.configmaps is not None:
            self.configmaps.forget(key)
        self.metrics.forget(
            dj["metadata"].get("namespace", ""), dj["metadata"]["name"], dj["metadata"].get("uid") or ""
        )
        self.queue.add(key)

    # -- Jobs ----------------------------------------------------------------------------------
    def job_added(self, job: Obj) -> None:
        key = self.foreign.owner(job)
        if key is None:
            self._maybe_orphan(job)
            return
        self.order_index.succeeded.job_changed(None, job)
        uid = owner_uid(job)
        self.expectations.creation_observed(uid, job["metadata"]["name"])
        if self.claims is not None:
            self.claims.observed(uid, job["metadata"]["name"])  # the cache shows it: the claim's work is done
        if job["metadata"].get("deletionTimestamp"):
            self.expectations.deletion_observed(uid, job["metadata"]["name"])
        self.plans.job_changed(job)
        self.queue.add_after(key, self._job_event_delay(key))

    def job_updated(self, old: Obj, new: Obj) -> None:
        key, before = self.foreign.owner(new), self.foreign.owner(old)
        if before is None or key is None:  # not ours before, or not now (released, or foreign)
            ours = [j for j, k in ((old, before), (new, key)) if k is not None]
            self.plans.job_changed(*ours)
            self.order_index.succeeded.job_changed(old if before else None, new if key else None)
        else:
            self.plans.job_changed(old, new)
            self.order_index.succeeded.job_changed(old, new)
        if key is None:
            self._maybe_orphan(new)
            return
        if old["metadata"].get("uid") != new["metadata"].get("uid"):
            # Deleted and re-created under the same name, seen as one change (a relist): both
            # the delete and the create were observed.
            if before is not None:
                self.expectations.deletion_observed(owner_uid(old), old["metadata"]["name"])
                self._note_deleted(owner_uid(old), old)
            self.expectations.creation_observed(owner_uid(new), new["metadata"]["name"])
            if self.claims is not None:
                self.claims.observed(owner_uid(new), new["metadata"]["name"])
        if new["metadata"].get("deletionTimestamp"):
            self.expectations.deletion_observed(owner_uid(new), new["metadata"]["name"])
        if (
            old.get("status") != new.get("status")
            or before != key
            or old["metadata"].get("deletionTimestamp") != new["metadata"].get("deletionTimestamp")
            or old["metadata"].get("labels") != new["metadata"].get("labels")
            or old["metadata"].get("annotations") != new["metadata"].get("annotations")  # a turn's verdict
        ):
            self.queue.add_after(key, self._job_event_delay(key))
            self.order_wakes.job_changed(key, old, new)

    def job_deleted(self, obj: Obj | Tombstone) -> None:
        job = deleted_object(obj)
        key = self.foreign.owner(job)
        if key is None:
            return
        self.plans.job_changed(job)
        self.order_index.succeeded.job_changed(job, None)
        uid, name = owner_uid(job), job["metadata"]["name"]
        self.expectations.deletion_observed(uid, name)
        self._note_deleted(uid, job)
        self.queue.add_after(key, self._job_event_delay(key))
        self.order_wakes.job_changed(key, job, None)

    def _note_deleted(self, uid: str, job: Obj) -> None:
        """Its node's next Job is the next attempt, under a new name; but a succeeded Job let go
        once its result was recorded needs none: the record stands for it. Noting those (every
        node of a rollout) made each pass of the DaemonJob read them all for an hour."""
        if not self.recorded_success(job):
            self.deleted_jobs.note(uid, job)

    def alerts_changed(self) -> None:
        """The firing alerts changed: pass over every DaemonJob that halts on alerts."""
        for key in self.daemonjobs.store.keys():
            dj = self.daemonjobs.store.get(key)
            if dj is not None and self.specs.get(key, dj).rollout.halt_on_alerts:
                self.queue.add(key)

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
            and old.get("status") == new.get("status")
        ):
            return  # heartbeats do not change any answer (the cache keeps Ready and the boot ID only)
        self._node_changed(new, old)

    def node_deleted(self, obj: Obj | Tombstone) -> None:
        node = deleted_object(obj)
        self._node_changed(node, node, deleted=True)

    def _node_changed(self, node: Obj, old: Obj | None = None, deleted: bool = False) -> None:
        """Mark the node for every kept plan; enqueue the DaemonJobs for which it became or
        stopped being eligible (`old`: the node before, None when it joined), those with Jobs
        on it (why a node holding a Job is not eligible may have changed), and the one whose
        maintenance record it carries or carried (its cordon, its release, seen). Those the
        order holds back there come a little later (`OrderWakes.holds`): what they have to do is
        count the node, and a few node events then cost one pass, while the DaemonJobs that may
        start there go first, ahead of the queued work (urgent) when it just became eligible for
        them, since a node waiting for its Jobs is the wait operators feel, and a node event
        adds each DaemonJob at most once."""
        name = node["metadata"]["name"]
        self.plans.node_changed(name)
        jobs = self.jobs.store.by_index(NODE_INDEX, name)
        owners = {k for j in jobs if (k := self.foreign.owner(j)) is not None}
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
            if self.order_wakes.holds(key, node, eligibility):
                self.queue.add_after(key, defaults.JOB_EVENT_DELAY_MAX)
            else:
                self.queue.add(key, urgent=now)
