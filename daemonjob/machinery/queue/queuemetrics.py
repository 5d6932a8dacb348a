"""The work queue's metrics, with client-go's workqueue metric names (depth, adds, latency...).

A queue takes a MetricsProvider; without one (or without a name) it keeps no metrics.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Hashable
from typing import Any, Protocol

from daemonjob.machinery.process.clock import Clock

__all__ = [
    "GaugeMetric",
    "SettableGaugeMetric",
    "CounterMetric",
    "HistogramMetric",
    "MetricsProvider",
    "NoopMetricsProvider",
    "PrometheusMetricsProvider",
    "QueueMetrics",
    "NoQueueMetrics",
]


class GaugeMetric(Protocol):
    def inc(self) -> None: ...
    def dec(self) -> None: ...


class SettableGaugeMetric(Protocol):
    def set(self, value: float) -> None: ...


class CounterMetric(Protocol):
    def inc(self) -> None: ...


class HistogramMetric(Protocol):
    def observe(self, value: float) -> None: ...


class MetricsProvider(Protocol):
    """Creates the per-queue metrics; one call per metric per named queue."""

    def new_depth_metric(self, name: str) -> GaugeMetric: ...
    def new_adds_metric(self, name: str) -> CounterMetric: ...
    def new_latency_metric(self, name: str) -> HistogramMetric: ...
    def new_work_duration_metric(self, name: str) -> HistogramMetric: ...
    def new_unfinished_work_seconds_metric(self, name: str) -> SettableGaugeMetric: ...
    def new_longest_running_processor_seconds_metric(self, name: str) -> SettableGaugeMetric: ...
    def new_retries_metric(self, name: str) -> CounterMetric: ...


class _NoopMetric:
    def inc(self) -> None:
        pass

    def dec(self) -> None:
        pass

    def set(self, value: float) -> None:
        pass

    def observe(self, value: float) -> None:
        pass


_NOOP_METRIC = _NoopMetric()


class NoopMetricsProvider:
    """Default provider: queues cost nothing extra unless metrics are asked for."""

    def new_depth_metric(self, name: str) -> GaugeMetric:
        return _NOOP_METRIC

    def new_adds_metric(self, name: str) -> CounterMetric:
        return _NOOP_METRIC

    def new_latency_metric(self, name: str) -> HistogramMetric:
        return _NOOP_METRIC

    def new_work_duration_metric(self, name: str) -> HistogramMetric:
        return _NOOP_METRIC

    def new_unfinished_work_seconds_metric(self, name: str) -> SettableGaugeMetric:
        return _NOOP_METRIC

    def new_longest_running_processor_seconds_metric(self, name: str) -> SettableGaugeMetric:
        return _NOOP_METRIC

    def new_retries_metric(self, name: str) -> CounterMetric:
        return _NOOP_METRIC


# 10ns .. 1000s, as controller-runtime registers them.
_DURATION_BUCKETS = tuple(1e-8 * 10**i for i in range(12))


class _PrometheusFamilies:
    """The metric families of one registry; a registry refuses a name registered twice."""

    def __init__(self, registry: Any) -> None:
        from prometheus_client import Counter, Gauge, Histogram

        labels = ["name"]
        self.depth = Gauge("workqueue_depth", "Current depth of workqueue", labels, registry=registry)
        self.adds = Counter(
            "workqueue_adds_total",
            "Total number of adds handled by workqueue",
            labels,
            registry=registry,
        )
        self.latency = Histogram(
            "workqueue_queue_duration_seconds",
            "How long in seconds an item stays in workqueue before being requested",
            labels,
            buckets=_DURATION_BUCKETS,
            registry=registry,
        )
        self.work_duration = Histogram(
            "workqueue_work_duration_seconds",
            "How long in seconds processing an item from workqueue takes",
            labels,
            buckets=_DURATION_BUCKETS,
            registry=registry,
        )
        self.unfinished_work = Gauge(
            "workqueue_unfinished_work_seconds",
            "How many seconds of work has been done that is in progress and hasn't been "
            "observed by work_duration. Large values indicate stuck threads.",
            labels,
            registry=registry,
        )
        self.longest_running = Gauge(
            "workqueue_longest_running_processor_seconds",
            "How many seconds has the longest running processor for workqueue been running",
            labels,
            registry=registry,
        )
        self.retries = Counter(
            "workqueue_retries_total",
            "Total number of retries handled by workqueue",
            labels,
            registry=registry,
        )


_families_lock = threading.Lock()
_families_by_registry: weakref.WeakKeyDictionary[Any, _PrometheusFamilies] = weakref.WeakKeyDictionary()


def _families_for(registry: Any) -> _PrometheusFamilies:
    with _families_lock:
        families = _families_by_registry.get(registry)
        if families is None:
            families = _PrometheusFamilies(registry)
            _families_by_registry[registry] = families
        return families


class PrometheusMetricsProvider:
    """Exposes client-go's `workqueue_*` metrics, labelled by queue name."""

    def __init__(self, registry: Any = None) -> None:
        if registry is None:
            from prometheus_client import REGISTRY

            registry = REGISTRY
        self._families = _families_for(registry)

    def new_depth_metric(self, name: str) -> GaugeMetric:
        return self._families.depth.labels(name=name)

    def new_adds_metric(self, name: str) -> CounterMetric:
        return self._families.adds.labels(name=name)

    def new_latency_metric(self, name: str) -> HistogramMetric:
        return self._families.latency.labels(name=name)

    def new_work_duration_metric(self, name: str) -> HistogramMetric:
        return self._families.work_duration.labels(name=name)

    def new_unfinished_work_seconds_metric(self, name: str) -> SettableGaugeMetric:
        return self._families.unfinished_work.labels(name=name)

    def new_longest_running_processor_seconds_metric(self, name: str) -> SettableGaugeMetric:
        return self._families.longest_running.labels(name=name)

    def new_retries_metric(self, name: str) -> CounterMetric:
        return self._families.retries.labels(name=name)


