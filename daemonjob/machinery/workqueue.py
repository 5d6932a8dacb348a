"""Reconcile work queues with client-go `util/workqueue` semantics.

The guarantees controllers rely on:
- a key waiting in the queue is held once, however often it is added;
- a key is never handed to two workers at once: added while being processed, it
  is marked dirty and queued again exactly once when the worker calls `done()`;
- failures back off per key (exponentially) and overall (token bucket), so a
  broken object cannot starve the others nor hammer the API server.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import weakref
from collections import deque
from collections.abc import Hashable
from typing import Any, Protocol

from daemonjob import defaults
from daemonjob.machinery.clock import Clock, RealClock
from daemonjob.machinery.ratelimit import TokenBucket

__all__ = [
    "DEFAULT_BASE_DELAY",
    "DEFAULT_MAX_DELAY",
    "DEFAULT_QPS",
    "DEFAULT_BURST",
    "DEFAULT_UNFINISHED_WORK_UPDATE_PERIOD",
    "GaugeMetric",
    "SettableGaugeMetric",
    "CounterMetric",
    "HistogramMetric",
    "MetricsProvider",
    "NoopMetricsProvider",
    "PrometheusMetricsProvider",
    "Queue",
    "DelayingQueue",
    "RateLimiter",
    "ItemExponentialFailureRateLimiter",
    "BucketRateLimiter",
    "MaxOfRateLimiter",
    "default_controller_rate_limiter",
    "RateLimitingQueue",
]

DEFAULT_BASE_DELAY = defaults.QUEUE_BASE_DELAY
DEFAULT_MAX_DELAY = defaults.QUEUE_MAX_DELAY
DEFAULT_QPS = defaults.QUEUE_QPS
DEFAULT_BURST = defaults.QUEUE_BURST
DEFAULT_UNFINISHED_WORK_UPDATE_PERIOD = 0.5

# Beyond this many failures the delay is the cap anyway; bounding the exponent keeps 2**n finite.
_MAX_BACKOFF_EXPONENT = 1023


# --- metrics -----------------------------------------------------------------


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
        self.depth = Gauge(
            "workqueue_depth", "Current depth of workqueue", labels, registry=registry
        )
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
_families_by_registry: weakref.WeakKeyDictionary[Any, _PrometheusFamilies] = (
    weakref.WeakKeyDictionary()
)


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


class _QueueMetrics:
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


class _NoQueueMetrics:
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


# --- queues ------------------------------------------------------------------


class Queue:
    """FIFO of hashable keys with client-go's dirty/processing bookkeeping."""

    def __init__(
        self,
        name: str = "",
        *,
        clock: Clock | None = None,
        metrics_provider: MetricsProvider | None = None,
        unfinished_work_update_period: float = DEFAULT_UNFINISHED_WORK_UPDATE_PERIOD,
    ) -> None:
        self.name = name
        self._clock: Clock = clock if clock is not None else RealClock()
        # One lock for every condition, so the delaying thread can move keys atomically.
        self._lock = threading.Lock()
        self._ready = threading.Condition(self._lock)
        self._ticker = threading.Condition(self._lock)
        self._queue: deque[Hashable] = deque()
        self._dirty: set[Hashable] = set()
        self._processing: set[Hashable] = set()
        self._shutting_down = False
        self._unfinished_work_update_period = unfinished_work_update_period

        provider = metrics_provider if metrics_provider is not None else NoopMetricsProvider()
        if not name or isinstance(provider, NoopMetricsProvider):
            self._metrics: _QueueMetrics | _NoQueueMetrics = _NoQueueMetrics()
        else:
            self._metrics = _QueueMetrics(provider, name, self._clock)
            threading.Thread(
                target=self._update_unfinished_work_loop,
                name=f"workqueue-metrics-{name}",
                daemon=True,
            ).start()

    def add(self, key: Hashable) -> None:
        """Queue `key` unless it is already waiting; ignored once shutting down."""
        with self._lock:
            self._add_locked(key)

    def _add_locked(self, key: Hashable) -> None:
        if self._shutting_down or key in self._dirty:
            return
        self._metrics.add(key)
        self._dirty.add(key)
        if key in self._processing:
            # Re-queued by done(), so no second worker sees it meanwhile.
            return
        self._queue.append(key)
        self._ready.notify()

    def get(self) -> tuple[Hashable | None, bool]:
        """Block until a key is ready; returns (key, False), or (None, True) after shutdown.

        Keys still queued at shutdown are handed out first, so work accepted
        before shutdown is not silently dropped.
        """
        with self._lock:
            while not self._queue and not self._shutting_down:
                self._ready.wait()
            if not self._queue:
                return None, True
            key = self._queue.popleft()
            self._metrics.get(key)
            self._processing.add(key)
            self._dirty.discard(key)
            return key, False

    def done(self, key: Hashable) -> None:
        """Mark `key` processed; re-queue it if it was added while being processed."""
        with self._lock:
            self._metrics.done(key)
            self._processing.discard(key)
            if key in self._dirty:
                self._queue.append(key)
                self._ready.notify()

    def __len__(self) -> int:
        """Keys ready to be handed out (not those being processed or delayed)."""
        with self._lock:
            return len(self._queue)

    def shutdown(self) -> None:
        """Stop accepting keys and wake every blocked `get()`."""
        with self._lock:
            self._shutting_down = True
            self._wake_all_locked()

    def _wake_all_locked(self) -> None:
        self._ready.notify_all()
        self._ticker.notify_all()

    def _update_unfinished_work_loop(self) -> None:
        period = self._unfinished_work_update_period
        with self._lock:
            next_update = self._clock.now() + period
            while not self._shutting_down:
                remaining = next_update - self._clock.now()
                if remaining > 0:
                    self._clock.wait(self._ticker, remaining)
                    continue
                self._metrics.update_unfinished_work()
                next_update = self._clock.now() + period


