"""The stop on new cordons that `daemonjob-controller release-nodes` sets before it releases
every node: an annotation on the controller's leader-election Lease (the one object the
controller and the release both may write) saying until when no cordon may start. The
controller reads it afresh before each cordon, so a controller still running while node
maintenance is taken out (the pre-upgrade or pre-delete hook runs beside it) cordons nothing
behind the release. It lapses by itself, so node maintenance enabled again later works."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any

from daemonjob.domain.shared.timestamps import format_time, parse_time
from daemonjob.machinery.client.conflicts import retry_on_conflict
from daemonjob.machinery.client.kube import ApiError, Kube, path_for

__all__ = ["STOP_ANNOTATION", "LeaseStop", "server_now", "stop_cordons"]

STOP_ANNOTATION = "daemonjob.io/no-cordon-until"  # on the controller's Lease: RFC 3339 time


def _lease_path(namespace: str, name: str) -> str:
    return path_for("coordination.k8s.io/v1", "leases", namespace, name)


def stopped_until(lease: Mapping[str, Any] | None) -> datetime | None:
    annotations = ((lease or {}).get("metadata") or {}).get("annotations") or {}
    return parse_time(annotations.get(STOP_ANNOTATION))


class LeaseStop:
    """Why no cordon may start now (None: they may), read from the Lease at each call."""

    def __init__(self, kube: Kube, namespace: str, name: str, wall: Callable[[], datetime]) -> None:
        self.kube, self.path, self.wall = kube, _lease_path(namespace, name), wall

    def __call__(self) -> str | None:
        try:
            lease = self.kube.get(self.path)
        except ApiError as exc:
            if exc.not_found or exc.status == 403:
                return None  # no Lease (or none this controller may read): nobody asked
            raise
        until = stopped_until(lease)
        if until is not None and self.wall() < until:
            return f"node maintenance is being removed (release-nodes): no cordon until {format_time(until)}"
        return None


def stop_cordons(kube: Kube, namespace: str, name: str, until: datetime) -> None:
    """Write the stop on the Lease (created if there is none), keeping what the holder wrote."""
    path = _lease_path(namespace, name)

    def attempt() -> None:  # a conflict (the holder renewed, or created the Lease meanwhile) is read again
        try:
            lease = dict(kube.get(path))
        except ApiError as exc:
            if not exc.not_found:
                raise
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {
                    "name": name,
                    "namespace": namespace,
                    "annotations": {STOP_ANNOTATION: format_time(until)},
                },
                "spec": {},
            }
            kube.create(path_for("coordination.k8s.io/v1", "leases", namespace), body)
            return
        meta = dict(lease.get("metadata") or {})
        meta["annotations"] = {**(meta.get("annotations") or {}), STOP_ANNOTATION: format_time(until)}
        lease["metadata"] = meta
        kube.put(path, lease)

    retry_on_conflict(attempt, gave_up=f"the Lease {namespace}/{name} kept changing")


def stop_for(seconds: float, now: datetime) -> datetime:
    return now + timedelta(seconds=seconds)


def server_now(kube: Kube, namespace: str) -> datetime:
    """The API server's time, which the stop is counted from: the controller compares the stop
    with a clock kept in step with the API server's, while the machine running release-nodes (a
    laptop, a CI runner) may be minutes off, which would end the stop before it began.

    Read from a write the server stamps: a dry-run create of a Lease (`dryRun=All`: admitted,
    validated, never stored; the right to create Leases is the one the stop needs when there is
    no Lease yet) comes back with the `creationTimestamp` the server set, to the second (so the
    stop may end up to a second early). A response's Date header would say as much, but a
    proxy may add its own; the object's timestamp is the API server's."""
    body = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"generateName": "daemonjob-clock-", "namespace": namespace},
        "spec": {},
    }
    made = kube.create(path_for("coordination.k8s.io/v1", "leases", namespace), body, dryRun="All")
    stamped = parse_time(((made or {}).get("metadata") or {}).get("creationTimestamp"))
    if stamped is None:
        raise ApiError(
            500, "InternalError", "the API server's dry-run create of a Lease came back without a creationTimestamp"
        )
    return stamped
