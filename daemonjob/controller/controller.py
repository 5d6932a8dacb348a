"""The DaemonJob controller: informers feed a rate-limited queue; workers pass over DaemonJobs.

Data flows one way: watch -> cache -> queue -> decide (pure) -> act -> report. Event
routing (routing.py) only notes and enqueues. A pass over one DaemonJob reads one way, as
the DaemonSet controller's syncDaemonSet does (`Controller.reconcile`, step by step):

1. observe (observe.py): the cached DaemonJob, its referenced ConfigMaps, the cache's view
   of the controller's own writes;
2. adopt (adoption.py): orphans made for it are adopted, known name conflicts read afresh;
   this step writes to the API server, as the DaemonSet controller adopts while it gathers;
3. decide once (domain/decide.py) over one `DecisionInput`: the DaemonJob, its kept plan
   told of every node that changed (keptplans.py), the API's troubles, the clock;
4. act (act.py): deletes, creates, history; what the API server answered is kept
   (troubles.py) and the decision concluded again from the same reading with it;
5. report (report.py): the one place Events are posted, the status, the metrics;
6. look again: the one place that schedules the DaemonJob's next pass.

The controller receives what it reads (Informers), what it writes through (a JobControl)
and one Clock, so all of it runs in unit tests without a cluster.

Each DaemonJob's plan is kept across passes and told which nodes changed (plans.py), so a
pass costs what changed; every PLAN_SELF_CHECK_INTERVAL a pass also decides from scratch
and compares, logging, counting and repairing any difference.
"""

from __future__ import annotations

import dataclasses
import random
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import structlog

from daemonjob import defaults
from daemonjob.controller.act import Act
from daemonjob.controller.adoption import Adopted, Adoption
from daemonjob.controller.alertpoller import AlertPoller, HttpGet
from daemonjob.controller.claims import NodeClaims
from daemonjob.controller.configmaps import ConfigMapLimits, ConfigMapTracker, InformerFactory, kube_configmap_informer
from daemonjob.controller.drains import Drains
from daemonjob.controller.events import EventRecorder, error_message
from daemonjob.controller.expectations import Expectations, NameHolds
from daemonjob.controller.fence import Fence, NotLeader, always
from daemonjob.controller.history import HistoryCleaner
from daemonjob.controller.informers import MAINTENANCE_INDEX, ORPHAN_INDEX, Informers
from daemonjob.controller.jobcontrol import JobControl, KubeJobControl
from daemonjob.controller.keptplans import KeptPlans
from daemonjob.controller.metrics import DRAIN_DRAINED, DRAIN_TIMED_OUT, Metrics
from daemonjob.controller.nodecontrol import KubeNodeControl, NodeControl
from daemonjob.controller.nodework import NodeActed, NodeActs, release_node, released_event
from daemonjob.controller.observe import Observation, Observer
from daemonjob.controller.order import OrderIndex
from daemonjob.controller.orderreader import OrderReader
from daemonjob.controller.report import Reporter
from daemonjob.controller.routing import Router, job_event_delay, owner_key
from daemonjob.controller.troubles import Troubles
from daemonjob.domain.decide import NODE_COUNT_FIELDS, Decision, EventSpec, decide
from daemonjob.domain.inputs import DecisionInput, FiringAlerts
from daemonjob.domain.jobs import parse_time
from daemonjob.domain.maintenance import FINALIZER, MaintenanceInput, has_finalizer, releases_on_delete
from daemonjob.domain.maintenancespec import wants_maintenance
from daemonjob.domain.noderecord import NodeRecord, record_of
from daemonjob.machinery.clock import Clock, RealClock
from daemonjob.machinery.informer import InformerHooks
from daemonjob.machinery.kube import ApiError, Kube
from daemonjob.machinery.memo import ObjectMemo
from daemonjob.machinery.ratelimit import default_controller_rate_limiter
from daemonjob.machinery.workqueue import RateLimitingQueue
from daemonjob.machinery.writers import WriterPool

__all__ = ["Controller", "job_event_delay", "owner_key", "ReconcileError"]

log = structlog.get_logger("daemonjob.controller")


