"""Leader election on a coordination.k8s.io/v1 Lease, with client-go's rules and a fence.

A candidate takes the Lease when it is free (no holder, or released) or when its record has
not changed for leaseDuration, measured on the candidate's own clock from when it observed
the record (immune to clock skew between machines). Writes use the Lease's resourceVersion,
so two candidates can never both win.

The fence: a leader holds the lease only until `renewDeadline` after it SENT its last
successful renewal, on its own monotonic clock. A stand-by waits `leaseDuration` (longer)
from when it saw that renewal, which is after it was sent, so a leader that obeys the fence
has stopped writing before anyone else may start. Nothing that returns late (a slow or
paused request) can extend the fence, and once it lapses it never comes back: the process
must stop. Every request of a renewal is bounded by the fence, never by the client's
default timeout, and a Lease write is not sent at all once its attempt's deadline passed
(checked as its first byte is sent: a process paused meanwhile sends nothing).
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from typing import Any

import structlog

from daemonjob import defaults
from daemonjob.machinery.client.kube import JSON, ApiError, micro_time, path_for
from daemonjob.machinery.process.clock import Clock, RealClock
from daemonjob.machinery.process.leases import LEASES, LeaseApi, lease_seconds, new_lease, released_spec, renewed_spec

log = structlog.get_logger("daemonjob.machinery.process.leaderelection")

__all__ = ["LeaderElector"]


class _Late(Exception):
    """The attempt's deadline passed before the next request could be sent."""


