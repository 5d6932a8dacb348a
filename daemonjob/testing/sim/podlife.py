"""What the simulated kubelet (kubelet.py) does with a pod bound to one of its nodes: start it,
end it as its annotations say, write its status, confirm its delete, find it for its logs.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import structlog

from daemonjob.machinery.cache.informer import Informer, Tombstone, deleted_object
from daemonjob.machinery.client.kube import PATCH_STRATEGIC, ApiError, Kube, path_for
from daemonjob.testing.sim.simnode import (
    NodeSpec,
)
from daemonjob.testing.sim.simpod import (
    end_status,
    now_rfc3339,
    pod_conditions,
    pod_transform,
    pull_failure_status,
    sim_duration,
    sim_ready,
)
from daemonjob.testing.sim.simreboot import reboot_downtime
from daemonjob.testing.sim.timers import Timers

__all__ = ["PodLife"]

log = structlog.get_logger("daemonjob.sim")


class PodLife:
    """The pods' part of SimKubelet, which sets these attributes."""

    kube: Kube
    nodes: dict[str, NodeSpec]
    down: set[str]
    reboot: Callable[[str, float | None], None]
    _boots: Counter[str]
    _pods_seen: dict[str, str]
    _lock: threading.Lock
    _pool: ThreadPoolExecutor
    _timers: Timers
    _pods: Informer

    def _on_pod(self, pod: Mapping[str, Any]) -> None:
        spec = pod.get("spec") or {}
        if spec.get("nodeName") not in self.nodes:
            return
        meta = pod["metadata"]
        uid = meta["uid"]
        phase = (pod.get("status") or {}).get("phase") or "Pending"
        if meta.get("deletionTimestamp"):
            stage = "delete"
        elif phase == "Pending":
            stage = "start"
        elif phase == "Running":
            stage = "finish"
        else:
            return
        with self._lock:
            if self._pods_seen.get(uid) in (stage, "delete"):
                return
            self._pods_seen[uid] = stage
        ns, name = meta["namespace"], meta["name"]
        node = spec["nodeName"]
        if stage == "delete":
            self._pool.submit(self._confirm_delete, ns, name, uid)
        elif stage == "start":
            self._pool.submit(self._start_pod, pod)
        else:
            boot = self._boots[node]
            self._timers.at(
                time.monotonic() + sim_duration(pod), lambda: self._pool.submit(self._finish_pod, pod, boot)
            )

    def _find_pod(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        """The pod a log request names: from the watch cache, else a fresh read (the cache may lag)."""
        pod: Mapping[str, Any] | None = self._pods.store.get(f"{namespace}/{name}")
        if pod is None:
            try:
                pod = pod_transform(self.kube.get(path_for("v1", "pods", namespace, name)))
            except ApiError:
                return None
        return pod if (pod.get("spec") or {}).get("nodeName") in self.nodes else None

    def _on_pod_gone(self, pod: Mapping[str, Any] | Tombstone) -> None:
        obj = deleted_object(pod)
        with self._lock:
            self._pods_seen.pop(obj["metadata"]["uid"], None)

    def _start_pod(self, pod: Mapping[str, Any]) -> None:
        if pod["spec"]["nodeName"] in self.down:
            return  # started once the node is back
        now = now_rfc3339()
        stuck = pull_failure_status(pod)
        if stuck is not None:  # Pending for good, as a kubelet that never pulls the image leaves it
            self._patch_pod_status(pod, {"startTime": now, **stuck})
            return
        if sim_duration(pod) == 0:  # no time Running: its end at once, in one write instead of two
            status = {"startTime": now, "hostIP": "10.0.0.1", "podIP": "10.244.0.1", **end_status(pod, now, now)}
            self._patch_pod_status(pod, status)
            return
        statuses = [
            {
                "name": c["name"],
                "image": c.get("image", ""),
                "imageID": "",
                "ready": sim_ready(pod),
                "started": True,
                "restartCount": 0,
                "state": {"running": {"startedAt": now}},
            }
            for c in pod["spec"].get("containers", [])
        ]
        status = {
            "phase": "Running",
            "startTime": now,
            "hostIP": "10.0.0.1",
            "podIP": "10.244.0.1",
            "conditions": pod_conditions("True" if sim_ready(pod) else "False"),
            "containerStatuses": statuses,
        }
        self._patch_pod_status(pod, status)

    def _finish_pod(self, pod: Mapping[str, Any], boot: int) -> None:
        node = pod["spec"]["nodeName"]
        if node in self.down or self._boots[node] != boot:
            return  # killed by a reboot
        reboots, downtime = reboot_downtime(pod)
        if reboots:
            self.reboot(node, downtime)
            return
        now = now_rfc3339()
        started = (pod.get("status") or {}).get("startTime") or now
        self._patch_pod_status(pod, end_status(pod, started, now))

    def _patch_pod_status(self, pod: Mapping[str, Any], status: dict[str, Any]) -> None:
        meta = pod["metadata"]
        try:
            self.kube.patch(
                path_for("v1", "pods", meta["namespace"], meta["name"], "status"),
                {"metadata": {"uid": meta["uid"]}, "status": status},
                content_type=PATCH_STRATEGIC,
            )
        except ApiError as exc:
            if not (exc.not_found or exc.conflict):
                log.warning("pod status update failed", pod=meta["name"], error=str(exc))

    def _confirm_delete(self, ns: str, name: str, uid: str) -> None:
        try:
            self.kube.delete(path_for("v1", "pods", ns, name), {"gracePeriodSeconds": 0, "preconditions": {"uid": uid}})
        except ApiError as exc:
            if not (exc.not_found or exc.conflict):
                log.warning("pod delete failed", pod=name, error=str(exc))