class QueueMetrics:
    """Turns queue events into metric updates; always called under the queue lock."""

    def __init__(self, provider: MetricsProvider, name: str, clock: Clock) -> None:
        self._clock = clock
        self._depth = provider.new_depth_metric(name)
        self._adds = provider.new_adds_metric(name)
        self._latency = provider.new_latency_metric(name)
        self._work_duration = provider.new_work_duration_metric(name)
        self._unfinished_work = provider.new_unfinished_work_seconds_metric(name)
        self._longest_running = provider.new_longest_running_processor_seconds_metric(name)
        self._retries = provider.new_retries_metric(name)
        self._added_at: dict[Hashable, float] = {}
        self._processing_since: dict[Hashable, float] = {}

    def add(self, key: Hashable) -> None:
        self._adds.inc()
        self._depth.inc()
        self._added_at.setdefault(key, self._clock.now())

    def get(self, key: Hashable) -> None:
        now = self._clock.now()
        self._depth.dec()
        self._processing_since[key] = now
        added = self._added_at.pop(key, None)
        if added is not None:
            self._latency.observe(now - added)

    def done(self, key: Hashable) -> None:
        started = self._processing_since.pop(key, None)
        if started is not None:
            self._work_duration.observe(self._clock.now() - started)

    def retry(self) -> None:
        self._retries.inc()

    def update_unfinished_work(self) -> None:
        now = self._clock.now()
        total = 0.0
        oldest = 0.0
        for started in self._processing_since.values():
            age = now - started
            total += age
            oldest = max(oldest, age)
        self._unfinished_work.set(total)
        self._longest_running.set(oldest)


class NoQueueMetrics:
    """Used for unnamed queues and the no-op provider: skips the bookkeeping too."""

    def add(self, key: Hashable) -> None:
        pass

    def get(self, key: Hashable) -> None:
        pass

    def done(self, key: Hashable) -> None:
        pass

    def retry(self) -> None:
        pass

    def update_unfinished_work(self) -> None:
        pass
