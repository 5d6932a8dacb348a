"""The Lease as the elector reads and writes it: the API it needs, a new Lease, a renewed or taken-over spec."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Protocol

from daemonjob.machinery.client.kube import JSON

__all__ = ["LeaseApi", "lease_seconds", "new_lease", "released_spec", "renewed_spec"]

LEASES = "coordination.k8s.io/v1"


class LeaseApi(Protocol):
    """What the elector needs of `Kube` (a stub in unit tests)."""

    def get(self, path: str, *, request_timeout: float | None = None) -> JSON: ...

    def create(
        self, path: str, body: JSON, *, request_timeout: float | None = None, guard: Callable[[], None] | None = None
    ) -> JSON: ...

    def put(
        self, path: str, body: JSON, *, request_timeout: float | None = None, guard: Callable[[], None] | None = None
    ) -> JSON: ...


def lease_seconds(lease_duration: float) -> int:
    """The Lease holds whole seconds: rounded up, so no stand-by waits less than our duration."""
    return math.ceil(lease_duration)


def new_lease(metadata: dict[str, str], identity: str, seconds: int, now: str) -> JSON:
    """A Lease that did not exist, held by `identity` from `now` (a MicroTime)."""
    spec = {
        "holderIdentity": identity,
        "leaseDurationSeconds": seconds,
        "acquireTime": now,
        "renewTime": now,
        "leaseTransitions": 0,
    }
    return {"apiVersion": LEASES, "kind": "Lease", "metadata": metadata, "spec": spec}


def renewed_spec(spec: dict[str, Any], identity: str, seconds: int, now: str) -> dict[str, Any]:
    """`spec` renewed by `identity`; a transition counted when it was another's (or no one's)."""
    new = {**spec, "holderIdentity": identity, "leaseDurationSeconds": seconds, "renewTime": now}
    if spec.get("holderIdentity") != identity:
        new["acquireTime"] = now
        new["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + 1
    return new


def released_spec(spec: dict[str, Any], now: str) -> dict[str, Any]:
    """`spec` given up: no holder, and a one-second duration so a successor need not wait."""
    return {**spec, "holderIdentity": None, "leaseDurationSeconds": 1, "renewTime": now}
