"""Leader election on a coordination.k8s.io/v1 Lease, with client-go's rules.

A candidate takes the Lease when it is free (no holder, or released) or when its record has
not changed for leaseDuration, measured on the candidate's own clock from when it observed
the record (immune to clock skew between machines). Writes use the Lease's resourceVersion,
so two candidates can never both win. A leader that cannot renew within renewDeadline stops
leading; a leader that stops on purpose releases the Lease so a successor need not wait.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

import structlog

from daemonjob import defaults
from daemonjob.machinery.kube import ApiError, Kube, path_for

log = structlog.get_logger("daemonjob.machinery.leaderelection")


def _micro_now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    def __init__(
        self,
        kube: Kube,
        namespace: str,
        name: str,
        identity: str,
        *,
        lease_duration: float = defaults.LEASE_DURATION,
        renew_deadline: float = defaults.RENEW_DEADLINE,
        retry_period: float = defaults.RETRY_PERIOD,
        on_leading: Callable[[], None] | None = None,
    ):
        if not lease_duration > renew_deadline > retry_period > 0:
            raise ValueError("need lease duration > renew deadline > retry period > 0")
        self.kube = kube
        self.path = path_for("coordination.k8s.io/v1", "leases", namespace, name)
        self.collection = path_for("coordination.k8s.io/v1", "leases", namespace)
        self.namespace, self.name, self.identity = namespace, name, identity
        self.lease_duration, self.renew_deadline, self.retry_period = lease_duration, renew_deadline, retry_period
        self.on_leading = on_leading
        self._stop = threading.Event()
        self._leading = threading.Event()
        self._observed: tuple[Any, float] | None = None  # (holder, renewTime, transitions), local time seen
        self._lease: dict[str, Any] | None = None

    @property
    def is_leader(self) -> bool:
        return self._leading.is_set()

    def holds_lease(self) -> bool:
        """The write fence: True only while this process surely holds the Lease."""
        return self._leading.is_set()

    def stop(self) -> None:
        self._stop.set()

    def run(self) -> bool:
        """Acquire, then renew until stopped (True) or leadership is lost (False)."""
        log.info("waiting for leadership", lease=f"{self.namespace}/{self.name}", identity=self.identity)
        while not self._stop.is_set():
            if self._try_acquire_or_renew():
                break
            self._stop.wait(self.retry_period * (1 + random.random() * 0.2))
        if self._stop.is_set():
            return True
        self._leading.set()
        log.info("became leader", lease=f"{self.namespace}/{self.name}", identity=self.identity)
        if self.on_leading:
            threading.Thread(target=self.on_leading, name="leading", daemon=True).start()
        last_renew = time.monotonic()
        while not self._stop.wait(self.retry_period):
            if self._try_acquire_or_renew():
                last_renew = time.monotonic()
            elif time.monotonic() - last_renew > self.renew_deadline:
                self._leading.clear()
                log.error("leadership lost: could not renew the lease", renew_deadline=self.renew_deadline)
                return False
        return True

    def release(self) -> None:
        """Give the Lease up at once (on a clean shutdown) so a successor need not wait."""
        if not self._leading.is_set() or self._lease is None:
            return
        self._leading.clear()
        lease = self._lease
        lease["spec"].update({"holderIdentity": None, "leaseDurationSeconds": 1, "renewTime": _micro_now()})
        try:
            self.kube.put(self.path, lease)
            log.info("lease released", lease=f"{self.namespace}/{self.name}")
        except Exception as exc:  # the successor will wait out the lease instead
            log.warning("lease not released", error=str(exc))

    def _try_acquire_or_renew(self) -> bool:
        now = _micro_now()
        try:
            lease = self.kube.get(self.path)
        except ApiError as exc:
            if not exc.not_found:
                log.warning("cannot read the lease", error=str(exc))
                return False
            body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                    "metadata": {"name": self.name, "namespace": self.namespace},
                    "spec": {"holderIdentity": self.identity, "leaseDurationSeconds": int(self.lease_duration),
                             "acquireTime": now, "renewTime": now, "leaseTransitions": 0}}
            try:
                self._lease = self.kube.create(self.collection, body)
                return True
            except ApiError as exc2:
                log.debug("lease create lost a race", error=str(exc2))
                return False
        except Exception as exc:
            log.warning("cannot read the lease", error=str(exc))
            return False
        spec = lease.get("spec") or {}
        record = (spec.get("holderIdentity"), spec.get("renewTime"), spec.get("leaseTransitions"))
        if self._observed is None or self._observed[0] != record:
            self._observed = (record, time.monotonic())
        holder = spec.get("holderIdentity")
        mine = holder == self.identity
        duration = float(spec.get("leaseDurationSeconds") or self.lease_duration)
        expired = time.monotonic() - self._observed[1] > duration
        if holder and not mine and not expired:
            return False
        new_spec = dict(spec)
        new_spec.update({"holderIdentity": self.identity, "leaseDurationSeconds": int(self.lease_duration),
                         "renewTime": now})
        if not mine:
            new_spec["acquireTime"] = now
            new_spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + 1
        lease["spec"] = new_spec
        try:
            self._lease = self.kube.put(self.path, lease)
        except ApiError as exc:
            log.debug("lease update refused", error=str(exc))
            return False
        except Exception as exc:
            log.warning("lease update failed", error=str(exc))
            return False
        self._observed = ((self.identity, now, new_spec.get("leaseTransitions")), time.monotonic())
        return True
