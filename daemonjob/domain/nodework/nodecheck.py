"""A node's turn after its Job: the reboot it expects and the health check, read from the
objects alone, so that a restarted controller reads the same turn.

A Job created while the spec asks for either carries the node's boot ID at its creation
(`daemonjob.io/boot-id`): the turn's start, recorded where a restart finds it. Until the
controller writes the turn's verdict on the Job (`daemonjob.io/node-check`, Passed or
Failed), the node's turn is not over: it counts as active and holds its maxParallel slot
(and, with nodeMaintenance, its cordon), whatever the Job's own state. The verdict makes the
outcome stick: a node that passed does not fail because it goes NotReady an hour later.

A reboot Job is built so that it never runs twice (`with_reboot_fields`): backoffLimit 0, a
podFailurePolicy failing the Job on a disruption, podReplacementPolicy Failed, and the pod
tolerating the not-ready and unreachable NoExecute taints so that the taint manager does not
delete it while the node is down (a deleted pod is re-created by a Job controller that does
not count it as failed, as 1.20's does). An API server that does not know podFailurePolicy
or podReplacementPolicy (1.20) drops them; there backoffLimit 0 with restartPolicy Never is
what holds: the restarted kubelet fails the pod it finds without containers, and the Job fails.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from daemonjob.domain.jobs.jobbody import UNHEALTHY_TAINTS
from daemonjob.domain.shared.timestamps import parse_time

__all__ = ["DaemonSetPod", "HealthInput", "boot_id", "node_ready", "ready_since", "unhealthy_taints"]


def _ready(node: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    for cond in ((node or {}).get("status") or {}).get("conditions") or ():
        if cond.get("type") == "Ready":
            return cond
    return None


def node_ready(node: Mapping[str, Any] | None) -> str:
    """The Ready condition's status: "True", "False" or "Unknown" (no condition: "Unknown")."""
    cond = _ready(node)
    return str(cond.get("status") or "Unknown") if cond is not None else "Unknown"


def ready_since(node: Mapping[str, Any] | None) -> datetime | None:
    """When the Ready condition last changed."""
    cond = _ready(node)
    return parse_time(cond.get("lastTransitionTime")) if cond is not None else None


def boot_id(node: Mapping[str, Any] | None) -> str:
    return str((((node or {}).get("status") or {}).get("nodeInfo") or {}).get("bootID") or "")


def unhealthy_taints(node: Mapping[str, Any] | None) -> list[str]:
    """The not-ready and unreachable taints on the node (the node lifecycle controller's)."""
    taints = ((node or {}).get("spec") or {}).get("taints") or ()
    return sorted({t.get("key") for t in taints if t.get("key") in UNHEALTHY_TAINTS})


@dataclass(frozen=True, slots=True)
class DaemonSetPod:
    """A pod of a DaemonSet the health check names, on a checked node, as last read."""

    daemon_set: str  # namespace/name
    pod: str  # namespace/name
    ready: bool
    since: datetime | None  # when its Ready condition last changed


@dataclass(frozen=True, slots=True)
class HealthInput:
    """The named DaemonSets' pods on the nodes being checked, as the act layer last read them
    (a list per checked node, no pod watch); a node not here has not been read yet."""

    pods: Mapping[str, tuple[DaemonSetPod, ...]] = field(default_factory=dict)
