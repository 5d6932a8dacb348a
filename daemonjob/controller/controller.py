"""The DaemonJob controller: informers feed a rate-limited queue; workers decide and act.

Data flows one way: watch -> cache -> queue -> decide (pure) -> act. Handlers only enqueue
keys; a node event enqueues only the DaemonJobs whose answer for that node changed. The
controller receives what it reads (Informers), what it writes through (a JobControl) and
one Clock, so the act layer runs in unit tests without a cluster.

Scheduled DaemonJobs are requeued for their next tick through the delaying queue, so
between ticks an idle DaemonJob costs nothing. DaemonJobs with rerunOnConfigChange have
their referenced ConfigMaps watched one by one (ConfigMapTracker); decide gets their
content as an argument.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import structlog

from daemonjob import defaults
from daemonjob.controller.act import Act, Conflict, error_message, names_shown
from daemonjob.controller.configmaps import ConfigMapTracker, InformerFactory, kube_configmap_informer
from daemonjob.controller.events import EventRecorder
from daemonjob.controller.expectations import Expectations
from daemonjob.controller.fence import Fence, NotLeader, always
from daemonjob.controller.informers import NAME_INDEX, NODE_INDEX, OWNER_INDEX, Informers, dj_name_index
from daemonjob.controller.jobcontrol import JobControl, KubeJobControl
from daemonjob.controller.metrics import Metrics
from daemonjob.domain.configrefs import pod_template_of, referenced_configmaps, rerun_on_config_change
from daemonjob.domain.decide import CreateJob, Decision, decide
from daemonjob.domain.eligibility import Eligibility, InvalidSpec, compile_eligibility
from daemonjob.domain.jobs import daemonjob_ref, owner_reference
from daemonjob.machinery.clock import Clock, RealClock
from daemonjob.machinery.informer import Handlers, InformerHooks, Tombstone, deleted_object
from daemonjob.machinery.kube import ApiError, Kube
from daemonjob.machinery.store import derived, meta_namespace_key, thaw
from daemonjob.machinery.workqueue import RateLimitingQueue, default_controller_rate_limiter

__all__ = ["Controller", "job_event_delay", "owner_key", "ReconcileError"]

log = structlog.get_logger("daemonjob.controller")

Obj = Mapping[str, Any]


def job_event_delay(decide_seconds: float) -> float:
    """Seconds to wait after a Job event before reconciling its DaemonJob."""
    scaled = defaults.JOB_EVENT_COST_FACTOR * decide_seconds
    return min(defaults.JOB_EVENT_DELAY_MAX, max(defaults.JOB_EVENT_DELAY, scaled))


def owner_key(job: Obj) -> str | None:
    """namespace/name of the DaemonJob controlling this Job, if any."""
    ref = daemonjob_ref(job)
    return None if ref is None else f"{job['metadata'].get('namespace', '')}/{ref.get('name')}"


def _owner_uid(job: Obj) -> str:
    ref = daemonjob_ref(job)
    return (ref.get("uid") or "") if ref is not None else ""


class ReconcileError(Exception):
    """Some actions of a pass failed; the rest were carried out and the status written."""

    def __init__(self, errors: list[Exception]):
        self.errors = errors
        shown = "; ".join(error_message(e) for e in errors[:3])
        super().__init__(f"{len(errors)} action(s) failed: {shown}")


_NOT_SYNCED = object()


@dataclass(frozen=True, slots=True)
class _Stall:
    """An API-side reason the current generation cannot progress, kept per DaemonJob uid."""

    generation: int
    reason: str
    message: str


class Controller:
    def __init__(
        self,
        informers: Informers,
        control: JobControl,
        *,
        clock: Clock | None = None,
        workers: int = defaults.WORKERS,
        metrics: Metrics | None = None,
        create_concurrency: int = defaults.CREATE_CONCURRENCY,
        resync_interval: float = defaults.RESYNC_INTERVAL,
        configmap_informers: InformerFactory | None = None,
    ):
        """`configmap_informers` makes the informer of one ConfigMap (namespace, name), for
        DaemonJobs with rerunOnConfigChange; without it their ConfigMaps are not read."""
        self.informers = informers
        self.control = control
        self.clock = clock or RealClock()
        self.workers = workers
        self.metrics = metrics or Metrics()
        self.resync_interval = resync_interval
        self.expectations = Expectations(timer=self.clock.now)  # keyed by DaemonJob uid
        self.queue = RateLimitingQueue(default_controller_rate_limiter(self.clock), name="daemonjob",
                                       clock=self.clock, metrics_provider=self.metrics.queue_provider)
        self._pool = ThreadPoolExecutor(max_workers=create_concurrency, thread_name_prefix="api-writer")
        self.act = Act(control, self.expectations, self.metrics, self._pool)
        self.configmaps = (ConfigMapTracker(configmap_informers, self.queue.add)
                           if configmap_informers is not None else None)
        self.daemonjobs, self.jobs, self.nodes = informers.daemonjobs, informers.jobs, informers.nodes
        self._eligibility: dict[str, tuple[str, Eligibility | None]] = {}
        self._elig_lock = threading.Lock()
        self._stalled: dict[str, _Stall] = {}  # by uid
        self._conflicts: dict[str, tuple[Conflict, ...]] = {}  # by uid: Job names another owner holds
        self._decide_seconds: dict[str, float] = {}  # by key, of its last decision
        self._threads: list[threading.Thread] = []
        self._stopping = threading.Event()
        self._resync_wake = threading.Condition()
        self.daemonjobs.add_handlers(Handlers(self._dj_added, self._dj_updated, self._dj_deleted))
        self.jobs.add_handlers(Handlers(self._job_added, self._job_updated, self._job_deleted))
        self.nodes.add_handlers(Handlers(self._node_added, self._node_updated, self._node_deleted))

    @classmethod
    def for_kube(cls, kube: Kube, *, namespace: str | None = None, events: EventRecorder | None = None,
                 fence: Fence | Callable[[], bool] = always, metrics: Metrics | None = None,
                 clock: Clock | None = None, rng: random.Random | None = None, **kw: Any) -> Controller:
        """The production wiring: real informers on `kube`, writes through a fenced KubeJobControl."""
        metrics = metrics or Metrics()
        hooks = InformerHooks(on_list=metrics.on_list, on_relist=metrics.on_relist,
                              on_watch_restart=metrics.on_watch_restart)
        informers = Informers.for_kube(kube, namespace=namespace, hooks=hooks, clock=clock, rng=rng)
        return cls(informers, KubeJobControl(kube, events, fence), metrics=metrics, clock=clock,
                   configmap_informers=kube_configmap_informer(kube, hooks, clock=clock, rng=rng), **kw)

    # -- lifecycle -------------------------------------------------------------------------
    def start_informers(self) -> None:
        for inf in self.informers.all():
            inf.start()

    def wait_synced(self, timeout: float | None = None) -> bool:
        deadline = None if timeout is None else time.monotonic() + timeout
        for inf in self.informers.all():
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not inf.wait_for_sync(left):
                return False
        return True

    def synced(self) -> bool:
        return all(inf.has_synced() for inf in self.informers.all())

    def start_workers(self) -> None:
        """Only with synced caches: a node missing from the cache would look deleted."""
        if not self.synced():
            raise RuntimeError("start_workers() before the caches synced")
        for i in range(self.workers):
            self._spawn(self._worker, f"worker-{i}")
        if self.resync_interval > 0:
            self._spawn(self._resync_loop, "resync")

    def _spawn(self, target: Any, name: str) -> None:
        t = threading.Thread(target=target, name=name, daemon=True)
        t.start()
        self._threads.append(t)

    def stop_workers(self, timeout: float = 30.0) -> bool:
        """Stop taking keys (those still queued are left), then wait up to `timeout` for
        in-flight reconciles; True if all ended. What still runs then is fenced by the caller."""
        self._stopping.set()
        self.queue.shutdown()
        with self._resync_wake:
            self._resync_wake.notify_all()
        deadline = time.monotonic() + timeout
        for t in self._threads:
            t.join(max(0.0, deadline - time.monotonic()))
        return not any(t.is_alive() for t in self._threads)

    def stop(self, timeout: float = 30.0) -> None:
        """Stop the workers, then the informers and the writer pool."""
        self.stop_workers(timeout)
        for inf in self.informers.all():
            inf.stop()
        if self.configmaps is not None:
            self.configmaps.stop()
        self._pool.shutdown(wait=False, cancel_futures=True)

    def healthy(self) -> str | None:
        dead = [inf.name for inf in self.informers.all() if not inf.alive()]
        dead += [t.name for t in self._threads if not t.is_alive() and not self._stopping.is_set()]
        return f"threads not running: {', '.join(dead)}" if dead else None

    def ready(self) -> str | None:
        return None if self.synced() else "caches not synced"

    # -- event handlers: cheap, enqueue only -----------------------------------------------
    def _eligibility_for(self, key: str, dj: Obj) -> Eligibility | None:
        version = f"{dj['metadata'].get('generation', '')}/{dj['metadata'].get('uid', '')}"
        with self._elig_lock:
            cached = self._eligibility.get(key)
            if cached is not None and cached[0] == version:
                return cached[1]
        try:
            elig: Eligibility | None = compile_eligibility(thaw(dj))  # the compiler reads plain lists
        except InvalidSpec:
            elig = None  # decide() reports it as Stalled
        with self._elig_lock:
            self._eligibility[key] = (version, elig)
        return elig

    def _dj_added(self, dj: Obj) -> None:
        key = meta_namespace_key(dj)
        self._eligibility_for(key, dj)
        self.queue.add(key)

    def _dj_updated(self, old: Obj, new: Obj) -> None:
        om, nm = old["metadata"], new["metadata"]
        if om.get("uid") != nm.get("uid"):
            self._forget_uid(om.get("uid") or "")  # deleted and re-created: nothing carries over
        elif (om.get("generation") == nm.get("generation") and om.get("labels") == nm.get("labels")
              and om.get("annotations") == nm.get("annotations")
              and om.get("deletionTimestamp") == nm.get("deletionTimestamp")):
            return  # a status write: nothing to decide
        key = meta_namespace_key(new)
        self._eligibility_for(key, new)
        self.queue.add(key)

    def _dj_deleted(self, obj: Obj | Tombstone) -> None:
        dj = deleted_object(obj)
        key = meta_namespace_key(dj)
        with self._elig_lock:
            self._eligibility.pop(key, None)
        self._forget_uid(dj["metadata"].get("uid") or "")
        self._decide_seconds.pop(key, None)
        if self.configmaps is not None:
            self.configmaps.forget(key)
        self.metrics.forget(dj["metadata"].get("namespace", ""), dj["metadata"]["name"])
        self.queue.add(key)

    def _forget_uid(self, uid: str) -> None:
        self.expectations.forget(uid)
        self._stalled.pop(uid, None)
        self._conflicts.pop(uid, None)

    def _job_added(self, job: Obj) -> None:
        key = owner_key(job)
        if key is None:
            self._maybe_orphan(job)
            return
        uid = _owner_uid(job)
        self.expectations.creation_observed(uid, job["metadata"]["name"])
        if job["metadata"].get("deletionTimestamp"):
            self.expectations.deletion_observed(uid, job["metadata"]["name"])
        self.queue.add_after(key, self._job_event_delay(key))

    def _job_updated(self, old: Obj, new: Obj) -> None:
        key = owner_key(new)
        if key is None:
            self._maybe_orphan(new)
            return
        if new["metadata"].get("deletionTimestamp"):
            self.expectations.deletion_observed(_owner_uid(new), new["metadata"]["name"])
        if (old.get("status") != new.get("status") or owner_key(old) != key
                or old["metadata"].get("deletionTimestamp") != new["metadata"].get("deletionTimestamp")):
            self.queue.add_after(key, self._job_event_delay(key))

    def _job_deleted(self, obj: Obj | Tombstone) -> None:
        job = deleted_object(obj)
        key = owner_key(job)
        if key is None:
            return
        self.expectations.deletion_observed(_owner_uid(job), job["metadata"]["name"])
        self.queue.add_after(key, self._job_event_delay(key))

    def _maybe_orphan(self, job: Obj) -> None:
        """A Job with no controller that names a DaemonJob: that DaemonJob may adopt it."""
        for key in dj_name_index(job):
            if self.daemonjobs.store.get(key) is not None:
                self.queue.add(key)

    def _job_event_delay(self, key: str) -> float:
        return job_event_delay(self._decide_seconds.get(key, 0.0))

    def _dj_items(self) -> list[tuple[str, Eligibility | None]]:
        with self._elig_lock:
            return [(k, v[1]) for k, v in self._eligibility.items()]

    def _node_added(self, node: Obj) -> None:
        for key, elig in self._dj_items():
            if elig is not None and elig.eligible(node):
                self.queue.add(key)

    def _node_updated(self, old: Obj, new: Obj) -> None:
        if old.get("spec") == new.get("spec") and (old["metadata"].get("labels") == new["metadata"].get("labels")):
            return  # heartbeats and status changes do not change any answer
        for key, elig in self._dj_items():
            if elig is not None and elig.eligible(old) != elig.eligible(new):
                self.queue.add(key)

    def _node_deleted(self, obj: Obj | Tombstone) -> None:
        node = deleted_object(obj)
        name = node["metadata"]["name"]
        keys = {owner_key(j) for j in self.jobs.store.by_index(NODE_INDEX, name)}
        for key, elig in self._dj_items():
            if elig is not None and elig.eligible(node):
                keys.add(key)
        for key in keys - {None}:
            self.queue.add(key)  # type: ignore[arg-type]

    def _resync_loop(self) -> None:
        with self._resync_wake:
            while not self._stopping.is_set():
                self.clock.wait(self._resync_wake, self.resync_interval)
                if self._stopping.is_set():
                    return
                for key in self.daemonjobs.store.keys():
                    self.queue.add(key)

    # -- workers ---------------------------------------------------------------------------
    def _worker(self) -> None:
        while True:
            key, shutdown = self.queue.get()
            if shutdown:
                return
            if self._stopping.is_set():  # stopping: keys still queued are not taken
                self.queue.done(key)
                return
            started = self.clock.now()
            try:
                self.reconcile(key)  # type: ignore[arg-type]
                self.queue.forget(key)
                self.metrics.reconciles.labels("success").inc()
            except NotLeader as exc:
                log.info("stopped writing", daemonjob=key, reason=str(exc))
            except Exception as exc:
                self.metrics.reconciles.labels("error").inc()
                conflict = isinstance(exc, ApiError) and exc.conflict
                (log.debug if conflict else log.warning)(
                    "reconcile failed, retrying", daemonjob=key, error=str(exc)[:500],
                    retries=self.queue.num_requeues(key))
                self.queue.add_rate_limited(key)
            finally:
                self.metrics.reconcile_seconds.observe(self.clock.now() - started)
                self.queue.done(key)

    def reconcile(self, key: str) -> Decision | None:
        """One pass for one DaemonJob: decide, act on all of it, write the status, then raise errors."""
        namespace, _, name = key.rpartition("/")
        rlog = log.bind(namespace=namespace, name=name)
        cached = self.daemonjobs.store.get(key)
        if cached is None:
            if self.configmaps is not None:
                self.configmaps.forget(key)
            return None
        dj = thaw(cached)  # decide() builds Job bodies from its template
        meta = dj["metadata"]
        if meta.get("deletionTimestamp"):
            if self.configmaps is not None:
                self.configmaps.forget(key)
            return None  # the garbage collector removes its Jobs
        configmaps = self._configmaps(key, dj)
        if configmaps is _NOT_SYNCED:
            rlog.debug("waiting for the referenced ConfigMaps")
            self.queue.add_after(key, defaults.CONFIGMAP_SYNC_RECHECK)
            return None
        uid = meta.get("uid") or ""
        if not self.expectations.satisfied(uid):
            creates, deletes = self.expectations.pending(uid)
            rlog.debug("waiting for the cache", pending_creates=creates, pending_deletes=deletes)
            return None
        jobs = list(self.jobs.store.by_index(OWNER_INDEX, uid))
        owner = owner_reference(dj)
        jobs += self.act.adopt(dj, self.jobs.store.by_index(NAME_INDEX, key), owner)
        nodes = self.nodes.store.list()
        generation = int(meta.get("generation") or 0)
        stall_before = self._stall_arg(uid, generation)
        conflicts = self._recheck_conflicts(dj, owner)
        now = self.clock.wall()  # one instant per pass: both decisions see the same ticks

        def decision_for(stalled: tuple[str, str] | None) -> Decision:
            return decide(dj, jobs, nodes, now, stalled, eligibility=self._eligibility_for(key, cached),
                          memo=derived, conflicts={c.node: c.text for c in conflicts},
                          configmaps=configmaps)  # type: ignore[arg-type]

        started = time.thread_time()  # CPU, not wall: other threads hold the GIL at times
        decision = decision_for(stall_before)
        self._decide_seconds[key] = time.thread_time() - started

        errors = self._delete(dj, decision, rlog) + self._create(dj, decision, generation, owner, rlog)
        stall_after = self._stall_arg(uid, generation)
        if stall_after != stall_before or self._conflicts.get(uid, ()) != conflicts:
            conflicts = self._conflicts.get(uid, ())  # this pass hit or cleared an API rejection or a clash
            decision = decision_for(stall_after)
        for ev in decision.events:
            self.control.record_event(dj, ev.type, ev.reason, ev.message)
        if self.act.write_status(dj, thaw(cached.get("status") or {}), decision.status):
            rlog.debug("status updated", desired=decision.status.get("desiredNodes"),
                       active=decision.status.get("activeNodes"), succeeded=decision.status.get("succeededNodes"),
                       failed=decision.status.get("failedNodes"))
            self._count_runs(namespace, name, decision, rlog)
        self.metrics.set_status(namespace, name, decision.status)
        self.metrics.observe_health(dj, decision.status, now)
        self._requeue_at(key, decision.requeue_at)
        if errors:
            raise ReconcileError(errors)  # retried with per-key backoff: quotas free up, webhooks come back
        if self._conflicts.get(uid):  # a foreign Job's removal sends no event here: look again later
            self.queue.add_after(key, defaults.CONFLICT_RECHECK_INTERVAL)
        return decision

    def _configmaps(self, key: str, dj: Obj) -> dict[str, Obj | None] | None | object:
        """The referenced ConfigMaps by name (None: missing), None when not opted in, or
        _NOT_SYNCED while a watch of one has not listed yet. Keeps the tracker's watches
        to exactly what `dj` references."""
        if self.configmaps is None:
            return None
        namespace = dj["metadata"].get("namespace") or ""
        if not rerun_on_config_change(dj):
            self.configmaps.forget(key)
            return None
        refs = referenced_configmaps(pod_template_of(dj))
        self.configmaps.track(key, namespace, [r.name for r in refs])
        out: dict[str, Obj | None] = {}
        for ref in refs:
            synced, obj = self.configmaps.get(namespace, ref.name)
            if not synced:
                return _NOT_SYNCED
            out[ref.name] = obj
        return out

    def _count_runs(self, namespace: str, name: str, decision: Decision, rlog: Any) -> None:
        """Runs started, skipped and finished: counted once, with the status write that records them."""
        if decision.run_started is not None:
            rlog.info("run started", run=decision.run_started)
            self.metrics.runs_started.labels(namespace, name).inc()
        for reason, count in decision.ticks_skipped:
            self.metrics.runs_skipped.labels(namespace, name, reason).inc(count)
        if decision.run_finished is not None:
            self.metrics.runs_finished.labels(namespace, name, decision.run_finished).inc()

    def _requeue_at(self, key: str, when: datetime | None) -> None:
        """Reconcile again at the next tick: no polling in between."""
        if when is not None:
            delay = (when - self.clock.wall()).total_seconds()
            self.queue.add_after(key, max(0.0, delay) + defaults.SCHEDULE_REQUEUE_SLACK)

    def _stall_arg(self, uid: str, generation: int) -> tuple[str, str] | None:
        stall = self._stalled.get(uid)
        return (stall.reason, stall.message) if stall is not None and stall.generation == generation else None

    # -- act -------------------------------------------------------------------------------
    def _delete(self, dj: Obj, decision: Decision, rlog: Any) -> list[Exception]:
        meta = dj["metadata"]
        outcome = self.act.delete_jobs(meta["uid"], meta["namespace"], decision.deletes)
        done: dict[str, list[str]] = {}
        for d in outcome.deleted:
            done.setdefault(d.reason, []).append(d.node or d.name)
        for reason, nodes in done.items():
            rlog.info("deleted jobs", reason=reason, count=len(nodes))
            self.control.record_event(dj, "Normal", "SuccessfulDelete",
                                      f"Deleted {len(nodes)} Job(s) ({reason}): {names_shown(nodes)}")
        errors = [e for _, e in outcome.failed]
        fenced = [e for e in errors if isinstance(e, NotLeader)]
        if fenced:
            raise fenced[0]
        if outcome.failed:
            failed_names = [d.name for d, _ in outcome.failed]
            rlog.warning("deleting jobs failed", count=len(failed_names), error=error_message(errors[0]))
            self.control.record_event(dj, "Warning", "FailedDelete",
                                      f"Error deleting {len(failed_names)} Job(s) ({names_shown(failed_names)}): "
                                      f"{error_message(errors[0])}")
        return errors

    def _create(self, dj: Obj, decision: Decision, generation: int, owner: Obj, rlog: Any) -> list[Exception]:
        meta = dj["metadata"]
        uid = meta["uid"]
        outcome = self.act.create_jobs(uid, meta["namespace"], decision.creates)
        revision = decision.status.get("currentRevision")
        if outcome.created:
            nodes = [c.node for c in outcome.created]
            rlog.info("created jobs", count=len(nodes), revision=revision)
            self.control.record_event(dj, "Normal", "SuccessfulCreate",
                                      f"Created {len(nodes)} Job(s) for revision {revision}: {names_shown(nodes)}")
        if outcome.existed:
            found = self.act.resolve_existing(dj, outcome.existed, owner)
            if found:
                rlog.warning("job name conflict", count=len(found), first=found[0].job)
                known = {c.node: c for c in self._conflicts.get(uid, ())}
                known.update({c.node: c for c in found})
                self._conflicts[uid] = tuple(sorted(known.values(), key=lambda c: c.node))
        if isinstance(outcome.error, NotLeader):
            raise outcome.error
        if outcome.error is None:
            self._stalled.pop(uid, None)
            return []
        message = error_message(outcome.error)
        self.control.record_event(dj, "Warning", "FailedCreate", f"Error creating Job: {message}")
        if outcome.rejected is not None:
            rlog.warning("the API server rejected the Job", error=message)
            self._stalled[uid] = _Stall(generation, "JobRejected", f"the API server rejected the Job: {message}")
        return [outcome.error]

    def _recheck_conflicts(self, dj: Obj, owner: Obj) -> tuple[Conflict, ...]:
        """Conflicts still standing: a fresh read of each clashing Job (rare, and few)."""
        uid = dj["metadata"]["uid"]
        known = self._conflicts.get(uid, ())
        if not known:
            return ()
        still = tuple(self.act.resolve_existing(dj, [CreateJob(c.node, c.job, "", dj) for c in known], owner))
        if still:
            self._conflicts[uid] = still
        else:
            self._conflicts.pop(uid, None)
        return still

    # -- for tests and tools ---------------------------------------------------------------
    def decide_seconds(self, key: str) -> float:
        return self._decide_seconds.get(key, 0.0)

