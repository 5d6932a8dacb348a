"""The controller's Prometheus metrics, in one registry per controller instance."""

from __future__ import annotations

import platform
import threading

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from daemonjob import __version__
from daemonjob.machinery.workqueue import PrometheusMetricsProvider

NODE_STATES = ("desired", "active", "succeeded", "failed", "pending")
STATUS_FIELDS = {"desired": "desiredNodes", "active": "activeNodes", "succeeded": "succeededNodes",
                 "failed": "failedNodes", "pending": "pendingNodes"}


class Metrics:
    def __init__(self, registry: CollectorRegistry | None = None):
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.reconciles = Counter("daemonjob_reconcile_total", "Reconciles by result.", ["result"], registry=r)
        self.reconcile_seconds = Histogram(
            "daemonjob_reconcile_duration_seconds", "Time spent in one reconcile.", registry=r,
            buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30))
        self.jobs_created = Counter("daemonjob_jobs_created_total", "Jobs created.", registry=r)
        self.jobs_deleted = Counter("daemonjob_jobs_deleted_total", "Jobs deleted, by reason.", ["reason"], registry=r)
        self.job_create_errors = Counter("daemonjob_job_create_errors_total", "Job creates the API server refused.",
                                         registry=r)
        self.api_requests = Counter("daemonjob_api_requests_total", "Kubernetes API requests by verb, resource "
                                    "and HTTP code (0: no answer).", ["verb", "resource", "code"], registry=r)
        self.watch_restarts = Counter("daemonjob_watch_restarts_total", "Watches restarted, by informer and cause.",
                                      ["informer", "cause"], registry=r)
        self.lists = Counter("daemonjob_lists_total", "Full lists, by informer.", ["informer"], registry=r)
        self.relists = Counter("daemonjob_relists_total", "Lists after the first (410 Gone, errors), by informer.",
                               ["informer"], registry=r)
        self.nodes = Gauge("daemonjob_nodes", "Nodes of a DaemonJob by state, from its status.",
                           ["namespace", "name", "state"], registry=r)
        self.leader = Gauge("daemonjob_leader", "1 while this process is the leader.", registry=r)
        self.build_info = Gauge("daemonjob_build_info", "Build information.", ["version", "python_version"],
                                registry=r)
        self.build_info.labels(__version__, platform.python_version()).set(1)
        self.queue_provider = PrometheusMetricsProvider(registry=r)
        self._dj_lock = threading.Lock()
        self._known: set[tuple[str, str]] = set()

    def on_request(self, verb: str, resource: str, code: int) -> None:
        self.api_requests.labels(verb, resource, str(code)).inc()

    def on_watch_restart(self, informer: str, cause: str) -> None:
        self.watch_restarts.labels(informer, cause).inc()

    def on_list(self, informer: str) -> None:
        self.lists.labels(informer).inc()

    def on_relist(self, informer: str) -> None:
        self.relists.labels(informer).inc()

    def set_status(self, namespace: str, name: str, status: dict) -> None:
        with self._dj_lock:
            self._known.add((namespace, name))
            for state, fld in STATUS_FIELDS.items():
                self.nodes.labels(namespace, name, state).set(status.get(fld, 0) or 0)

    def forget(self, namespace: str, name: str) -> None:
        """Drop a deleted DaemonJob's series, so dashboards do not show ghosts."""
        with self._dj_lock:
            if (namespace, name) not in self._known:
                return
            self._known.discard((namespace, name))
            for state in NODE_STATES:
                try:
                    self.nodes.remove(namespace, name, state)
                except KeyError:
                    pass