class _Waiting:
    __slots__ = ("ready_at", "seq", "key", "live")

    def __init__(self, ready_at: float, seq: int, key: Hashable) -> None:
        self.ready_at = ready_at
        self.seq = seq
        self.key = key
        self.live = True

    def __lt__(self, other: _Waiting) -> bool:
        return (self.ready_at, self.seq) < (other.ready_at, other.seq)


class DelayingQueue(Queue):
    """A `Queue` whose keys can be added after a delay, measured on the injected clock.

    One thread owns the waiting heap and sleeps until the earliest deadline;
    `add_after` wakes it when a new key becomes the earliest.
    """

    def __init__(
        self,
        name: str = "",
        *,
        clock: Clock | None = None,
        metrics_provider: MetricsProvider | None = None,
        unfinished_work_update_period: float = DEFAULT_UNFINISHED_WORK_UPDATE_PERIOD,
    ) -> None:
        super().__init__(
            name,
            clock=clock,
            metrics_provider=metrics_provider,
            unfinished_work_update_period=unfinished_work_update_period,
        )
        self._heap: list[_Waiting] = []
        self._waiting: dict[Hashable, _Waiting] = {}
        self._seq = itertools.count()
        self._waiter_changed = threading.Condition(self._lock)
        self._waiting_thread = threading.Thread(
            target=self._waiting_loop,
            name=f"workqueue-delay-{name or 'unnamed'}",
            daemon=True,
        )
        self._waiting_thread.start()

    def add_after(self, key: Hashable, delay: float) -> None:
        """Add `key` once `delay` seconds have passed; an earlier deadline for the same key wins."""
        with self._lock:
            if self._shutting_down:
                return
            self._metrics.retry()
            if delay <= 0:
                self._add_locked(key)
                return
            ready_at = self._clock.now() + delay
            existing = self._waiting.get(key)
            if existing is not None:
                if existing.ready_at <= ready_at:
                    return
                # heapq has no decrease-key: retire the old entry, the loop skips it.
                existing.live = False
            entry = _Waiting(ready_at, next(self._seq), key)
            self._waiting[key] = entry
            heapq.heappush(self._heap, entry)
            self._waiter_changed.notify()

    def _wake_all_locked(self) -> None:
        super()._wake_all_locked()
        self._waiter_changed.notify_all()

    def _waiting_loop(self) -> None:
        with self._lock:
            while not self._shutting_down:
                now = self._clock.now()
                while self._heap:
                    entry = self._heap[0]
                    if not entry.live:
                        heapq.heappop(self._heap)
                        continue
                    if entry.ready_at > now:
                        break
                    heapq.heappop(self._heap)
                    del self._waiting[entry.key]
                    self._add_locked(entry.key)
                timeout = self._heap[0].ready_at - now if self._heap else None
                self._clock.wait(self._waiter_changed, timeout)


