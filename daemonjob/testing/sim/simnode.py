"""The Nodes of the simulated kubelet: what one is made of and how it reads as Ready."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import structlog

from daemonjob.machinery.client.kube import ApiError, Kube, path_for
from daemonjob.testing.sim.simpod import now_micro, now_rfc3339
from daemonjob.testing.sim.simreboot import new_boot_id

__all__ = [
    "DEFAULT_CAPACITY",
    "DEFAULT_KUBELET_PORT",
    "LABEL_MANAGED",
    "NODE_ADDRESS",
    "NOT_READY_TAINT",
    "NodeSpec",
    "node_body",
    "node_conditions",
    "node_is_ready",
    "renew_lease",
    "wait_nodes_ready",
]

log = structlog.get_logger("daemonjob.sim")

DEFAULT_KUBELET_PORT = 10250
NODE_ADDRESS = "127.0.0.1"
LABEL_MANAGED = "sim.daemonjob.io/managed"
NOT_READY_TAINT = "node.kubernetes.io/not-ready"
DEFAULT_CAPACITY = {"cpu": "32", "memory": "256Gi", "pods": "250", "ephemeral-storage": "100Gi"}


@dataclass
class NodeSpec:
    name: str
    labels: dict[str, str] = field(default_factory=dict)
    taints: list[dict[str, str]] = field(default_factory=list)
    unschedulable: bool = False
    capacity: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_CAPACITY))
    boot_id: str = field(default_factory=new_boot_id)  # a new one each time the node reboots


def node_conditions(transition: bool = True) -> list[dict[str, str]]:
    """The conditions of a healthy node. Without `transition` (a heartbeat's report), no
    lastTransitionTime: merged by type, the one on the Node stays, as a kubelet leaves it
    while a condition does not change."""
    now = now_rfc3339()

    def cond(type_: str, status: str, reason: str) -> dict[str, str]:
        out = {"type": type_, "status": status, "reason": reason, "message": reason, "lastHeartbeatTime": now}
        if transition:
            out["lastTransitionTime"] = now
        return out

    return [
        cond("Ready", "True", "KubeletReady"),
        cond("MemoryPressure", "False", "KubeletHasSufficientMemory"),
        cond("DiskPressure", "False", "KubeletHasNoDiskPressure"),
        cond("PIDPressure", "False", "KubeletHasSufficientPID"),
    ]


def node_body(spec: NodeSpec, kubelet_port: int = DEFAULT_KUBELET_PORT) -> dict[str, Any]:
    labels = {
        "kubernetes.io/hostname": spec.name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        LABEL_MANAGED: "true",
        **spec.labels,
    }
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": spec.name, "labels": labels},
        "spec": {"taints": list(spec.taints), "unschedulable": spec.unschedulable},
        "status": {
            "capacity": dict(spec.capacity),
            "allocatable": dict(spec.capacity),
            "conditions": node_conditions(),
            "addresses": [{"type": "InternalIP", "address": NODE_ADDRESS}, {"type": "Hostname", "address": spec.name}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": kubelet_port}},
            "nodeInfo": {
                "kubeletVersion": "v1.20.2",
                "kubeProxyVersion": "v1.20.2",
                "operatingSystem": "linux",
                "architecture": "amd64",
                "containerRuntimeVersion": "sim://1.0",
                "osImage": "simulated",
                "kernelVersion": "",
                "machineID": "",
                "systemUUID": "",
                "bootID": spec.boot_id,
            },
        },
    }


def node_is_ready(node: Mapping[str, Any]) -> bool:
    conds = (node.get("status") or {}).get("conditions") or []
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conds)
    tainted = any(
        t.get("key") in (NOT_READY_TAINT, "node.kubernetes.io/unreachable")
        for t in (node.get("spec") or {}).get("taints") or []
    )
    return ready and not tainted


def renew_lease(kube: Kube, name: str, lease_duration: int, known: bool) -> None:
    """Renew node `name`'s Lease in kube-node-lease; create it (owned by the Node) if missing and `known`."""
    path = path_for("coordination.k8s.io/v1", "leases", "kube-node-lease", name)
    try:
        kube.patch(path, {"spec": {"renewTime": now_micro(), "holderIdentity": name}})
    except ApiError as exc:
        if not (exc.not_found and known):
            if not exc.not_found:
                log.warning("lease renewal failed", node=name, error=str(exc))
            return
        lease: dict[str, Any] = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": name, "namespace": "kube-node-lease"},
            "spec": {"holderIdentity": name, "leaseDurationSeconds": lease_duration, "renewTime": now_micro()},
        }
        try:
            node = kube.get(path_for("v1", "nodes", name=name))
            lease["metadata"]["ownerReferences"] = [
                {"apiVersion": "v1", "kind": "Node", "name": name, "uid": node["metadata"]["uid"]}
            ]
            kube.create(path_for("coordination.k8s.io/v1", "leases", "kube-node-lease"), lease)
        except ApiError as exc2:
            if not (exc2.already_exists or exc2.not_found):
                raise


def wait_nodes_ready(kube: Kube, wanted: set[str], timeout: float) -> None:
    """Until every node in `wanted` is Ready and carries no not-ready taint."""
    deadline = time.monotonic() + timeout
    missing: set[str] = wanted
    while time.monotonic() < deadline:
        items = kube.get(path_for("v1", "nodes"), labelSelector=LABEL_MANAGED).get("items", [])
        ready = {n["metadata"]["name"] for n in items if node_is_ready(n)}
        missing = wanted - ready
        if not missing:
            return
        time.sleep(0.5)
    raise TimeoutError(f"{len(missing)} node(s) not Ready after {timeout}s, e.g. {sorted(missing)[:5]}")
