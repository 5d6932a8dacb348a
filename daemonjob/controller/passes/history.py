"""History cleanup: finished Jobs beyond `historyLimit`, deleted after a pass's creates
(and succeeded Jobs whose results are recorded, with spec.results.deleteSucceededJobs, at a
pace of their own: RECORDED_DELETE_QPS).

As the CronJob controller cleans history after its sync, deleting old runs never delays
the next one: a pass hands its History deletes here and goes on; a single writer thread
sends them at a pace of their own (a token bucket), with background propagation (a
finished Job's pods are done; the garbage collector removes them), and holds off while
any pass is creating Jobs, so a run's creates never share the API budget with cleanup.
Expectations do not wait for these deletes: a pass that still sees a Job being cleaned
skips it here, by uid, for as long as its delete waits in the queue (however long that is:
a rollout's let-go of 100,000 Jobs waits many minutes) and for HISTORY_DELETE_TTL after it
is sent, while the cache may still show it. A delete queued twice would cost a token and a
round trip for nothing, and everything queued after it would wait for it.

A finished Job whose result is not recorded yet is held back (`hold`), but not for ever:
results that cannot be written (the DaemonJobReport CRD missing, RBAC refusing) must not keep
every run's Jobs. From the first delete held, it waits `result_wait` (HISTORY_RESULT_WAIT,
--history-result-wait); each pass that holds one wakes its DaemonJob when the oldest wait
ends (no resync needed), and then it goes unrecorded, counted in
daemonjob_jobs_deleted_unrecorded_total.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

import structlog
from cachetools import TTLCache

from daemonjob import defaults
from daemonjob.controller.metrics.metrics import Metrics
from daemonjob.controller.runtime.jobcontrol import JobControl, NotLeader
from daemonjob.domain.decision.decide import DeleteJob
from daemonjob.domain.rollout.plan import RECORDED
from daemonjob.machinery.client.kube import ApiError
from daemonjob.machinery.process.clock import Clock, RealClock
from daemonjob.machinery.queue.ratelimit import TokenBucket

__all__ = ["HistoryCleaner"]

log = structlog.get_logger("daemonjob.history")


class HistoryCleaner:
    def __init__(
        self,
        control: JobControl,
        metrics: Metrics,
        *,
        clock: Clock | None = None,
        qps: float = defaults.HISTORY_DELETE_QPS,
        burst: int = defaults.HISTORY_DELETE_BURST,
        hold: Callable[[str], bool] | None = None,
        result_wait: float = defaults.HISTORY_RESULT_WAIT,
        wake_after: Callable[[str, float], None] | None = None,
    ) -> None:
        """`hold(uid)`: keep this finished Job for now (its result is not recorded); a later pass
        asks again, up to `result_wait` seconds after the first; `wake_after(key, seconds)`
        brings that pass (the work queue's add_after)."""
        self.control = control
        self.hold = hold
        self.metrics = metrics
        self.clock = clock = clock or RealClock()
        self.result_wait = max(result_wait, 0.0)
        self.wake_after = wake_after
        # Job uid -> when a delete was first held for it; an entry left by a Job deleted
        # otherwise (its node gone) ends with the TTL
        self._holding: TTLCache[str, float] = TTLCache(
            defaults.HISTORY_DELETE_MAX_PENDING, 2 * self.result_wait + defaults.HISTORY_DELETE_TTL, timer=clock.now
        )
        self._unrecorded: set[str] = set()  # held past result_wait: deleted as soon as may be
        self._bucket = TokenBucket(qps, burst, clock)
        self._recorded_bucket = TokenBucket(defaults.RECORDED_DELETE_QPS, defaults.RECORDED_DELETE_BURST, clock)
        # sent a moment ago (the cache may not show it yet): not queued again until the TTL ends
        self._sent: TTLCache[str, bool] = TTLCache(
            defaults.HISTORY_DELETE_MAX_PENDING, defaults.HISTORY_DELETE_TTL, timer=clock.now
        )
        self._queued: set[str] = set()  # in `_pending`: never queued twice, however long it waits
        # One queue and one writer thread: a pass hands over thousands of deletes at a tick,
        # and queueing one must cost no more than appending it.
        self._pending: deque[tuple[str, DeleteJob]] = deque()
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._writer: threading.Thread | None = None
        self._creating = 0  # passes creating Jobs now
        self._stopped = False

    @contextmanager
    def creates_first(self) -> Iterator[None]:
        """Around a pass's creates: no history delete starts until they are done."""
        with self._lock:
            self._creating += 1
        try:
            yield
        finally:
            with self._lock:
                self._creating -= 1
                self._wake.notify_all()

    def submit(self, namespace: str, deletes: Sequence[DeleteJob], key: str = "") -> list[DeleteJob]:
        """Queue the deletes not queued already and not held; returns those newly queued.
        `key`: the DaemonJob's, woken when the oldest of its held Jobs may go unrecorded."""
        with self._lock:
            if self._stopped:
                return []
            now = self.clock.now()
            wait: list[float] = []
            new = [d for d in deletes if not self._known(d.uid or d.name) and not self._held(d, now, wait)]
            let_go = [d for d in new if d.uid in self._unrecorded]
            self._queued.update(d.uid or d.name for d in new)
            self._pending.extend((namespace, d) for d in new)
            if new and self._writer is None:
                self._writer = threading.Thread(target=self._write, name="history", daemon=True)
                self._writer.start()
            self._wake.notify()
        if wait and key and self.wake_after is not None:
            self.wake_after(key, min(wait))
        if let_go:
            log.warning(
                "deleting finished jobs beyond historyLimit whose results are not recorded",
                daemonjob=key or namespace,
                count=len(let_go),
                held_seconds=self.result_wait,
            )
        return new

    def _known(self, key: str) -> bool:
        return key in self._queued or key in self._sent

    def _held(self, d: DeleteJob, now: float, wait: list[float]) -> bool:
        """Whether `d` waits for its result to be recorded; appends to `wait` how long at most (locked)."""
        uid = d.uid or ""
        if self.hold is None or not uid or uid in self._unrecorded:
            return False
        if not self.hold(uid):
            self._holding.pop(uid, None)
            return False
        since = self._holding.setdefault(uid, now)
        if now - since < self.result_wait:
            wait.append(since + self.result_wait - now)
            return True
        self._holding.pop(uid, None)
        self._unrecorded.add(uid)
        return False

    def _write(self) -> None:
        while True:
            with self._lock:
                while (not self._pending or self._creating) and not self._stopped:
                    self._wake.wait()
                if self._stopped:
                    return
                namespace, d = self._pending.popleft()
                self._queued.discard(d.uid or d.name)
                self._sent[d.uid or d.name] = True  # the cache's lag is counted from the send on
            self._delete(namespace, d)

    def _delete(self, namespace: str, d: DeleteJob) -> None:
        (self._recorded_bucket if d.reason == RECORDED else self._bucket).accept()
        if self._stopped or not self.control.may_write():
            return
        try:
            self.control.delete_job(namespace, d.name, d.uid, propagation="Background")
        except ApiError as exc:
            if exc.not_found or exc.conflict:  # gone already, or a newer namesake: nothing to do
                self._let_go(d, deleted=False)
                return
            self._retry_later(d)
            log.warning("history delete failed", namespace=namespace, job=d.name, error=exc.message[:300])
            return
        except NotLeader:
            return
        except Exception as exc:
            self._retry_later(d)
            log.warning("history delete failed", namespace=namespace, job=d.name, error=str(exc)[:300])
            return
        self.metrics.jobs_deleted.labels(d.reason).inc()
        self._let_go(d, deleted=True)

    def _let_go(self, d: DeleteJob, deleted: bool) -> None:
        with self._lock:
            unrecorded = bool(d.uid) and d.uid in self._unrecorded
            self._unrecorded.discard(d.uid or "")
        if unrecorded and deleted:
            self.metrics.jobs_deleted_unrecorded.inc()

    def _retry_later(self, d: DeleteJob) -> None:
        """A later pass that still sees the Job queues it again."""
        with self._lock:
            self._sent.pop(d.uid or d.name, None)

    def stop(self) -> None:
        with self._lock:
            self._stopped = True
            self._pending.clear()
            self._queued.clear()
            self._unrecorded.clear()
            self._wake.notify_all()
