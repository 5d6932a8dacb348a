"""The controller's Prometheus metrics, in one registry per controller instance."""

from __future__ import annotations

import platform
import threading
import time
from collections.abc import Callable
from datetime import datetime

from cachetools import TTLCache
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from daemonjob import __version__
from daemonjob.controller.metrics.gates import GateWaits
from daemonjob.controller.metrics.health import HealthMetrics
from daemonjob.controller.metrics.limiter import limiter_wait_histogram
from daemonjob.domain.decision.decide import NODE_COUNT_FIELDS
from daemonjob.domain.gates import GATES, gate_in_force
from daemonjob.domain.schedule.runs import SKIP_DEADLINE, SKIP_FORBID, SKIP_MISSED, SKIP_SUSPENDED
from daemonjob.domain.shared.timestamps import parse_time
from daemonjob.domain.spec.spec import DaemonJobSpec
from daemonjob.domain.spec.validate import read_spec
from daemonjob.machinery.queue.queuemetrics import PrometheusMetricsProvider

SKIP_REASONS = (SKIP_FORBID, SKIP_DEADLINE, SKIP_MISSED, SKIP_SUSPENDED)
RUN_RESULTS = ("succeeded", "failed")
NODE_STATES = ("desired", "active", "succeeded", "failed", "pending")
STATUS_FIELDS = dict(zip(NODE_STATES, NODE_COUNT_FIELDS, strict=True))  # the node_states label -> its status field
DRAIN_DRAINED, DRAIN_TIMED_OUT = "drained", "timed_out"
DRAIN_RESULTS = (DRAIN_DRAINED, DRAIN_TIMED_OUT)
# A drain ends within its timeout (spec.nodeMaintenance.drain.timeout, default 10m): buckets
# from seconds to the hours a long timeout allows.
DRAIN_BUCKETS = (5, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200)
# A reconcile in flight when its DaemonJob is deleted must not bring the series back: the
# uids of deleted DaemonJobs are remembered this long (seconds), far beyond any reconcile.
FORGOTTEN_TTL = 3600.0
FORGOTTEN_MAX = 100_000


