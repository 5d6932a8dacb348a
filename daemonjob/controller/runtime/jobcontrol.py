"""What the controller writes through: Jobs, DaemonJob status, Events.

Every write of the controller goes through a `JobControl`, as the Kubernetes controllers
write pods through a PodControlInterface: the real one talks to the API server, the fake
in `daemonjob.testing.doubles.fakes` records calls for unit tests. The real one asks the fence
before each write and again as the write's first byte is sent, and bounds its timeout by
what is left of the lease, so a process that no longer surely holds the leader Lease
writes nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from daemonjob.controller.runtime.events import EventRecorder
from daemonjob.controller.runtime.fence import Fence, NotLeader, always, as_fence
from daemonjob.domain.shared.apinames import API_VERSION, PLURAL
from daemonjob.machinery.client.kube import PATCH_MERGE, PATCH_STRATEGIC, Kube, path_for

__all__ = ["JobControl", "KubeJobControl", "NotLeader", "always"]


class JobControl(Protocol):
    """The writes of the act layer. Each raises ApiError as the API server answers."""

    def may_write(self) -> bool:
        """False once the process must stop writing (leadership lost or in doubt)."""
        ...

    def create_job(self, namespace: str, body: Mapping[str, Any]) -> None: ...

    def create_jobs(self, namespace: str, bodies: Sequence[Mapping[str, Any]]) -> list[Exception | None]:
        """Several creates sent together (pipelined on one connection); each one's outcome in
        order: None when created, else its error (ApiError as answered, NotLeader, a network failure)."""
        ...

    def delete_job(self, namespace: str, name: str, uid: str | None, propagation: str = "Foreground") -> None:
        """Foreground delete by default (its pods are gone before the Job, so a node never runs
        two Jobs); with `uid`, only that Job (never a newer namesake)."""
        ...

    def get_job(self, namespace: str, name: str) -> Mapping[str, Any]:
        """A fresh read, to learn who controls a Job whose create hit AlreadyExists."""
        ...

    def adopt_job(self, namespace: str, name: str, job_uid: str, owner: Mapping[str, Any]) -> None:
        """Add `owner` as the controller of an orphaned Job, keeping its other owners (uid precondition)."""
        ...

    def relabel_job(
        self, namespace: str, name: str, job_uid: str, labels: Mapping[str, str], annotations: Mapping[str, str]
    ) -> None:
        """Put back the identity labels and annotations of a Job this DaemonJob controls (uid precondition)."""
        ...

    def list_pods(self, namespace: str, label_selector: str) -> list[Mapping[str, Any]]:
        """The pods of one Job (a start check, starts.py), read once at its start timeout."""
        ...

    def patch_job(self, namespace: str, name: str, job_uid: str, patch: Mapping[str, Any]) -> None:
        """Merge-patch a Job this DaemonJob controls (uid precondition): a start check's verdict."""
        ...

    def get_daemonjob(self, namespace: str, name: str) -> Mapping[str, Any]:
        """A fresh read of a DaemonJob, checked before adopting (ControllerRefManager)."""
        ...

    def patch_status(self, namespace: str, name: str, status: Mapping[str, Any], resource_version: str | None) -> None:
        """Merge-patch the status; with `resource_version`, 409 Conflict if it is stale."""
        ...

    def record_event(self, obj: Mapping[str, Any], type_: str, reason: str, message: str) -> None: ...


class KubeJobControl:
    """JobControl on a Kube client, fenced by `fence` (the elector's, or any predicate)."""

    def __init__(
        self, kube: Kube, events: EventRecorder | None = None, fence: Fence | Callable[[], bool] = always
    ) -> None:
        self.kube = kube
        self.events = events
        self.fence = as_fence(fence)

    def may_write(self) -> bool:
        return self.fence()

    def create_job(self, namespace: str, body: Mapping[str, Any]) -> None:
        with self.fence.writing("Job create") as fenced:
            # The created Job comes back through the watch: its answer is not decoded here.
            self.kube.create(path_for("batch/v1", "jobs", namespace), dict(body), want_answer=False, **fenced)

    def create_jobs(self, namespace: str, bodies: Sequence[Mapping[str, Any]]) -> list[Exception | None]:
        try:
            with self.fence.writing("Job create") as fenced:
                return self.kube.create_pipelined(path_for("batch/v1", "jobs", namespace), bodies, **fenced)
        except NotLeader as exc:
            return [exc] * len(bodies)

    def delete_job(self, namespace: str, name: str, uid: str | None, propagation: str = "Foreground") -> None:
        options: dict[str, Any] = {"propagationPolicy": propagation}
        if uid:
            options["preconditions"] = {"uid": uid}
        with self.fence.writing("Job delete") as fenced:
            self.kube.delete(path_for("batch/v1", "jobs", namespace, name), options, want_answer=False, **fenced)

    def get_job(self, namespace: str, name: str) -> Mapping[str, Any]:
        return self.kube.get(path_for("batch/v1", "jobs", namespace, name))

    def adopt_job(self, namespace: str, name: str, job_uid: str, owner: Mapping[str, Any]) -> None:
        """A strategic merge patch, as ControllerRefManager's: ownerReferences merge by uid, so
        the Job's other owners stay, and the API server refuses (422) a second controller
        reference or a namesake Job (the uid is immutable)."""
        patch = {"metadata": {"uid": job_uid, "ownerReferences": [dict(owner)]}}
        with self.fence.writing("Job adoption") as fenced:
            self.kube.patch(
                path_for("batch/v1", "jobs", namespace, name),
                patch,
                content_type=PATCH_STRATEGIC,
                want_answer=False,
                **fenced,
            )

    def relabel_job(
        self, namespace: str, name: str, job_uid: str, labels: Mapping[str, str], annotations: Mapping[str, str]
    ) -> None:
        patch = {"metadata": {"uid": job_uid, "labels": dict(labels), "annotations": dict(annotations)}}
        with self.fence.writing("Job relabel") as fenced:
            self.kube.patch(
                path_for("batch/v1", "jobs", namespace, name),
                patch,
                content_type=PATCH_MERGE,
                want_answer=False,
                **fenced,
            )

    def list_pods(self, namespace: str, label_selector: str) -> list[Mapping[str, Any]]:
        answer = self.kube.get(path_for("v1", "pods", namespace), labelSelector=label_selector)
        return list(answer.get("items") or ())

    def patch_job(self, namespace: str, name: str, job_uid: str, patch: Mapping[str, Any]) -> None:
        body = {**patch, "metadata": {**(patch.get("metadata") or {}), "uid": job_uid}}
        with self.fence.writing("Job patch") as fenced:
            self.kube.patch(
                path_for("batch/v1", "jobs", namespace, name),
                body,
                content_type=PATCH_MERGE,
                want_answer=False,
                **fenced,
            )

    def get_daemonjob(self, namespace: str, name: str) -> Mapping[str, Any]:
        return self.kube.get(path_for(API_VERSION, PLURAL, namespace, name))

    def patch_status(self, namespace: str, name: str, status: Mapping[str, Any], resource_version: str | None) -> None:
        body: dict[str, Any] = {"status": dict(status)}
        if resource_version:
            body["metadata"] = {"resourceVersion": resource_version}
        with self.fence.writing("status patch") as fenced:
            self.kube.patch(
                path_for(API_VERSION, PLURAL, namespace, name, "status"),
                body,
                content_type=PATCH_MERGE,
                want_answer=False,
                **fenced,
            )

    def record_event(self, obj: Mapping[str, Any], type_: str, reason: str, message: str) -> None:
        if self.events is not None and self.fence():
            self.events.event(obj, type_, reason, message)