class ReconcileError(Exception):
    """Some actions of a pass failed; the rest were carried out and the status written."""

    def __init__(self, errors: list[Exception]):
        self.errors = errors
        shown = "; ".join(error_message(e) for e in errors[:3])
        super().__init__(f"{len(errors)} action(s) failed: {shown}")


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
        configmap_limits: ConfigMapLimits | None = None,
        prometheus_url: str | None = None,
        prometheus_poll_interval: float = defaults.PROMETHEUS_POLL_INTERVAL,
        prometheus_get: HttpGet | None = None,
        node_control: NodeControl | None = None,
        node_maintenance_namespaces: frozenset[str] = frozenset(defaults.NODE_MAINTENANCE_NAMESPACES),
    ):
        """`configmap_informers` makes the informer of one ConfigMap (namespace, name), for
        DaemonJobs with rerunOnConfigChange; without it their ConfigMaps are not read.
        `prometheus_url`: where the firing alerts are read for spec.rollout.haltOnAlerts (without
        it a DaemonJob with haltOnAlerts halts, AlertsUnknown); `prometheus_get` replaces the HTTP GET.
        `node_control`: what node maintenance writes through (Nodes, evictions, the finalizer);
        `node_maintenance_namespaces`: where a DaemonJob may use it (elsewhere it is Stalled)."""
        self.informers = informers
        self.control = control
        self.clock = clock or RealClock()
        self.workers = workers
        self.metrics = metrics or Metrics()
        self.resync_interval = resync_interval
        self.expectations = Expectations(timer=self.clock.now)  # keyed by DaemonJob uid
        self.name_holds = NameHolds(timer=self.clock.now)  # keyed by DaemonJob uid
        self.metrics.expectations_overdue.set_function(self.expectations.overdue)
        self.queue = RateLimitingQueue(
            default_controller_rate_limiter(self.clock),
            name="daemonjob",
            clock=self.clock,
            metrics_provider=self.metrics.queue_provider,
        )
        self._writers = WriterPool(create_concurrency, "api-writer")
        self.history = HistoryCleaner(control, self.metrics, clock=self.clock)
        self.troubles = Troubles()
        self.adoption = Adoption(control)
        self.order_index = OrderIndex(informers.jobs)  # DaemonJobs by exclusion group and by what they come after
        self.claims = NodeClaims(informers.daemonjobs, informers.jobs, self.order_index, self.queue.add, self.clock.now)
        self.act = Act(
            control,
            self.expectations,
            self.metrics,
            self._writers.map,
            history=self.history,
            name_holds=self.name_holds,
            adoption=self.adoption,
            troubles=self.troubles,
            claims=self.claims,
        )
        self.configmaps = (
            ConfigMapTracker(configmap_informers, self.queue.add, configmap_limits)
            if configmap_informers is not None
            else None
        )
        self.daemonjobs, self.jobs, self.nodes = informers.daemonjobs, informers.jobs, informers.nodes
        self.memo = ObjectMemo()  # values kept on cached objects; the router sizes it to the node rules in use
        self.plans = KeptPlans(self.jobs, self.nodes, self.memo)
        self.order_reader = OrderReader(self.daemonjobs, self.jobs, self.plans, self.order_index, self.claims)
        self.router = Router(
            informers,
            self.queue,
            expectations=self.expectations,
            name_holds=self.name_holds,
            plans=self.plans,
            metrics=self.metrics,
            configmaps=self.configmaps,
            memo=self.memo,
            forget_uid=self._forget_uid,
            order_index=self.order_index,
            claims=self.claims,
        )
        self.observer = Observer(
            informers,
            control=control,
            expectations=self.expectations,
            configmaps=self.configmaps,
            metrics=self.metrics,
            clock=self.clock,
            memo=self.memo,
        )
        self.reporter = Reporter(control, metrics=self.metrics, clock=self.clock)
        self.node_maintenance_namespaces = frozenset(node_maintenance_namespaces)
        self.drains = Drains()
        self.node_control = node_control
        self.node_acts = NodeActs(node_control, self.drains, self.clock) if node_control is not None else None
        self._threads: list[threading.Thread] = []
        self._stopping = threading.Event()
        self._resync_wake = threading.Condition()
        self.alerts = (
            AlertPoller(
                prometheus_url,
                self._alerts_changed,
                interval=prometheus_poll_interval,
                get=prometheus_get,
                clock=self.clock,
            )
            if prometheus_url
            else None
        )
        self.router.register()

    @classmethod
    def for_kube(
        cls,
        kube: Kube,
        *,
        namespace: str | None = None,
        events: EventRecorder | None = None,
        fence: Fence | Callable[[], bool] = always,
        metrics: Metrics | None = None,
        clock: Clock | None = None,
        rng: random.Random | None = None,
        **kw: Any,
    ) -> Controller:
        """The production wiring: real informers on `kube`, writes through a fenced KubeJobControl."""
        metrics = metrics or Metrics()
        hooks = InformerHooks(
            on_list=metrics.on_list, on_relist=metrics.on_relist, on_watch_restart=metrics.on_watch_restart
        )
        informers = Informers.for_kube(kube, namespace=namespace, hooks=hooks, clock=clock, rng=rng)
        return cls(
            informers,
            KubeJobControl(kube, events, fence),
            metrics=metrics,
            clock=clock,
            configmap_informers=kube_configmap_informer(kube, hooks, clock=clock, rng=rng),
            node_control=KubeNodeControl(kube, fence),
            **kw,
        )

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
        if self.alerts is not None:
            self._spawn(self.alerts.run, "alerts")

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
        if self.alerts is not None:
            self.alerts.stop()
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
        self.history.stop()
        self._writers.shutdown()

    def healthy(self) -> str | None:
        dead = [inf.name for inf in self.informers.all() if not inf.alive()]
        dead += [t.name for t in self._threads if not t.is_alive() and not self._stopping.is_set()]
        return f"threads not running: {', '.join(dead)}" if dead else None

    def ready(self) -> str | None:
        return None if self.synced() else "caches not synced"

    def _forget_uid(self, uid: str) -> None:
        """A DaemonJob deleted or re-created: nothing of the old one carries over."""
        self.expectations.forget(uid)
        self.name_holds.forget(uid)
        self.troubles.forget(uid)
        self.plans.forget(uid)
        self.drains.forget(uid)
        self.claims.forget(uid)
        self.order_index.succeeded.forget(uid)

    def _resync_loop(self) -> None:
        with self._resync_wake:
            while not self._stopping.is_set():
                self.clock.wait(self._resync_wake, self.resync_interval)
                if self._stopping.is_set():
                    return
                for key in self.daemonjobs.store.keys():
                    self.queue.add(key)

    def _alerts_changed(self) -> None:
        """The firing alerts changed: pass over every DaemonJob that halts on alerts."""
        for key in self.daemonjobs.store.keys():
            dj = self.daemonjobs.store.get(key)
            rollout = ((dj or {}).get("spec") or {}).get("rollout")
            if isinstance(rollout, Mapping) and rollout.get("haltOnAlerts"):
                self.queue.add(key)

    def firing_alerts(self) -> FiringAlerts:
        """The alerts as last read from Prometheus; unknown without --prometheus-url."""
        return self.alerts.current() if self.alerts is not None else FiringAlerts()

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
                    "reconcile failed, retrying",
                    daemonjob=key,
                    error=str(exc)[:500],
                    retries=self.queue.num_requeues(key),
                )
                self.queue.add_rate_limited(key)
            finally:
                self.metrics.reconcile_seconds.observe(self.clock.now() - started)
                self.queue.done(key)

    def reconcile(self, key: str) -> Decision | None:
        """One pass for one DaemonJob: observe, adopt, decide, act on all of it, report, look
        again; then raise what failed (retried with the key's backoff)."""
        look_again: list[float | None] = []
        events: list[EventSpec] = []  # posted by the report step, or below if the pass ends early
        reported = False
        try:
            if self._finalizing(key):
                return None
            seen, wake = self.observer.observe(key)
            look_again.append(wake)
            if seen is None:
                return None
            adopted = self._adopt(seen)
            events.extend(adopted.events)
            inp = self._input(seen, adopted.jobs)
            decision = self._decide(seen.key, inp)
            now = inp.now
            if seen.wait is not None:
                self.reporter.report(seen, decision, now, wait=seen.wait)
                return None
            acted = self.act.carry(seen, decision)
            events.extend(acted.events)
            look_again.append(acted.look_again)
            node_acted = self._carry_node_work(seen, decision)
            if node_acted is not None:
                events.extend(node_acted.events)
                look_again.append(node_acted.look_again)
                acted.errors.extend(node_acted.errors)
            self._maintenance_metrics(seen, inp, decision, node_acted)
            decision = decision.after_act(self.troubles.of(seen.uid, seen.generation))
            if not decision.creates and not decision.deletes and self.plans.check_due(seen.uid, self.clock.now()):
                decision, repaired = self._self_check(seen, decision)
                look_again.append(0.0 if repaired else None)
            self.reporter.report(
                seen,
                decision,
                now,
                events,
                created=acted.created > 0 and not acted.errors and len(decision.creates) == acted.created,
            )
            reported = True
            if decision.reading is not None and self.order_index.group(seen.key):
                plan = decision.reading.plan
                self.router.order_wakes.turns_taken(seen.key, len(plan.replacing) + len(plan.starting))
            look_again.append(self._next_tick(decision))
            if self.troubles.conflicts(seen.uid):  # a foreign Job's removal sends no event here
                look_again.append(defaults.CONFLICT_RECHECK_INTERVAL)
            if acted.errors:
                raise ReconcileError(acted.errors)  # retried with per-key backoff: quotas free up, webhooks come back
            return decision
        finally:
            if events and not reported:
                self.reporter.post(seen, events)
            self._look_again(key, look_again)

    def _adopt(self, seen: Observation) -> Adopted:
        """Adopt this DaemonJob's orphans and read known name conflicts afresh (not while the
        cache is behind its own writes): the Jobs adopted, for the kept plan, and the Events."""
        if seen.wait is not None:
            return Adopted()
        adopted = Adopted(self.adoption.adopt(seen.dj, self.jobs.store.by_index(ORPHAN_INDEX, seen.key), seen.owner))
        known = self.troubles.conflicts(seen.uid)
        if known:
            rechecked = self.adoption.recheck(seen.dj, known, seen.owner)
            adopted.events = rechecked.events
            self.troubles.set_conflicts(seen.uid, tuple(rechecked.conflicts))
        return adopted

    def _input(self, seen: Observation, adopted: list[Mapping[str, Any]]) -> DecisionInput:
        """The one value the decision reads; `now`: one instant for the whole pass."""
        return DecisionInput(
            dj=seen.dj,
            plan=self.plans.kept_plan(seen.uid, adopted),
            now=self.clock.wall(),
            troubles=self.troubles.of(seen.uid, seen.generation),
            configmaps=seen.configmaps,
            eligibility=self.router.eligibility_for(seen.key, seen.cached),
            memo=self.memo,
            alerts=self.firing_alerts(),
            order=self.order_reader.read(seen.key, seen.cached),
            maintenance=MaintenanceInput(
                self._records(seen.uid), self.drains.of(seen.uid), self.node_maintenance_namespaces
            ),
        )

    # -- node maintenance ----------------------------------------------------------------------------
    def _records(self, uid: str) -> dict[str, NodeRecord]:
        """The nodes carrying this DaemonJob's maintenance record, as cached."""
        out = {}
        for node in self.nodes.store.by_index(MAINTENANCE_INDEX, uid):
            record = record_of(node)
            if record is not None:
                out[node["metadata"]["name"]] = record
        return out

    def _carry_node_work(self, seen: Observation, decision: Decision) -> NodeActed | None:
        work = decision.node_work
        if work is None or not work.writes:
            return None
        if self.node_acts is None:
            seen.log.warning("node maintenance asked for, but this controller writes no Nodes")
            return None
        maintenance = decision.reading.checked.maintenance if decision.reading is not None else None
        return self.node_acts.carry(seen, work, maintenance.drain if maintenance is not None else None)

    def _maintenance_metrics(
        self, seen: Observation, inp: DecisionInput, decision: Decision, acted: NodeActed | None
    ) -> None:
        """Nodes held cordoned (as this pass found them), drains ended, evictions refused."""
        if decision.node_work is None:
            return
        ns, name, uid = seen.namespace, seen.name, seen.uid
        records = inp.maintenance.records
        held = [t for r in records.values() if r.cordoned and (t := parse_time(r.since)) is not None]
        self.metrics.maintenance_observed(
            ns, name, uid, sum(1 for r in records.values() if r.cordoned), min(held).timestamp() if held else None
        )
        outcomes = decision.reading.outcomes if decision.reading is not None else None
        for node in outcomes.new if outcomes is not None else ():
            since = parse_time(records[node].since) if node in records else None
            if since is not None:
                self.metrics.drain_finished(ns, name, uid, DRAIN_TIMED_OUT, (inp.now - since).total_seconds())
        if acted is None:
            return
        for _, seconds in acted.drained:
            if seconds is not None:
                self.metrics.drain_finished(ns, name, uid, DRAIN_DRAINED, seconds)
        if acted.refused_evictions:
            self.metrics.eviction_refused(ns, name, uid, acted.refused_evictions)

    def _finalizing(self, key: str) -> bool:
        """A DaemonJob with node maintenance's finalizer that is being deleted, or that no longer
        asks for maintenance: every node still carrying its record is released, then the
        finalizer goes. True when the pass is this and nothing else."""
        cached = self.daemonjobs.store.get(key)
        if cached is None or not has_finalizer(cached):
            return False
        meta = cached["metadata"]
        deleting = bool(meta.get("deletionTimestamp"))
        records = self._records(meta.get("uid") or "")
        if not deleting and (wants_maintenance(cached.get("spec")) or records):
            return False  # the decision releases what it holds, as the spec says
        if self.node_control is None:
            return False
        rlog = log.bind(namespace=meta.get("namespace"), name=meta.get("name"))
        errors: list[Exception] = []
        for release in releases_on_delete(records):
            try:
                done = release_node(self.node_control, release.node, release.record)
            except ApiError as exc:
                errors.append(exc)
                continue
            if done is not None:
                rlog.info("node released", node=release.node, uncordoned=done, why=release.why)
                event = released_event(release, done)
                self.control.record_event(cached, event.type, event.reason, event.message)
        if errors:
            raise ReconcileError(errors)
        finalizers = [f for f in meta.get("finalizers") or () if f != FINALIZER]
        self.node_control.set_finalizers(
            meta.get("namespace") or "", meta.get("name") or "", finalizers, meta.get("resourceVersion") or ""
        )
        rlog.info("node maintenance finalizer removed", released=len(records))
        return deleting

    def _decide(self, key: str, inp: DecisionInput) -> Decision:
        """The pass's one decision, its CPU time kept for the node-join figures."""
        started = time.thread_time()  # CPU, not wall: other threads hold the GIL at times
        decision = decide(inp)
        self.router.decided(key, time.thread_time() - started)
        return decision

    def _self_check(self, seen: Observation, kept: Decision) -> tuple[Decision, bool]:
        """The kept plan's decision against one from scratch, in a pass that had nothing to do
        (so a check never delays a create), compared without acting on either: a difference is
        a bug, logged, counted and repaired (the plan is loaded whole, and the DaemonJob passed
        over again at once), unless an event marked the DaemonJob's nodes between the two reads
        (the full plan read newer caches: checked again at a later pass). Returns the decision
        to report and whether it was repaired."""
        assert kept.reading is not None
        full = decide(dataclasses.replace(kept.reading.input, plan=self.observer.full_plan(seen)))
        self.metrics.plan_checks.inc()
        same = (
            kept.status == full.status
            and kept.deletes == full.deletes
            and [(c.node, c.name) for c in kept.creates] == [(c.node, c.name) for c in full.creates]
        )
        if same:
            return kept, False
        if self.plans.marked(seen.uid):  # a Job or node changed between the two reads: not a difference
            seen.log.debug("plan self-check inconclusive: the caches changed in between; checked again soon")
            self.plans.check_soon(seen.uid)
            return kept, False
        self.metrics.plan_differences.inc()
        seen.log.warning(
            "the kept plan differed from a full one; repaired",
            kept={k: kept.status.get(k) for k in NODE_COUNT_FIELDS},
            full={k: full.status.get(k) for k in NODE_COUNT_FIELDS},
            creates=(len(kept.creates), len(full.creates)),
            deletes=(len(kept.deletes), len(full.deletes)),
        )
        self.plans.reload(seen.uid)
        return full, True

    def _next_tick(self, decision: Decision) -> float | None:
        """Seconds to the schedule's next tick (no polling in between)."""
        if decision.requeue_at is None:
            return None
        delay = (decision.requeue_at - self.clock.wall()).total_seconds()
        return max(0.0, delay) + defaults.SCHEDULE_REQUEUE_SLACK

    def _look_again(self, key: str, delays: list[float | None]) -> None:
        """The one place a pass schedules the next: at the earliest of what its steps wait for
        (the cache's deadline, a held Job name, the next tick, a name conflict, a repair)."""
        wanted = [d for d in delays if d is not None]
        if wanted:
            self.queue.add_after(key, min(wanted))

    # -- for tests and tools ---------------------------------------------------------------
    def decide_seconds(self, key: str) -> float:
        return self.router.decide_seconds(key)