class Metrics:
    def __init__(self, registry: CollectorRegistry | None = None, timer: Callable[[], float] = time.monotonic):
        """`timer`: the monotonic clock the time waiting at a gate is counted with."""
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.reconciles = Counter("daemonjob_reconcile_total", "Reconciles by result.", ["result"], registry=r)
        self.reconcile_seconds = Histogram(
            "daemonjob_reconcile_duration_seconds",
            "Time spent in one reconcile.",
            registry=r,
            buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
        )
        self.jobs_created = Counter("daemonjob_jobs_created_total", "Jobs created.", registry=r)
        self.turn_seals_broken = Counter(
            "daemonjob_turn_seals_broken_total",
            "Job events carrying a checked turn's boot ID or verdict whose seal does not verify (ignored).",
            ["record"],
            registry=r,
        )
        self.jobs_deleted = Counter("daemonjob_jobs_deleted_total", "Jobs deleted, by reason.", ["reason"], registry=r)
        self.jobs_deleted_unrecorded = Counter(
            "daemonjob_jobs_deleted_unrecorded_total",
            "Finished Jobs beyond historyLimit deleted before their results were recorded (--history-result-wait).",
            registry=r,
        )
        self.job_create_errors = Counter(
            "daemonjob_job_create_errors_total", "Job creates the API server refused.", registry=r
        )
        self.api_requests = Counter(
            "daemonjob_api_requests_total",
            "Kubernetes API requests by verb, resource and HTTP code (0: no answer).",
            ["verb", "resource", "code"],
            registry=r,
        )
        self.watch_restarts = Counter(
            "daemonjob_watch_restarts_total",
            "Watches restarted, by informer and cause.",
            ["informer", "cause"],
            registry=r,
        )
        self.foreign_owner_jobs = Counter(
            "daemonjob_foreign_owner_jobs_total",
            "Jobs ignored for carrying the uid of a DaemonJob of another namespace (owner references "
            "are namespace-local), by the Job's namespace; each Job counted once.",
            ["namespace"],
            registry=r,
        )
        self.lists = Counter("daemonjob_lists_total", "Full lists, by informer.", ["informer"], registry=r)
        self.relists = Counter(
            "daemonjob_relists_total",
            "Lists after the first (410 Gone, errors), by informer.",
            ["informer"],
            registry=r,
        )
        self.nodes = Gauge(
            "daemonjob_nodes",
            "Nodes of a DaemonJob by state, from its status.",
            ["namespace", "name", "state"],
            registry=r,
        )
        self.leader = Gauge("daemonjob_leader", "1 while this process is the leader.", registry=r)
        self.build_info = Gauge("daemonjob_build_info", "Build information.", ["version", "python_version"], registry=r)
        self.build_info.labels(__version__, platform.python_version()).set(1)
        per_dj = ["namespace", "name"]
        self.runs_started = Counter(
            "daemonjob_runs_started_total", "Runs started (scheduled ticks and run-now).", per_dj, registry=r
        )
        self.runs_skipped = Counter(
            "daemonjob_runs_skipped_total", "Scheduled ticks skipped, by reason.", [*per_dj, "reason"], registry=r
        )
        self.runs_finished = Counter(
            "daemonjob_runs_finished_total",
            "Runs finished, by result (succeeded, failed).",
            [*per_dj, "result"],
            registry=r,
        )
        self.next_schedule = Gauge(
            "daemonjob_next_schedule_time_seconds", "Unix time of the next scheduled tick.", per_dj, registry=r
        )
        self.rollout_gate = Gauge(
            "daemonjob_rollout_gate",
            "1 for the rollout gate (spec.rollout) holding new nodes back, 0 for the others.",
            [*per_dj, "gate"],
            registry=r,
        )
        self.gate_waits = GateWaits(r, timer)  # daemonjob_rollout_gate_wait_seconds_total
        self.cluster_unavailable = Gauge(
            "daemonjob_cluster_unavailable_nodes",
            "Nodes of the cluster unschedulable or NotReady, whoever did it, with this controller's "
            "cordons in flight: what the cluster disruption budget counts.",
            registry=r,
        )
        self.cluster_unavailable_limit = Gauge(
            "daemonjob_cluster_unavailable_nodes_limit",
            "--max-unavailable-nodes as a number of nodes: no cordon while daemonjob_cluster_unavailable_nodes "
            "is at or above it (-1: no limit).",
            registry=r,
        )
        self.last_success = Gauge(
            "daemonjob_last_successful_time_seconds",
            "Unix time the last run reached Complete: alert when it is older than a day.",
            per_dj,
            registry=r,
        )
        self.expectations_overdue = Gauge(
            "daemonjob_expectations_pending_overdue",
            "Job creates and deletes of this controller that the cache "
            "has not shown past their deadline (the Reconciling condition of their DaemonJob names them).",
            registry=r,
        )
        self.expectation_checks = Counter(
            "daemonjob_expectation_checks_total",
            "Overdue expectations checked against the API server, by outcome "
            "(cleared: the cache agreed; waiting: the cache is behind).",
            ["outcome"],
            registry=r,
        )
        self.jobs_rerun = Counter(
            "daemonjob_jobs_rerun_total",
            "Jobs created for a node whose earlier Job of the same revision and run was deleted, "
            "or failed with spec.retry retries left (the next attempt, under a name of its own).",
            registry=r,
        )
        self.plan_checks = Counter(
            "daemonjob_plan_self_checks_total",
            "Comparisons of a DaemonJob's kept plan with one made from scratch.",
            registry=r,
        )
        self.plan_differences = Counter(
            "daemonjob_plan_self_check_differences_total",
            "Kept plans found to differ from one made from scratch (each repaired).",
            registry=r,
        )
        # spec.nodeMaintenance: what the controller holds out of service, and its drains
        self.nodes_cordoned = Gauge(
            "daemonjob_nodes_cordoned",
            "Nodes the controller holds cordoned for a DaemonJob (spec.nodeMaintenance).",
            per_dj,
            registry=r,
        )
        self.cordoned_oldest = Gauge(
            "daemonjob_node_cordoned_oldest_timestamp_seconds",
            "Unix time since which the longest-held node cordoned for a DaemonJob is cordoned; 0 when it holds none.",
            per_dj,
            registry=r,
        )
        self.drain_seconds = Histogram(
            "daemonjob_drain_duration_seconds",
            "Time a node's drain took, by result (drained, timed_out).",
            [*per_dj, "result"],
            buckets=DRAIN_BUCKETS,
            registry=r,
        )
        self.evictions_refused = Counter(
            "daemonjob_evictions_refused_total",
            "Evictions refused by a PodDisruptionBudget (HTTP 429) while draining a DaemonJob's nodes.",
            per_dj,
            registry=r,
        )
        self.orphaned_records_released = Counter(
            "daemonjob_orphaned_node_records_released",
            "Node maintenance records released because the DaemonJob they name (by uid) no longer exists.",
            registry=r,
        )
        self.queue_provider = PrometheusMetricsProvider(registry=r)
        self.health = HealthMetrics(r)  # conditions, last progress, schedule ticks: what alerts read
        self.limiter_wait = limiter_wait_histogram(r)
        self._dj_lock = threading.Lock()
        self._known: set[tuple[str, str]] = set()
        self._forgotten: TTLCache[str, bool] = TTLCache(FORGOTTEN_MAX, FORGOTTEN_TTL)

    def on_request(self, verb: str, resource: str, code: int) -> None:
        self.api_requests.labels(verb, resource, str(code)).inc()

    def on_watch_restart(self, informer: str, cause: str) -> None:
        self.watch_restarts.labels(informer, cause).inc()

    def on_list(self, informer: str) -> None:
        self.lists.labels(informer).inc()

    def on_relist(self, informer: str) -> None:
        self.relists.labels(informer).inc()

    def set_status(self, namespace: str, name: str, uid: str, status: dict) -> None:
        with self._dj_lock:
            if uid in self._forgotten:
                return  # deleted while this reconcile ran: its series are gone and stay gone
            self._known.add((namespace, name))
            for gauge, fld in ((self.next_schedule, "nextScheduleTime"), (self.last_success, "lastSuccessfulTime")):
                when = parse_time(status.get(fld))
                if when is not None:
                    gauge.labels(namespace, name).set(when.timestamp())
                else:  # no schedule any more, or suspended: no stale next tick to alert on
                    _remove_series(gauge, namespace, name)
            for state, fld in STATUS_FIELDS.items():
                self.nodes.labels(namespace, name, state).set(status.get(fld, 0) or 0)
            held = gate_in_force(status)
            for gate in GATES:
                self.rollout_gate.labels(namespace, name, gate).set(1 if held is not None and held[0] == gate else 0)
            self.gate_waits.observe(namespace, name, held[0] if held is not None else None)

    def observe_health(self, dj: dict, status: dict, now: datetime, spec: DaemonJobSpec | None = None) -> None:
        """The series alerts read (see healthmetrics), and the run counters of a scheduled or
        run-now DaemonJob at zero, so that rates and dashboards start from its first run;
        nothing for a DaemonJob already deleted."""
        meta = dj.get("metadata") or {}
        namespace, name = meta.get("namespace") or "", meta.get("name") or ""
        with self._dj_lock:
            if (meta.get("uid") or "") in self._forgotten:
                return
            self._known.add((namespace, name))
            spec = spec if spec is not None else read_spec(dj)
            self.health.observe(dj, status, now, spec)
            if spec.runs.expression or status.get("currentRun"):
                self.runs_started.labels(namespace, name)
                for reason in SKIP_REASONS:
                    self.runs_skipped.labels(namespace, name, reason)
                for result in RUN_RESULTS:
                    self.runs_finished.labels(namespace, name, result)

    def count_runs(
        self, namespace: str, name: str, uid: str, started: bool, skipped: list[tuple[str, int]], finished: str | None
    ) -> None:
        """Runs started, ticks skipped, a run finished; nothing for a DaemonJob already deleted."""
        with self._dj_lock:
            if uid in self._forgotten:
                return
            self._known.add((namespace, name))
            if started:
                self.runs_started.labels(namespace, name).inc()
            for reason, count in skipped:
                self.runs_skipped.labels(namespace, name, reason).inc(count)
            if finished is not None:
                self.runs_finished.labels(namespace, name, finished).inc()

    def maintenance_observed(
        self, namespace: str, name: str, uid: str, cordoned: int, oldest_cordon: float | None
    ) -> None:
        """The nodes a DaemonJob with spec.nodeMaintenance holds cordoned now, and since when
        (Unix time) the longest-held one is (None: none); its drain and eviction series start
        at zero here, so that rates count from the first drain. Nothing for a DaemonJob
        already deleted."""
        with self._dj_lock:
            if uid in self._forgotten:
                return
            self._known.add((namespace, name))
            self.nodes_cordoned.labels(namespace, name).set(cordoned)
            self.cordoned_oldest.labels(namespace, name).set(oldest_cordon if cordoned and oldest_cordon else 0)
            self.evictions_refused.labels(namespace, name)
            for result in DRAIN_RESULTS:
                self.drain_seconds.labels(namespace, name, result)

    def drain_finished(self, namespace: str, name: str, uid: str, result: str, seconds: float) -> None:
        """A node's drain ended: `result` drained (every pod gone) or timed_out."""
        if result not in DRAIN_RESULTS:
            raise ValueError(f"drain result {result!r} is not one of {DRAIN_RESULTS}")
        with self._dj_lock:
            if uid in self._forgotten:
                return
            self._known.add((namespace, name))
            self.drain_seconds.labels(namespace, name, result).observe(max(0.0, seconds))

    def eviction_refused(self, namespace: str, name: str, uid: str, count: int = 1) -> None:
        """Evictions of a drain answered 429 (a PodDisruptionBudget allows no disruption now)."""
        with self._dj_lock:
            if uid in self._forgotten:
                return
            self._known.add((namespace, name))
            self.evictions_refused.labels(namespace, name).inc(count)

    def foreign_job_seen(self, namespace: str) -> None:
        """A Job in `namespace` carrying the uid of a DaemonJob of another namespace (ownership.py)."""
        self.foreign_owner_jobs.labels(namespace=namespace).inc()

    def forget(self, namespace: str, name: str, uid: str) -> None:
        """Drop a deleted DaemonJob's series, so dashboards do not show ghosts, and keep them
        dropped: a reconcile of it still in flight writes nothing more."""
        with self._dj_lock:
            if uid:
                self._forgotten[uid] = True
            self.health.forget(namespace, name)
            self.gate_waits.forget(namespace, name)
            if (namespace, name) not in self._known:
                return
            self._known.discard((namespace, name))
            for state in NODE_STATES:
                try:
                    self.nodes.remove(namespace, name, state)
                except KeyError:
                    pass
            _remove_series(self.runs_started, namespace, name)
            _remove_series(self.runs_skipped, namespace, name, SKIP_REASONS)
            _remove_series(self.runs_finished, namespace, name, RUN_RESULTS)
            _remove_series(self.next_schedule, namespace, name)
            _remove_series(self.last_success, namespace, name)
            _remove_series(self.rollout_gate, namespace, name, GATES)
            _remove_series(self.nodes_cordoned, namespace, name)
            _remove_series(self.cordoned_oldest, namespace, name)
            _remove_series(self.drain_seconds, namespace, name, DRAIN_RESULTS)
            _remove_series(self.evictions_refused, namespace, name)


def _remove_series(family: Counter | Gauge | Histogram, namespace: str, name: str, *extra: tuple[str, ...]) -> None:
    """Drop one DaemonJob's series; `extra` lists the values of a family's further label."""
    for values in extra[0] if extra else [()]:
        try:
            family.remove(namespace, name, *((values,) if isinstance(values, str) else values))
        except KeyError:
            pass
