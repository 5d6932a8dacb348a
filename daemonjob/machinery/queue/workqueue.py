"""Reconcile work queues with client-go `util/workqueue` semantics.

The guarantees controllers rely on:
- a key waiting in the queue is held once, however often it is added;
- a key is never handed to two workers at once: added while being processed, it
  is marked dirty and queued again exactly once when the worker calls `done()`;
- failures back off per key (exponentially) and overall (token bucket), so a
  broken object cannot starve the others nor hammer the API server: the rate
  limiters are in `ratelimit.py`, the queues' metrics in `queuemetrics.py`.

Beyond client-go, a key may be added as urgent (as controller-runtime's priority queue
raises an item's priority): urgent keys are handed out before the others, and an urgent
add of a key already waiting moves it ahead. A controller keeps this for work whose
latency people feel (a node that just became eligible waits for its Jobs) and which is
bounded by its own events, so the rest is delayed, never starved.
"""

from __future__ import annotations

import heapq
import itertools
import math
import threading
from collections import deque
from collections.abc import Hashable

from daemonjob.machinery.process.clock import Clock, RealClock
from daemonjob.machinery.queue.queuemetrics import MetricsProvider, NoopMetricsProvider, NoQueueMetrics, QueueMetrics
from daemonjob.machinery.queue.ratelimit import RateLimiter, default_controller_rate_limiter

__all__ = ["DEFAULT_UNFINISHED_WORK_UPDATE_PERIOD", "Queue", "DelayingQueue", "RateLimitingQueue"]

DEFAULT_UNFINISHED_WORK_UPDATE_PERIOD = 0.5


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
        self._urgent: deque[Hashable] = deque()  # handed out before `_queue`
        self._urgent_keys: set[Hashable] = set()  # in `_urgent`, or to go there when re-queued by done()
        self._dirty: set[Hashable] = set()
        self._processing: set[Hashable] = set()
        self._urgent_processing: set[Hashable] = set()  # handed out from `_urgent`, not done yet
        self._urgent_done_at = -math.inf  # when the last urgent key's processing ended (clock time)
        self._shutting_down = False
        self._unfinished_work_update_period = unfinished_work_update_period

        provider = metrics_provider if metrics_provider is not None else NoopMetricsProvider()
        if not name or isinstance(provider, NoopMetricsProvider):
            self._metrics: QueueMetrics | NoQueueMetrics = NoQueueMetrics()
        else:
            self._metrics = QueueMetrics(provider, name, self._clock)
            threading.Thread(
                target=self._update_unfinished_work_loop,
                name=f"workqueue-metrics-{name}",
                daemon=True,
            ).start()

    def add(self, key: Hashable, urgent: bool = False) -> None:
        """Queue `key` unless it is already waiting; ignored once shutting down. `urgent`:
        handed out before the keys that are not (moved ahead if it is already waiting)."""
        with self._lock:
            self._add_locked(key, urgent)

    def _add_locked(self, key: Hashable, urgent: bool = False) -> None:
        if self._shutting_down:
            return
        if key in self._dirty:
            if urgent and key not in self._urgent_keys:
                self._urgent_keys.add(key)
                if key not in self._processing:  # waiting in the other lane: moved ahead
                    self._queue.remove(key)
                    self._urgent.append(key)
            return
        self._metrics.add(key)
        self._dirty.add(key)
        if urgent:
            self._urgent_keys.add(key)
        if key in self._processing:
            # Re-queued by done(), so no second worker sees it meanwhile.
            return
        (self._urgent if urgent else self._queue).append(key)
        self._ready.notify()

    def get(self) -> tuple[Hashable | None, bool]:
        """Block until a key is ready; returns (key, False), or (None, True) after shutdown.

        Keys still queued at shutdown are handed out first, so work accepted
        before shutdown is not silently dropped.
        """
        with self._lock:
            while not self._urgent and not self._queue and not self._shutting_down:
                self._ready.wait()
            if self._urgent:
                key = self._urgent.popleft()
                self._urgent_keys.discard(key)
                self._urgent_processing.add(key)
            elif self._queue:
                key = self._queue.popleft()
            else:
                return None, True
            self._metrics.get(key)
            self._processing.add(key)
            self._dirty.discard(key)
            return key, False

    def done(self, key: Hashable) -> None:
        """Mark `key` processed; re-queue it if it was added while being processed."""
        with self._lock:
            self._metrics.done(key)
            self._processing.discard(key)
            if key in self._urgent_processing:
                self._urgent_processing.discard(key)
                self._urgent_done_at = self._clock.now()
            if key in self._dirty:
                (self._urgent if key in self._urgent_keys else self._queue).append(key)
                self._ready.notify()

    def urgent_pending(self) -> bool:
        """Whether urgent keys wait or are being processed: work that may wait gives way meanwhile."""
        with self._lock:
            return bool(self._urgent or self._urgent_processing)

    def urgent_within(self, seconds: float) -> bool:
        """Whether urgent keys wait or are being processed, or were `seconds` ago: work that may
        wait leaves room for a burst of them (nodes joining a few at a time) until it is over."""
        with self._lock:
            return bool(self._urgent or self._urgent_processing) or self._clock.now() - self._urgent_done_at < seconds

    def __len__(self) -> int:
        """Keys ready to be handed out (not those being processed or delayed)."""
        with self._lock:
            return len(self._urgent) + len(self._queue)

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

    def add_soon(self, key: Hashable, delay: float) -> None:
        """Queue `key` within `delay` seconds, unless it is queued already (a pass starts after
        now) or waits to be within `delay`: a wake that any pass to come answers as well, so it
        joins the pass that comes anyway instead of making one more."""
        with self._lock:
            if self._shutting_down or key in self._dirty:
                return
            existing = self._waiting.get(key)
            if existing is not None and existing.ready_at <= self._clock.now() + delay:
                return
        self.add_after(key, delay)

    def due_waiting(self) -> int:
        """Keys whose delay is over that the waiting thread has not moved into the queue yet: a
        moment's lag after the clock moves, which a test on a fake clock waits out."""
        with self._lock:
            now = self._clock.now()
            return sum(1 for entry in self._waiting.values() if entry.ready_at <= now)

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
