"""The DaemonJob controller: informers feed a rate-limited queue; workers decide and act.

Data flows one way: watch -> cache -> queue -> decide (pure) -> act. Handlers only enqueue
keys; a node event enqueues only the DaemonJobs whose answer for that node changed.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from typing import Any

import structlog

from daemonjob import defaults
from daemonjob.domain.decide import Decision, decide
from daemonjob.domain.eligibility import Eligibility, InvalidSpec, compile_eligibility
from daemonjob.controller.events import EventRecorder
from daemonjob.controller.expectations import Expectations
from daemonjob.machinery.informer import Handlers, Informer, InformerHooks, Tombstone
from daemonjob.domain.jobs import API_VERSION, KIND, LABEL_NAME, job_node
from daemonjob.machinery.kube import PATCH_MERGE, ApiError, Kube, path_for
from daemonjob.controller.metrics import Metrics
from daemonjob.machinery.store import meta_namespace_key, thaw
from daemonjob.controller.transforms import job_transform, node_transform
from daemonjob.machinery.workqueue import RateLimitingQueue, default_controller_rate_limiter

log = structlog.get_logger("daemonjob.controller.controller")

Obj = Mapping[str, Any]
GROUP_VERSION = API_VERSION
PLURAL = "daemonjobs"
OWNER_INDEX = "owner"
NODE_INDEX = "node"
EVENT_NAMES_SHOWN = 5


def job_event_delay(decide_seconds: float) -> float:
    """Seconds to wait after a Job event before reconciling its DaemonJob."""
    scaled = defaults.JOB_EVENT_COST_FACTOR * decide_seconds
    return min(defaults.JOB_EVENT_DELAY_MAX, max(defaults.JOB_EVENT_DELAY, scaled))


def owner_key(job: Obj) -> str | None:
    """namespace/name of the DaemonJob controlling this Job, if any."""
    for ref in (job.get("metadata") or {}).get("ownerReferences") or ():
        if ref.get("controller") and ref.get("kind") == KIND and ref.get("apiVersion", "").startswith("daemonjob.io/"):
            return f"{job['metadata'].get('namespace', '')}/{ref.get('name')}"
    return None


def owner_uid_index(job: Obj) -> list[str]:
    for ref in (job.get("metadata") or {}).get("ownerReferences") or ():
        if ref.get("controller") and ref.get("kind") == KIND:
            return [ref.get("uid", "")]
    return []


def job_node_index(job: Obj) -> list[str]:
    node = job_node(job)
    return [node] if node else []


def _obj(obj: Obj | Tombstone) -> Obj:
    return obj.obj if isinstance(obj, Tombstone) else obj


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _names(names: list[str]) -> str:
    shown = ", ".join(names[:EVENT_NAMES_SHOWN])
    return shown + (f" (+{len(names) - EVENT_NAMES_SHOWN} more)" if len(names) > EVENT_NAMES_SHOWN else "")


class Controller:
    def __init__(
        self,
        kube: Kube,
        *,
        namespace: str | None = None,
        workers: int = defaults.WORKERS,
        metrics: Metrics | None = None,
        events: EventRecorder | None = None,
        create_concurrency: int = defaults.CREATE_CONCURRENCY,
        resync_interval: float = defaults.RESYNC_INTERVAL,
        now: Callable[[], datetime] = _now,
    ):
        self.kube = kube
        self.namespace = namespace
        self.workers = workers
        self.metrics = metrics or Metrics()
        self.events = events
        self.resync_interval = resync_interval
        self.now = now
        self.expectations = Expectations()
        self.queue = RateLimitingQueue(default_controller_rate_limiter(), name="daemonjob",
                                       metrics_provider=self.metrics.queue_provider)
        self._pool = ThreadPoolExecutor(max_workers=create_concurrency, thread_name_prefix="api-writer")
        hooks = InformerHooks(on_list=self.metrics.on_list, on_relist=self.metrics.on_relist,
                              on_watch_restart=self.metrics.on_watch_restart)
        self.daemonjobs = Informer(kube, GROUP_VERSION, PLURAL, namespace=namespace, hooks=hooks, name="daemonjobs")
        self.jobs = Informer(kube, "batch/v1", "jobs", namespace=namespace, label_selector=LABEL_NAME,
                             transform=job_transform, hooks=hooks, name="jobs",
                             indexers={OWNER_INDEX: owner_uid_index, NODE_INDEX: job_node_index})
        self.nodes = Informer(kube, "v1", "nodes", transform=node_transform, hooks=hooks, name="nodes")
        self._eligibility: dict[str, tuple[str, Eligibility | None]] = {}
        self._elig_lock = threading.Lock()
        self._stalled: dict[str, tuple[int, str, str]] = {}
        self._decide_seconds: dict[str, float] = {}  # per DaemonJob, of its last decision
        self._threads: list[threading.Thread] = []
        self._stopping = threading.Event()
        self.daemonjobs.add_handlers(Handlers(self._dj_added, self._dj_updated, self._dj_deleted))
        self.jobs.add_handlers(Handlers(self._job_added, self._job_updated, self._job_deleted))
        self.nodes.add_handlers(Handlers(self._node_added, self._node_updated, self._node_deleted))

    # -- lifecycle -------------------------------------------------------------------------
    def start_informers(self) -> None:
        for inf in (self.nodes, self.jobs, self.daemonjobs):
            inf.start()

    def wait_synced(self, timeout: float | None = None) -> bool:
        deadline = None if timeout is None else time.monotonic() + timeout
        for inf in (self.nodes, self.jobs, self.daemonjobs):
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not inf.wait_for_sync(left):
                return False
        return True

    def synced(self) -> bool:
        return all(inf.has_synced() for inf in (self.nodes, self.jobs, self.daemonjobs))

    def start_workers(self) -> None:
        """Only with synced caches: a node missing from the cache would look deleted."""
        if not self.synced():
            raise RuntimeError("start_workers() before the caches synced")
        for i in range(self.workers):
            t = threading.Thread(target=self._worker, name=f"worker-{i}", daemon=True)
            t.start()
            self._threads.append(t)
        if self.resync_interval > 0:
            t = threading.Thread(target=self._resync_loop, name="resync", daemon=True)
            t.start()
            self._threads.append(t)

    def stop(self, timeout: float = 30.0) -> None:
        """Finish in-flight reconciles, then stop the threads."""
        self._stopping.set()
        self.queue.shutdown()
        deadline = time.monotonic() + timeout
        for t in self._threads:
            t.join(max(0.0, deadline - time.monotonic()))
        for inf in (self.daemonjobs, self.jobs, self.nodes):
            inf.stop()
        self._pool.shutdown(wait=True)

    def healthy(self) -> str | None:
        dead = [inf.name for inf in (self.daemonjobs, self.jobs, self.nodes) if inf._thread and not inf.alive()]
        dead += [t.name for t in self._threads if not t.is_alive() and not self._stopping.is_set()]
        return f"threads not running: {', '.join(dead)}" if dead else None

    def ready(self) -> str | None:
        return None if self.synced() else "caches not synced"

    # -- event handlers: cheap, enqueue only -----------------------------------------------
    def _eligibility_for(self, key: str, dj: Obj) -> Eligibility | None:
        rv = str(dj["metadata"].get("generation", "")) + "/" + str(dj["metadata"].get("uid", ""))
        with self._elig_lock:
            cached = self._eligibility.get(key)
            if cached is not None and cached[0] == rv:
                return cached[1]
        try:
            elig: Eligibility | None = compile_eligibility(thaw(dj))  # the compiler reads plain lists
        except InvalidSpec:
            elig = None  # decide() reports it as Stalled
        with self._elig_lock:
            self._eligibility[key] = (rv, elig)
        return elig

    def _dj_added(self, dj: Obj) -> None:
        key = meta_namespace_key(dj)
        self._eligibility_for(key, dj)
        self.queue.add(key)

    def _dj_updated(self, old: Obj, new: Obj) -> None:
        om, nm = old["metadata"], new["metadata"]
        if (om.get("generation") == nm.get("generation") and om.get("labels") == nm.get("labels")
                and om.get("deletionTimestamp") == nm.get("deletionTimestamp") and om.get("uid") == nm.get("uid")):
            return  # our own status write: nothing to decide
        key = meta_namespace_key(new)
        self._eligibility_for(key, new)
        self.queue.add(key)

    def _dj_deleted(self, obj: Obj | Tombstone) -> None:
        dj = _obj(obj)
        key = meta_namespace_key(dj)
        with self._elig_lock:
            self._eligibility.pop(key, None)
        self.expectations.forget(key)
        self._stalled.pop(key, None)
        self._decide_seconds.pop(key, None)
        self.metrics.forget(dj["metadata"].get("namespace", ""), dj["metadata"]["name"])
        self.queue.add(key)

    def _job_added(self, job: Obj) -> None:
        key = owner_key(job)
        if key is None:
            return
        self.expectations.creation_observed(key, job["metadata"]["name"])
        if job["metadata"].get("deletionTimestamp"):
            self.expectations.deletion_observed(key, job["metadata"]["name"])
        self.queue.add_after(key, self._job_event_delay(key))

    def _job_updated(self, old: Obj, new: Obj) -> None:
        key = owner_key(new)
        if key is None:
            return
        if new["metadata"].get("deletionTimestamp"):
            self.expectations.deletion_observed(key, new["metadata"]["name"])
        if old.get("status") != new.get("status") or old["metadata"].get("deletionTimestamp") != new["metadata"].get(
                "deletionTimestamp"):
            self.queue.add_after(key, self._job_event_delay(key))

    def _job_deleted(self, obj: Obj | Tombstone) -> None:
        job = _obj(obj)
        key = owner_key(job)
        if key is None:
            return
        self.expectations.deletion_observed(key, job["metadata"]["name"])
        self.queue.add_after(key, self._job_event_delay(key))

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
        node = _obj(obj)
        name = node["metadata"]["name"]
        keys = {owner_key(j) for j in self.jobs.store.by_index(NODE_INDEX, name)}
        for key, elig in self._dj_items():
            if elig is not None and elig.eligible(node):
                keys.add(key)
        for key in keys - {None}:
            self.queue.add(key)  # type: ignore[arg-type]

    def _resync_loop(self) -> None:
        while not self._stopping.wait(self.resync_interval):
            for key in self.daemonjobs.store.keys():
                self.queue.add(key)

    # -- workers ---------------------------------------------------------------------------
    def _worker(self) -> None:
        while True:
            key, shutdown = self.queue.get()
            if shutdown:
                return
            started = time.monotonic()
            try:
                self.reconcile(key)
                self.queue.forget(key)
                self.metrics.reconciles.labels("success").inc()
            except Exception as exc:
                self.metrics.reconciles.labels("error").inc()
                log.warning("reconcile failed, retrying", daemonjob=key, error=str(exc)[:500],
                            retries=self.queue.num_requeues(key))
                self.queue.add_rate_limited(key)
            finally:
                self.metrics.reconcile_seconds.observe(time.monotonic() - started)
                self.queue.done(key)

    def reconcile(self, key: str) -> Decision | None:
        namespace, _, name = key.rpartition("/")
        rlog = log.bind(namespace=namespace, name=name)
        cached = self.daemonjobs.store.get(key)
        if cached is None:
            self.expectations.forget(key)
            return None
        dj = thaw(cached)  # decide() builds Job bodies from its template
        if dj["metadata"].get("deletionTimestamp"):
            return None  # the garbage collector removes its Jobs
        if not self.expectations.satisfied(key):
            creates, deletes = self.expectations.pending(key)
            rlog.debug("waiting for the cache", pending_creates=creates, pending_deletes=deletes)
            return None
        uid = dj["metadata"].get("uid", "")
        jobs = self.jobs.store.by_index(OWNER_INDEX, uid)
        nodes = self.nodes.store.list()
        generation = int(dj["metadata"].get("generation") or 0)
        stalled = self._stalled.get(key)
        stalled_arg = (stalled[1], stalled[2]) if stalled and stalled[0] == generation else None
        started = time.thread_time()  # CPU, not wall: other threads hold the GIL at times
        decision = decide(dj, jobs, nodes, self.now(), stalled=stalled_arg)
        self._decide_seconds[key] = time.thread_time() - started
        try:
            self._delete_jobs(key, dj, decision, rlog)
            failure = self._create_jobs(key, dj, decision, generation, rlog)
        finally:
            for ev in decision.events:
                self._event(dj, ev.type, ev.reason, ev.message)
        if self._stalled.get(key) != stalled:  # this pass hit or cleared an API rejection
            decision = decide(dj, jobs, nodes, self.now(), stalled=self._stalled_arg(key, generation))
        self._write_status(dj, decision.status, rlog)
        self.metrics.set_status(namespace, name, decision.status)
        if failure is not None:
            raise failure  # retried with per-key backoff: quotas free up, webhooks come back
        return decision

    def _stalled_arg(self, key: str, generation: int) -> tuple[str, str] | None:
        stalled = self._stalled.get(key)
        return (stalled[1], stalled[2]) if stalled and stalled[0] == generation else None

    # -- act -------------------------------------------------------------------------------
    def _delete_jobs(self, key: str, dj: Obj, decision: Decision, rlog: Any) -> None:
        if not decision.deletes:
            return
        namespace = dj["metadata"]["namespace"]
        self.expectations.expect_deletions(key, [d.name for d in decision.deletes])

        def delete(d: Any) -> ApiError | None:
            body: dict[str, Any] = {"propagationPolicy": "Foreground"}
            if d.uid:
                body["preconditions"] = {"uid": d.uid}
            try:
                self.kube.delete(path_for("batch/v1", "jobs", namespace, d.name), body)
                self.metrics.jobs_deleted.labels(d.reason).inc()
                return None
            except ApiError as exc:
                self.expectations.deletion_observed(key, d.name)
                return None if exc.not_found or exc.conflict else exc
            except Exception:
                self.expectations.deletion_observed(key, d.name)
                raise

        errors = [e for e in self._pool.map(delete, decision.deletes) if e is not None]
        done: dict[str, list[str]] = {}
        for d in decision.deletes:
            done.setdefault(d.reason, []).append(d.node or d.name)
        for reason, nodes in done.items():
            rlog.info("deleted jobs", reason=reason, count=len(nodes))
            self._event(dj, "Normal", "SuccessfulDelete", f"Deleted {len(nodes)} Job(s) ({reason}): {_names(nodes)}")
        if errors:
            raise errors[0]

    def _create_jobs(self, key: str, dj: Obj, decision: Decision, generation: int, rlog: Any) -> Exception | None:
        """Slow-start batches (1, 2, 4, ...): a systematic failure costs a handful of calls."""
        if not decision.creates:
            return None
        namespace = dj["metadata"]["namespace"]
        path = path_for("batch/v1", "jobs", namespace)
        remaining = list(decision.creates)
        batch = defaults.SLOW_START_INITIAL_BATCH
        created: list[str] = []
        failure: Exception | None = None

        def create(c: Any) -> Exception | bool:
            """True when created, False when it already existed, else the error."""
            try:
                self.kube.create(path, c.body)
                self.metrics.jobs_created.inc()
                return True
            except ApiError as exc:
                self.expectations.creation_observed(key, c.name)
                return False if exc.already_exists else exc
            except Exception as exc:
                self.expectations.creation_observed(key, c.name)
                return exc

        while remaining and failure is None:
            chunk, remaining = remaining[:batch], remaining[batch:]
            self.expectations.expect_creations(key, [c.name for c in chunk])
            results = list(self._pool.map(create, chunk))
            for c, result in zip(chunk, results):
                if result is True:
                    created.append(c.node)
                elif isinstance(result, Exception) and failure is None:
                    failure = result
            batch *= 2
        if created:
            rlog.info("created jobs", count=len(created), revision=decision.status.get("currentRevision"))
            self._event(dj, "Normal", "SuccessfulCreate", f"Created {len(created)} Job(s) for revision "
                        f"{decision.status.get('currentRevision')}: {_names(created)}")
        if failure is None:
            self._stalled.pop(key, None)
            return None
        self.metrics.job_create_errors.inc()
        message = failure.message if isinstance(failure, ApiError) else str(failure)
        self._event(dj, "Warning", "FailedCreate", f"Error creating Job: {message}")
        if isinstance(failure, ApiError) and failure.invalid:
            rlog.warning("the API server rejected the Job", error=message)
            self._stalled[key] = (generation, "JobRejected", f"the API server rejected the Job: {message}")
        return failure

    def _write_status(self, dj: Obj, status: dict[str, Any], rlog: Any) -> None:
        old = thaw(dj.get("status") or {})
        if old == status:
            return
        patch = {**{k: None for k in old if k not in status}, **status}
        meta = dj["metadata"]
        try:
            self.kube.patch(path_for(GROUP_VERSION, PLURAL, meta["namespace"], meta["name"], "status"),
                            {"status": patch}, content_type=PATCH_MERGE)
        except ApiError as exc:
            if exc.not_found:
                return
            raise
        rlog.debug("status updated", desired=status.get("desiredNodes"), active=status.get("activeNodes"),
                   succeeded=status.get("succeededNodes"), failed=status.get("failedNodes"))

    def _event(self, dj: Obj, type_: str, reason: str, message: str) -> None:
        if self.events is not None:
            self.events.event(dj, type_, reason, message)