# --- rate limiters -----------------------------------------------------------


class RateLimiter(Protocol):
    def when(self, key: Hashable) -> float:
        """Seconds to wait before retrying `key`; counts as one more retry."""
        ...

    def forget(self, key: Hashable) -> None:
        """Stop tracking `key`, typically after it was processed successfully."""
        ...

    def num_requeues(self, key: Hashable) -> int: ...


class ItemExponentialFailureRateLimiter:
    """Per-key backoff `base * 2**failures`, capped, so one broken object backs off alone."""

    def __init__(self, base: float = DEFAULT_BASE_DELAY, cap: float = DEFAULT_MAX_DELAY) -> None:
        if base < 0 or cap < 0:
            raise ValueError("base and cap must not be negative")
        self._base = base
        self._cap = cap
        self._lock = threading.Lock()
        self._failures: dict[Hashable, int] = {}

    def when(self, key: Hashable) -> float:
        with self._lock:
            failures = self._failures.get(key, 0)
            self._failures[key] = failures + 1
        backoff = self._base * 2.0 ** min(failures, _MAX_BACKOFF_EXPONENT)
        return min(backoff, self._cap)

    def forget(self, key: Hashable) -> None:
        with self._lock:
            self._failures.pop(key, None)

    def num_requeues(self, key: Hashable) -> int:
        with self._lock:
            return self._failures.get(key, 0)


class BucketRateLimiter:
    """Overall retry rate across all keys, so mass failures cannot flood the API server."""

    def __init__(
        self,
        qps: float = DEFAULT_QPS,
        burst: int = DEFAULT_BURST,
        *,
        clock: Clock | None = None,
    ) -> None:
        self._bucket = TokenBucket(qps, burst, clock=clock)

    def when(self, key: Hashable) -> float:
        return self._bucket.reserve()

    def forget(self, key: Hashable) -> None:
        pass

    def num_requeues(self, key: Hashable) -> int:
        return 0


class MaxOfRateLimiter:
    """Waits as long as the strictest of its limiters; every limiter sees every retry."""

    def __init__(self, *limiters: RateLimiter) -> None:
        if not limiters:
            raise ValueError("MaxOfRateLimiter needs at least one limiter")
        self._limiters = limiters

    def when(self, key: Hashable) -> float:
        # Evaluate all of them: each must count the retry (and the bucket spend its token).
        return max([limiter.when(key) for limiter in self._limiters])

    def forget(self, key: Hashable) -> None:
        for limiter in self._limiters:
            limiter.forget(key)

    def num_requeues(self, key: Hashable) -> int:
        return max(limiter.num_requeues(key) for limiter in self._limiters)


def default_controller_rate_limiter(clock: Clock | None = None) -> MaxOfRateLimiter:
    """Per-key exponential backoff combined with an overall token bucket, as client-go."""
    return MaxOfRateLimiter(
        ItemExponentialFailureRateLimiter(DEFAULT_BASE_DELAY, DEFAULT_MAX_DELAY),
        BucketRateLimiter(DEFAULT_QPS, DEFAULT_BURST, clock=clock),
    )


class RateLimitingQueue(DelayingQueue):
    """A `DelayingQueue` that asks a rate limiter how long a failed key must wait."""

    def __init__(
        self,
        rate_limiter: RateLimiter | None = None,
        name: str = "",
        *,
        clock: Clock | None = None,
        metrics_provider: MetricsProvider | None = None,
        unfinished_work_update_period: float = DEFAULT_UNFINISHED_WORK_UPDATE_PERIOD,
    ) -> None:
        super().__init__(
            name,
            clock=clock,
            metrics_provider=metrics_provider,
            unfinished_work_update_period=unfinished_work_update_period,
        )
        self.rate_limiter: RateLimiter = (
            rate_limiter if rate_limiter is not None else default_controller_rate_limiter(clock)
        )

    def add_rate_limited(self, key: Hashable) -> None:
        """Re-queue `key` after the delay the rate limiter assigns it."""
        self.add_after(key, self.rate_limiter.when(key))

    def forget(self, key: Hashable) -> None:
        """Reset `key`'s backoff; call after it was processed successfully."""
        self.rate_limiter.forget(key)

    def num_requeues(self, key: Hashable) -> int:
        return self.rate_limiter.num_requeues(key)
