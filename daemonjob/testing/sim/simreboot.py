"""A node reboot as the simulated kubelet plays it: the node's status while it is down, and
what its pods look like once the kubelet is back with a new boot ID.

A real reboot stops the kubelet (the node stops posting status and renewing its Lease, so
the node lifecycle controller marks it Unknown and taints it unreachable), kills every
container, and starts a kubelet with a new `status.nodeInfo.bootID`. That kubelet finds the
pods still bound to it with no containers: a pod with restartPolicy Never cannot run again
and is failed (its containers terminated with ContainerStatusUnknown, exit code 137, as the
kubelet reports a container it cannot find); the others have their containers started again
(restartCount + 1).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping
from typing import Any

from daemonjob.testing.sim.simpod import now_rfc3339, pod_conditions

__all__ = [
    "ANNOTATION_REBOOT",
    "ANNOTATION_STAY_DOWN_ON",
    "ANNOTATION_UNREADY_AFTER_REBOOT",
    "LOST_EXIT_CODE",
    "LOST_REASON",
    "down_conditions",
    "new_boot_id",
    "parse_downtime",
    "reboot_downtime",
    "status_after_restart",
]

ANNOTATION_REBOOT = "sim.daemonjob.io/reboot"  # on a pod: it reboots its node when it ends; the value: downtime
ANNOTATION_UNREADY_AFTER_REBOOT = "sim.daemonjob.io/unready-after-reboot"  # "true": restarted, never Ready again
ANNOTATION_STAY_DOWN_ON = "sim.daemonjob.io/stay-down-on"  # comma-separated nodes a reboot never brings back
LOST_REASON = "ContainerStatusUnknown"
LOST_EXIT_CODE = 137
LOST_MESSAGE = "The container could not be located when the pod was terminated"
NEVER = "never"
_DURATION = re.compile(r"^(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m)?(?:(\d+(?:\.\d+)?)s?)?$")


def new_boot_id() -> str:
    return str(uuid.uuid4())


def parse_downtime(text: str) -> float | None:
    """Seconds the node stays down ("20s", "1m30s", "20"); None: "never" (it does not come back).
    A value that reads as neither is taken as 10 seconds."""
    text = text.strip().lower()
    if text == NEVER:
        return None
    match = _DURATION.match(text)
    if not text or match is None:
        return 10.0
    hours, minutes, seconds = (float(g) if g else 0.0 for g in match.groups())
    return hours * 3600 + minutes * 60 + seconds


def reboot_downtime(pod: Mapping[str, Any]) -> tuple[bool, float | None]:
    """(whether the pod reboots its node when it ends, how long the node is down: None for ever,
    as on the nodes the stay-down-on annotation names)."""
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    text = annotations.get(ANNOTATION_REBOOT)
    if text is None:
        return False, None
    stay = {n.strip() for n in str(annotations.get(ANNOTATION_STAY_DOWN_ON, "")).split(",") if n.strip()}
    if (pod.get("spec") or {}).get("nodeName") in stay:
        return True, None
    return True, parse_downtime(str(text))


def down_conditions() -> list[dict[str, str]]:
    """The node's conditions as the node lifecycle controller writes them when the kubelet stops posting."""
    now = now_rfc3339()
    message = "Kubelet stopped posting node status."
    return [
        {
            "type": t,
            "status": "Unknown",
            "reason": "NodeStatusUnknown",
            "message": message,
            "lastHeartbeatTime": now,
            "lastTransitionTime": now,
        }
        for t in ("Ready", "MemoryPressure", "DiskPressure", "PIDPressure")
    ]


def status_after_restart(pod: Mapping[str, Any]) -> dict[str, Any]:
    """The pod's status as the restarted kubelet writes it (see the module's doc)."""
    now = now_rfc3339()
    spec = pod.get("spec") or {}
    containers = spec.get("containers") or []
    started = (pod.get("status") or {}).get("startTime") or now
    if spec.get("restartPolicy", "Always") == "Never":
        terminated = {
            "exitCode": LOST_EXIT_CODE,
            "reason": LOST_REASON,
            "message": LOST_MESSAGE,
            "startedAt": started,
            "finishedAt": now,
        }
        return {
            "phase": "Failed",
            "conditions": pod_conditions("False"),
            "containerStatuses": [
                {
                    "name": c["name"],
                    "image": c.get("image", ""),
                    "imageID": "",
                    "ready": False,
                    "started": False,
                    "restartCount": 0,
                    "state": {"terminated": terminated},
                }
                for c in containers
            ],
        }
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    ready = annotations.get(ANNOTATION_UNREADY_AFTER_REBOOT, "") != "true"
    return {
        "phase": "Running",
        "conditions": pod_conditions("True" if ready else "False"),
        "containerStatuses": [
            {
                "name": c["name"],
                "image": c.get("image", ""),
                "imageID": "",
                "ready": ready,
                "started": True,
                "restartCount": 1,
                "state": {"running": {"startedAt": now}},
                "lastState": {"terminated": {"exitCode": 255, "reason": "Unknown", "finishedAt": now}},
            }
            for c in containers
        ],
    }
