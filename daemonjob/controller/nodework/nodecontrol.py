"""What node maintenance writes through: Nodes, evictions, a DaemonJob's finalizer.

Kept apart from JobControl because these are cluster-wide powers (nodes patch, pods/eviction
create) that only a cluster operator's opt-in grants (--node-maintenance-namespaces and
its ClusterRole). The real one is fenced like every other write; the fake in
`daemonjob.testing.doubles.fakes` records calls for unit tests.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from daemonjob.controller.runtime.fence import Fence, always, as_fence
from daemonjob.domain.shared.apinames import API_VERSION, PLURAL
from daemonjob.machinery.client.kube import PATCH_MERGE, ApiError, Kube, path_for

__all__ = ["NodeControl", "KubeNodeControl"]

LIST_PAGE = 500  # Nodes per page of a quorum list


class NodeControl(Protocol):
    """Each call raises ApiError as the API server answers."""

    def get_node(self, name: str) -> Mapping[str, Any]:
        """A fresh read: a cordon or an uncordon is decided on the Node as it is now, not as cached."""
        ...

    def list_nodes(self) -> list[Mapping[str, Any]]:
        """Every Node as etcd has it now (a quorum list, in pages): the records a cache may not
        have seen yet, read before a finalizer goes and by the orphan sweep."""
        ...

    def get_daemonjob(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        """A DaemonJob as etcd has it now; None when there is none of that name."""
        ...

    def patch_node(self, name: str, patch: Mapping[str, Any], resource_version: str) -> None:
        """A merge patch guarded by `resource_version` (409 Conflict if the Node changed since read)."""
        ...

    def pods_on_node(self, name: str) -> list[Mapping[str, Any]]:
        """The pods bound to node `name`, as the API server's cache has them (a moment old at most)."""
        ...

    def evict(self, namespace: str, name: str, uid: str | None, grace_period_seconds: int | None) -> None:
        """An eviction through the Eviction API (PodDisruptionBudgets apply: 429 when one refuses)."""
        ...

    def set_finalizers(self, namespace: str, name: str, finalizers: list[str], resource_version: str) -> None:
        """Replace a DaemonJob's finalizers, guarded by `resource_version`."""
        ...


class KubeNodeControl:
    """NodeControl on a Kube client, fenced by `fence`. The Eviction version is the newest the
    server offers (policy/v1 from Kubernetes 1.22, policy/v1beta1 before), asked once."""

    def __init__(self, kube: Kube, fence: Fence | Callable[[], bool] = always) -> None:
        self.kube = kube
        self.fence = as_fence(fence)
        self._eviction_version: str | None = None
        self._lock = threading.Lock()

    def get_node(self, name: str) -> Mapping[str, Any]:
        return self.kube.get(path_for("v1", "nodes", None, name))

    def list_nodes(self) -> list[Mapping[str, Any]]:
        items: list[Mapping[str, Any]] = []
        token = ""
        while True:
            params: dict[str, Any] = {"limit": LIST_PAGE}
            if token:
                params["continue"] = token
            page = self.kube.get(path_for("v1", "nodes"), **params)  # no resourceVersion: a quorum read
            items.extend(page.get("items") or ())
            token = (page.get("metadata") or {}).get("continue") or ""
            if not token:
                return items

    def get_daemonjob(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        try:
            return self.kube.get(path_for(API_VERSION, PLURAL, namespace, name))
        except ApiError as exc:
            if exc.not_found:
                return None
            raise

    def patch_node(self, name: str, patch: Mapping[str, Any], resource_version: str) -> None:
        body = {**patch, "metadata": {**(patch.get("metadata") or {}), "resourceVersion": resource_version}}
        with self.fence.writing("Node patch") as fenced:
            self.kube.patch(
                path_for("v1", "nodes", None, name), body, content_type=PATCH_MERGE, want_answer=False, **fenced
            )

    def pods_on_node(self, name: str) -> list[Mapping[str, Any]]:
        # resourceVersion=0: served from the API server's watch cache through its spec.nodeName
        # index, not a quorum read of every pod from etcd; a look a moment old is as good,
        # the drain looks again every DRAIN_POLL_INTERVAL.
        listed = self.kube.get(path_for("v1", "pods"), fieldSelector=f"spec.nodeName={name}", resourceVersion="0")
        return list(listed.get("items") or ())

    def eviction_version(self) -> str:
        with self._lock:
            if self._eviction_version is None:
                groups = self.kube.get("/apis/policy")
                versions = {v.get("version") for v in groups.get("versions") or ()}
                self._eviction_version = "policy/v1" if "v1" in versions else "policy/v1beta1"
            return self._eviction_version

    def evict(self, namespace: str, name: str, uid: str | None, grace_period_seconds: int | None) -> None:
        options: dict[str, Any] = {}
        if grace_period_seconds is not None:
            options["gracePeriodSeconds"] = grace_period_seconds
        if uid:
            options["preconditions"] = {"uid": uid}  # never a namesake that replaced it
        body = {
            "apiVersion": self.eviction_version(),
            "kind": "Eviction",
            "metadata": {"name": name, "namespace": namespace},
            "deleteOptions": options,
        }
        with self.fence.writing("eviction") as fenced:
            self.kube.create(path_for("v1", "pods", namespace, name, "eviction"), body, **fenced)

    def set_finalizers(self, namespace: str, name: str, finalizers: list[str], resource_version: str) -> None:
        body = {"metadata": {"finalizers": finalizers, "resourceVersion": resource_version}}
        with self.fence.writing("DaemonJob finalizer") as fenced:
            self.kube.patch(
                path_for(API_VERSION, PLURAL, namespace, name),
                body,
                content_type=PATCH_MERGE,
                want_answer=False,
                **fenced,
            )
