"""The Nodes of the simulated kubelet: what one is made of and how it reads as Ready."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from daemonjob.testing.simpod import now_rfc3339

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
]

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


def node_conditions() -> list[dict[str, str]]:
    now = now_rfc3339()

    def cond(type_: str, status: str, reason: str) -> dict[str, str]:
        return {
            "type": type_,
            "status": status,
            "reason": reason,
            "message": reason,
            "lastHeartbeatTime": now,
            "lastTransitionTime": now,
        }

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
                "bootID": "",
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
