"""The DaemonJob controller: informers feed a rate-limited queue; workers pass over DaemonJobs.

Data flows one way: watch -> cache -> queue -> decide (pure) -> act -> report. Event
routing (routing.py) only notes and enqueues; a pass over one DaemonJob (onepass.py) reads one
way, step by step, as the DaemonSet controller's syncDaemonSet does.

The controller receives what it reads (Informers), what it writes through (a JobControl)
and one Clock, so all of it runs in unit tests without a cluster.

Each DaemonJob's plan is kept across passes and told which nodes changed (keptplans.py);
every PLAN_SELF_CHECK_INTERVAL a pass also decides from scratch and compares (selfcheck.py).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from daemonjob import defaults
from daemonjob.controller.metrics.metrics import Metrics
from daemonjob.controller.nodework.heldnodes import register_held_nodes
from daemonjob.controller.nodework.maintenance import NodeMaintenance
from daemonjob.controller.nodework.nodecontrol import KubeNodeControl, NodeControl
from daemonjob.controller.nodework.options import NodeMaintenanceOptions
from daemonjob.controller.nodework.orphans import SWEEP_KEY, orphan_sweep
from daemonjob.controller.nodework.turnchecks import TurnChecks
from daemonjob.controller.order.claims import NodeClaims
from daemonjob.controller.order.index import OrderIndex
from daemonjob.controller.order.reader import OrderReader
from daemonjob.controller.passes.act import Act
from daemonjob.controller.passes.adoption import Adoption
from daemonjob.controller.passes.alertpoller import AlertPoller, HttpGet
from daemonjob.controller.passes.deletedjobs import DeletedJobsSeen
from daemonjob.controller.passes.history import HistoryCleaner
from daemonjob.controller.passes.observe import Observer
from daemonjob.controller.passes.report import Reporter
from daemonjob.controller.passes.selfcheck import PlanSelfCheck
from daemonjob.controller.passes.troubles import Troubles
from daemonjob.controller.results.status import recorded_success, recorder_for, wire_recorded
from daemonjob.controller.results.store import KubeResultStore, ResultStore
from daemonjob.controller.runtime.backpressure import CreateBackPressure
from daemonjob.controller.runtime.configmaps import (
    ConfigMapLimits,
    ConfigMapTracker,
    InformerFactory,
    kube_configmap_informer,
)
from daemonjob.controller.runtime.errors import ReconcileError
from daemonjob.controller.runtime.events import EventRecorder
from daemonjob.controller.runtime.expectations import Expectations
from daemonjob.controller.runtime.fence import Fence, always
from daemonjob.controller.runtime.informers import Informers
from daemonjob.controller.runtime.jobcontrol import JobControl, KubeJobControl
from daemonjob.controller.runtime.keptplans import KeptPlans
from daemonjob.controller.runtime.ownership import ForeignJobs
from daemonjob.controller.runtime.specs import SpecCache
from daemonjob.controller.runtime.turnseal import TurnSeal, broken_reporter
from daemonjob.controller.wiring.onepass import OnePass
from daemonjob.controller.wiring.routing import Router, job_event_delay, owner_key
from daemonjob.controller.wiring.workers import Workers
from daemonjob.machinery.cache.informer import InformerHooks
from daemonjob.machinery.cache.memo import ObjectMemo
from daemonjob.machinery.client.kube import Kube
from daemonjob.machinery.client.writers import WriterPool
from daemonjob.machinery.process.clock import Clock, RealClock
from daemonjob.machinery.queue.ratelimit import default_controller_rate_limiter
from daemonjob.machinery.queue.workqueue import RateLimitingQueue

__all__ = ["Controller", "job_event_delay", "owner_key", "ReconcileError"]


class Controller(OnePass):
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
        node_maintenance: NodeMaintenanceOptions | None = None,
        result_store: ResultStore | None = None,
        result_chunk_bytes: int = defaults.RESULT_CHUNK_BYTES,
        history_result_wait: float = defaults.HISTORY_RESULT_WAIT,
        expectations: Expectations | None = None,
    ):
        """`configmap_informers` makes the informer of one ConfigMap (namespace, name), for
        DaemonJobs with rerunOnConfigChange; without it their ConfigMaps are not read.
        `prometheus_url`: where the firing alerts are read for spec.rollout.haltOnAlerts (without
        it a DaemonJob with haltOnAlerts halts, AlertsUnknown); `prometheus_get` replaces the HTTP GET.
        `node_control`: what node maintenance writes through (Nodes, evictions, the finalizer);
        `node_maintenance`: where it may be used, the disruption budget every cordon keeps, what
        stops cordons; with it the orphan sweep (orphans.py) runs at start-up and after each
        DaemonJob deleted;
        `result_store`: where each node's result is recorded (results.py); without it, nowhere;
        `history_result_wait`: how long history cleanup holds a Job whose result is not recorded;
        `expectations`: replaces the default ones (tests give a short TTL and deadline)."""
        self.informers = informers
        self.control = control
        self.clock = clock or RealClock()
        self.metrics = metrics or Metrics()
        self.workers = workers
        # keyed by DaemonJob uid
        self.expectations = expectations if expectations is not None else Expectations(timer=self.clock.now)
        self.deleted_jobs = DeletedJobsSeen(timer=self.clock.now)  # keyed by DaemonJob uid
        self.metrics.expectations_overdue.set_function(self.expectations.overdue)
        self.queue = RateLimitingQueue(
            default_controller_rate_limiter(self.clock),
            name="daemonjob",
            clock=self.clock,
            metrics_provider=self.metrics.queue_provider,
        )
        self._writers = WriterPool(create_concurrency, "api-writer")
        self.foreign = ForeignJobs(informers.daemonjobs, self.metrics.foreign_job_seen)  # ownership.py
        self.results = recorder_for(
            result_store, informers, self.queue, self.clock, result_chunk_bytes, self.foreign.foreign
        )
        hold, wait = (self.results.holds if self.results is not None else None), history_result_wait
        self.history = HistoryCleaner(
            control, self.metrics, clock=self.clock, hold=hold, result_wait=wait, wake_after=self.queue.add_after
        )
        self.troubles = Troubles()
        self.adoption = Adoption(control)
        self.specs = SpecCache()  # each DaemonJob's spec as read, per generation
        # DaemonJobs by exclusion group and by what they come after
        self.order_index = OrderIndex(informers.jobs, self.specs)
        self.claims = NodeClaims(informers.daemonjobs, informers.jobs, self.order_index, self.queue.add, self.clock.now)
        self.seal = informers.seal if informers.seal is not None else TurnSeal.random()
        self.seal.broken = broken_reporter(self.metrics.turn_seals_broken)
        self.backpressure = CreateBackPressure(self.expectations.unseen_creates, self.queue.add, self.queue.add_after)
        self.expectations.on_seen = self.backpressure.seen
        self.backpressure.register(self.metrics.registry)
        self.act = Act(
            control,
            self.expectations,
            self.metrics,
            self._writers.map,
            history=self.history,
            adoption=self.adoption,
            troubles=self.troubles,
            claims=self.claims,
            parallel=self._writers.width,
            seal=self.seal.sealed,
            backpressure=self.backpressure,
        )
        make, limits = configmap_informers, configmap_limits
        self.configmaps = None if make is None else ConfigMapTracker(make, self.queue.add, limits)
        self.daemonjobs, self.jobs, self.nodes = informers.daemonjobs, informers.jobs, informers.nodes
        self.memo = ObjectMemo()  # values kept on cached objects; the router sizes it to the node rules in use
        self.plans = KeptPlans(self.jobs, self.nodes, self.memo)
        self.order_reader = OrderReader(self.daemonjobs, self.jobs, self.plans, self.order_index, self.claims)
        self.router = Router(
            informers,
            self.queue,
            expectations=self.expectations,
            deleted_jobs=self.deleted_jobs,
            plans=self.plans,
            metrics=self.metrics,
            configmaps=self.configmaps,
            memo=self.memo,
            forget_uid=self._forget_uid,
            order_index=self.order_index,
            claims=self.claims,
            specs=self.specs,
            foreign=self.foreign,
        )
        self.observer = Observer(
            informers,
            control=control,
            expectations=self.expectations,
            configmaps=self.configmaps,
            metrics=self.metrics,
            clock=self.clock,
            memo=self.memo,
            specs=self.specs,
        )
        self.reporter = Reporter(control, metrics=self.metrics, clock=self.clock)
        options = node_maintenance or NodeMaintenanceOptions()
        self.disruption = options.budget(self.nodes, self.queue.add, self.clock.now)
        self.metrics.cluster_unavailable.set_function(self.disruption.unavailable)
        self.metrics.cluster_unavailable_limit.set_function(self.disruption.limit)
        self.maintenance = NodeMaintenance(
            self.daemonjobs,
            self.nodes,
            self.jobs,
            node_control,
            options,
            reporter=self.reporter,
            metrics=self.metrics,
            clock=self.clock,
            specs=self.specs,
            disruption=self.disruption,
        )
        self.orphans = orphan_sweep(node_control, options.namespaces, informers, self.metrics, options.sweep_namespace)
        register_held_nodes(self.metrics.registry, self.nodes)
        self.turn_checks = TurnChecks(control, node_control, self.seal)  # reboots, health checks (gates/health.py)
        self.self_check = PlanSelfCheck(self.plans, self.observer, self.metrics)
        wake = self.router.order_wakes.done_changed
        wire_recorded(self.results, self.plans, self.observer, self.specs, self.order_reader, wake)
        self.router.recorded_success = recorded_success(self.results)
        self.threads = Workers(
            self.queue,
            lambda key: self.reconcile(key),  # looked up per pass: tests replace it
            self.daemonjobs.store.keys,
            metrics=self.metrics,
            clock=self.clock,
            count=workers,
            resync_interval=resync_interval,
        )
        self.alerts: AlertPoller | None = None
        if prometheus_url:
            self.alerts = AlertPoller(
                prometheus_url,
                self.router.alerts_changed,
                interval=prometheus_poll_interval,
                get=prometheus_get,
                clock=self.clock,
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
        seal: TurnSeal | None = None,
        **kw: Any,
    ) -> Controller:
        """The production wiring: real informers on `kube`, writes through a fenced KubeJobControl."""
        metrics = metrics or Metrics()
        hooks = InformerHooks(
            on_list=metrics.on_list, on_relist=metrics.on_relist, on_watch_restart=metrics.on_watch_restart
        )
        informers = Informers.for_kube(kube, namespace=namespace, hooks=hooks, clock=clock, rng=rng, seal=seal)
        return cls(
            informers,
            KubeJobControl(kube, events, fence),
            metrics=metrics,
            clock=clock,
            configmap_informers=kube_configmap_informer(kube, hooks, clock=clock, rng=rng),
            node_control=KubeNodeControl(kube, fence),
            result_store=KubeResultStore(kube, fence),
            node_maintenance=(kw.pop("node_maintenance", None) or NodeMaintenanceOptions()).swept_in(namespace),
            **kw,
        )

    # -- lifecycle -------------------------------------------------------------------------
    def start_informers(self) -> None:
        self.informers.start()

    def wait_synced(self, timeout: float | None = None) -> bool:
        return self.informers.wait_synced(timeout)

    def synced(self) -> bool:
        return self.informers.synced()

    def start_workers(self) -> None:
        """Only with synced caches: a node missing from the cache would look deleted."""
        if not self.synced():
            raise RuntimeError("start_workers() before the caches synced")
        if self.orphans is not None:
            self.queue.add(SWEEP_KEY)  # records left by a DaemonJob deleted while no controller ran
        self.threads.start([("alerts", self.alerts.run)] if self.alerts is not None else [])
        if self.results is not None:
            self.results.start()

    def stop_workers(self, timeout: float = 30.0) -> bool:
        """Stop taking keys (those still queued are left), then wait up to `timeout` for
        in-flight reconciles; True if all ended. What still runs then is fenced by the caller."""
        return self.threads.stop(timeout, self.alerts.stop if self.alerts is not None else lambda: None)

    def stop(self, timeout: float = 30.0) -> None:
        """Stop the workers, then the informers and the writer pool."""
        self.stop_workers(timeout)
        self.informers.stop()
        if self.configmaps is not None:
            self.configmaps.stop()
        self.history.stop()
        if self.results is not None:
            self.results.stop()
        self._writers.shutdown()

    def healthy(self) -> str | None:
        dead = self.informers.dead() + self.threads.dead()
        dead += [] if self.results is None or self.results.alive() else ["results"]
        return f"threads not running: {', '.join(dead)}" if dead else None

    def ready(self) -> str | None:
        return None if self.synced() else "caches not synced"

    def _forget_uid(self, uid: str) -> None:
        """A DaemonJob deleted or re-created: nothing of the old one carries over."""
        kept = (self.expectations, self.deleted_jobs, self.troubles, self.plans, self.maintenance, self.turn_checks)
        for part in (*kept, self.claims):
            part.forget(uid)
        if self.orphans is not None:
            self.queue.add(SWEEP_KEY)  # whatever it still held on a Node is released
        self.order_index.succeeded.forget(uid)
        if self.results is not None:
            self.results.forget(uid)