class LeaderElector:
    """Acquire and renew one Lease; `holds_lease()` is the fence checked before every write."""

    def __init__(
        self,
        kube: LeaseApi,
        namespace: str,
        name: str,
        identity: str,
        *,
        lease_duration: float = defaults.LEASE_DURATION,
        renew_deadline: float = defaults.RENEW_DEADLINE,
        retry_period: float = defaults.RETRY_PERIOD,
        jitter: float = defaults.LEADER_ELECTION_JITTER,
        on_leading: Callable[[], None] | None = None,
        on_stopped_leading: Callable[[], None] | None = None,
        clock: Clock | None = None,
        rng: random.Random | None = None,
    ):
        if not lease_duration > renew_deadline > retry_period > 0:
            raise ValueError("need lease duration > renew deadline > retry period > 0")
        if jitter < 0:
            raise ValueError("jitter must not be negative")
        self.kube = kube
        self.path = path_for(LEASES, "leases", namespace, name)
        self.collection = path_for(LEASES, "leases", namespace)
        self.namespace, self.name, self.identity = namespace, name, identity
        self.lease_duration, self.renew_deadline, self.retry_period = lease_duration, renew_deadline, retry_period
        self.jitter = jitter
        self.on_leading = on_leading
        self.on_stopped_leading = on_stopped_leading
        self.clock: Clock = clock if clock is not None else RealClock()
        self.rng = rng if rng is not None else random.Random()
        # One lock for every field below; waits on the clock go through this condition so
        # that stop(), release() and a lost fence wake the loops at once.
        self._cond = threading.Condition()
        self._stopped = False
        self._leading = False  # became leader, and neither lost nor released since
        self._lost = False
        self._renew_sent_at = 0.0  # monotonic: when the last successful renewal was sent
        self._observed: tuple[Any, float] | None = None  # (holder, renewTime, transitions), when seen
        self._lease: JSON | None = None  # the Lease as last written by us (its resourceVersion)
        self._attempt_lock = threading.Lock()  # release() waits for an attempt in flight

    # -- the fence ----------------------------------------------------------------------------
    def holds_lease(self) -> bool:
        """True only while the last successful renewal was sent less than renewDeadline ago."""
        with self._cond:
            if not self._leading:
                return False
            if self.clock.now() >= self._renew_sent_at + self.renew_deadline:
                self._lose_locked("renew deadline passed")
                return False
            return True

    def lease_remaining(self) -> float:
        """Seconds the fence still holds (0.0 when not leading): a bound for a write's timeout."""
        with self._cond:
            if not self.holds_lease():
                return 0.0
            return self._renew_sent_at + self.renew_deadline - self.clock.now()

    @property
    def is_leader(self) -> bool:
        return self.holds_lease()

    @property
    def lost(self) -> bool:
        """Leadership ended without release(): the process must stop (and exit non-zero)."""
        with self._cond:
            return self._lost

    # -- lifecycle ----------------------------------------------------------------------------
    def stop(self) -> None:
        """Stop acquiring and renewing; a held fence then lapses at its usual time."""
        with self._cond:
            self._stopped = True
            self._cond.notify_all()

    def run(self) -> bool:
        """Acquire, then renew until stopped or released (True) or leadership is lost (False)."""
        log.info("waiting for leadership", lease=f"{self.namespace}/{self.name}", identity=self.identity)
        if not self._acquire():
            return True
        log.info("became leader", lease=f"{self.namespace}/{self.name}", identity=self.identity)
        threading.Thread(target=self._watch_fence, name="lease-fence", daemon=True).start()
        if self.on_leading:
            threading.Thread(target=self.on_leading, name="leading", daemon=True).start()
        self._renew_loop()
        return not self.lost

    def release(self) -> None:
        """Give the Lease up at once so a successor need not wait: call after workers stopped.

        The fence is dropped before the request is sent; a Lease written since by anyone else
        has another resourceVersion, so a late release can only fail, never evict a successor.
        """
        with self._cond:
            self._stopped = True
            was_leading = self.holds_lease()  # a fence that lapsed meanwhile is a loss, not a release
            fence = self._renew_sent_at + self.renew_deadline
            self._leading = False
            self._cond.notify_all()
        if not was_leading:
            return
        with self._attempt_lock:  # the renewal in flight, if any, ends within the fence
            lease = self._lease
        if lease is None:
            return
        spec = released_spec(lease.get("spec") or {}, self._micro_now())
        try:
            self.kube.put(
                self.path,
                {**lease, "spec": spec},
                request_timeout=self._timeout(fence),
                guard=lambda: self._check_deadline(fence),
            )
            log.info("lease released", lease=f"{self.namespace}/{self.name}")
        except _Late:
            log.warning("lease not released: the renew deadline passed")
        except Exception as exc:  # the successor will wait out the lease instead
            log.warning("lease not released", error=str(exc))

    # -- loops ------------------------------------------------------------------------------
    def _acquire(self) -> bool:
        while not self._pause(0.0):
            with self._attempt_lock:
                sent = self._attempt(self.clock.now() + self.renew_deadline)
            if sent is not None:
                with self._cond:
                    if self._stopped:
                        return False
                    if self.clock.now() < sent + self.renew_deadline:
                        self._leading = True
                        self._renew_sent_at = sent
                        return True
                log.warning("lease acquired too late to act on; trying again")
            if self._pause(self.retry_period * (1 + self.rng.random() * self.jitter)):
                return False
        return False

    def _renew_loop(self) -> None:
        """Renew every retryPeriod; each attempt ends at the fence (at most renewDeadline away)."""
        while not self._pause(self.retry_period):
            with self._cond:
                fence = self._renew_sent_at + self.renew_deadline
            with self._attempt_lock:
                sent = self._attempt(fence)
            if sent is None:
                self.holds_lease()  # loses leadership if the fence has lapsed meanwhile
                continue
            with self._cond:
                # A renewal returning after the fence lapsed changes nothing: lost is final.
                if self._leading and self.clock.now() < self._renew_sent_at + self.renew_deadline:
                    self._renew_sent_at = max(self._renew_sent_at, sent)
                    self._cond.notify_all()
                else:
                    self._lose_locked("renewal returned after the renew deadline")

    def _pause(self, seconds: float) -> bool:
        """Wait `seconds` on the clock; True when the loop must end (stopped, lost, released)."""
        with self._cond:
            end = self.clock.now() + seconds
            while not self._done_locked():
                left = end - self.clock.now()
                if left <= 0:
                    return False
                self.clock.wait(self._cond, left)
            return True

    def _done_locked(self) -> bool:
        return self._stopped or self._lost

    def _watch_fence(self) -> None:
        """Declare the loss the moment the fence lapses, even while a renewal hangs."""
        with self._cond:
            while self._leading:
                left = self._renew_sent_at + self.renew_deadline - self.clock.now()
                if left <= 0:
                    self._lose_locked("renew deadline passed")
                    return
                self.clock.wait(self._cond, left)

    def _lose_locked(self, reason: str) -> None:
        if not self._leading:
            return
        self._leading = False
        self._lost = True
        self._cond.notify_all()
        log.error(
            "leadership lost", reason=reason, lease=f"{self.namespace}/{self.name}", renew_deadline=self.renew_deadline
        )
        if self.on_stopped_leading:
            threading.Thread(target=self.on_stopped_leading, name="stopped-leading", daemon=True).start()

    # -- one attempt --------------------------------------------------------------------------
    def _timeout(self, deadline: float) -> float:
        left = deadline - self.clock.now()
        if left <= 0:
            raise _Late()
        return left

    def _check_deadline(self, deadline: float) -> None:
        self._timeout(deadline)

    def _attempt(self, deadline: float) -> float | None:
        """GET then PUT (or create) the Lease before `deadline`; the PUT's send time on success."""
        try:
            return self._try_acquire_or_renew(deadline)
        except _Late:
            log.warning("lease attempt ran out of time", renew_deadline=self.renew_deadline)
        except ApiError as exc:
            log.warning("lease request refused", error=str(exc))
        except Exception as exc:  # connection refused, timed out, reset
            log.warning("lease request failed", error=str(exc))
        return None

    def _try_acquire_or_renew(self, deadline: float) -> float | None:
        now = self._micro_now()
        try:
            lease = self.kube.get(self.path, request_timeout=self._timeout(deadline))
        except ApiError as exc:
            if not exc.not_found:
                raise
            meta = {"name": self.name, "namespace": self.namespace}
            body = new_lease(meta, self.identity, lease_seconds(self.lease_duration), now)
            timeout = self._timeout(deadline)
            sent = self.clock.now()
            try:
                self._lease = self.kube.create(
                    self.collection, body, request_timeout=timeout, guard=lambda: self._check_deadline(deadline)
                )
            except ApiError as exc2:
                log.debug("lease create lost a race", error=str(exc2))
                return None
            return sent
        spec = lease.get("spec") or {}
        holder = spec.get("holderIdentity")
        record = (holder, spec.get("renewTime"), spec.get("leaseTransitions"))
        if self._observed is None or self._observed[0] != record:
            self._observed = (record, self.clock.now())
        mine = holder == self.identity
        if holder and not mine:
            with self._cond:
                if self._leading:  # someone else holds it: in doubt, stop at once
                    self._lose_locked(f"the lease is held by {holder}")
                    return None
            duration = float(spec.get("leaseDurationSeconds") or self.lease_duration)
            if self.clock.now() - self._observed[1] <= duration:
                return None
        new_spec = renewed_spec(spec, self.identity, lease_seconds(self.lease_duration), now)
        lease["spec"] = new_spec
        timeout = self._timeout(deadline)
        sent = self.clock.now()
        try:
            self._lease = self.kube.put(
                self.path, lease, request_timeout=timeout, guard=lambda: self._check_deadline(deadline)
            )
        except ApiError as exc:
            log.debug("lease update refused", error=str(exc))
            return None
        self._observed = ((self.identity, now, new_spec.get("leaseTransitions")), self.clock.now())
        return sent

    def _micro_now(self) -> str:
        return micro_time(self.clock.wall())
