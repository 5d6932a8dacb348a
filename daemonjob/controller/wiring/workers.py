"""The controller's threads: workers that take keys off the queue and pass over them, the
periodic resync, and any loop run beside them (the alert poller), as the DaemonSet
controller's Run starts its workers and processNextWorkItem handles one key."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

import structlog

from daemonjob.controller.metrics.metrics import Metrics
from daemonjob.controller.runtime.fence import NotLeader
from daemonjob.machinery.client.kube import ApiError
from daemonjob.machinery.process.clock import Clock
from daemonjob.machinery.queue.workqueue import RateLimitingQueue

__all__ = ["Workers"]

log = structlog.get_logger("daemonjob.controller")


class Workers:
    def __init__(
        self,
        queue: RateLimitingQueue,
        reconcile: Callable[[str], object],
        keys: Callable[[], Iterable[str]],
        *,
        metrics: Metrics,
        clock: Clock,
        count: int,
        resync_interval: float,
    ) -> None:
        """`reconcile`: one pass over a key (what it raises retries the key with its backoff);
        `keys`: every key, queued again each `resync_interval` (0: never)."""
        self.queue = queue
        self.reconcile = reconcile
        self.keys = keys
        self.metrics = metrics
        self.clock = clock
        self.count = count
        self.resync_interval = resync_interval
        self._threads: list[threading.Thread] = []
        self._stopping = threading.Event()
        self._resync_wake = threading.Condition()

    def start(self, loops: Iterable[tuple[str, Callable[[], None]]] = ()) -> None:
        """The workers, the resync, and `loops` (name, target) each in a thread of its own."""
        for i in range(self.count):
            self._spawn(self._worker, f"worker-{i}")
        if self.resync_interval > 0:
            self._spawn(self._resync_loop, "resync")
        for name, target in loops:
            self._spawn(target, name)

    def _spawn(self, target: Any, name: str) -> None:
        t = threading.Thread(target=target, name=name, daemon=True)
        t.start()
        self._threads.append(t)

    def stop(self, timeout: float, then: Callable[[], None] = lambda: None) -> bool:
        """Stop taking keys (those still queued are left), call `then` (stop the other loops),
        and wait up to `timeout` for in-flight passes; True if all ended."""
        self._stopping.set()
        self.queue.shutdown()
        with self._resync_wake:
            self._resync_wake.notify_all()
        then()
        deadline = time.monotonic() + timeout
        for t in self._threads:
            t.join(max(0.0, deadline - time.monotonic()))
        return not any(t.is_alive() for t in self._threads)

    def stopping(self) -> bool:
        return self._stopping.is_set()

    def dead(self) -> list[str]:
        """The threads that ended while not asked to."""
        return [t.name for t in self._threads if not t.is_alive() and not self._stopping.is_set()]

    def _resync_loop(self) -> None:
        with self._resync_wake:
            while not self._stopping.is_set():
                self.clock.wait(self._resync_wake, self.resync_interval)
                if self._stopping.is_set():
                    return
                for key in self.keys():
                    self.queue.add(key)

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
                self.reconcile(str(key))
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
