"""What a simulated pod does, as its `sim.daemonjob.io/*` annotations say (kubelet.py's
docstring lists them): its exit code, how long it runs, what it prints, how it ends."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any

from daemonjob.domain.shared.timestamps import format_time
from daemonjob.machinery.client.kube import micro_time

__all__ = [
    "ANNOTATION_DURATION",
    "ANNOTATION_EXIT_CODE",
    "ANNOTATION_FAILURE_OUTPUT",
    "ANNOTATION_FAIL_ON",
    "ANNOTATION_FAIL_ATTEMPTS",
    "ANNOTATION_IMAGE_PULL",
    "LABEL_ATTEMPT",
    "pull_failure_status",
    "ANNOTATION_MESSAGE",
    "ANNOTATION_MESSAGES",
    "ANNOTATION_OUTPUT",
    "ANNOTATION_READY",
    "ANNOTATION_REASON",
    "OOM_EXIT_CODE",
    "end_status",
    "now_micro",
    "now_rfc3339",
    "pod_conditions",
    "pod_output",
    "pod_transform",
    "sim_duration",
    "sim_exit_code",
    "sim_ready",
]

ANNOTATION_EXIT_CODE = "sim.daemonjob.io/exit-code"
ANNOTATION_DURATION = "sim.daemonjob.io/duration"
ANNOTATION_MESSAGE = "sim.daemonjob.io/message"
ANNOTATION_REASON = "sim.daemonjob.io/reason"
ANNOTATION_FAIL_ON = "sim.daemonjob.io/fail-on"
# comma-separated attempts (daemonjob.io/attempt on the pod, 0 without it) that fail; others succeed
ANNOTATION_FAIL_ATTEMPTS = "sim.daemonjob.io/fail-attempts"
# "Never": the image is never pulled, the pod stays Pending (ImagePullBackOff) until deleted
ANNOTATION_IMAGE_PULL = "sim.daemonjob.io/image-pull"
LABEL_ATTEMPT = "daemonjob.io/attempt"
OOM_EXIT_CODE = 137
ANNOTATION_OUTPUT = "sim.daemonjob.io/output"
ANNOTATION_FAILURE_OUTPUT = "sim.daemonjob.io/failure-output"
# A JSON object {node: message}: the termination message on those nodes, over the message
# annotation (an audit whose nodes report different facts).
ANNOTATION_MESSAGES = "sim.daemonjob.io/messages"
ANNOTATION_READY = "sim.daemonjob.io/ready"  # "false": Running, never Ready (a crash-looping agent, say)


def now_rfc3339() -> str:
    return format_time(datetime.now(timezone.utc))


def now_micro() -> str:
    return micro_time(datetime.now(timezone.utc))


def _annotation(pod: Mapping[str, Any], key: str, default: str) -> str:
    return ((pod.get("metadata") or {}).get("annotations") or {}).get(key, default)


def _node_of(pod: Mapping[str, Any]) -> str:
    return (pod.get("spec") or {}).get("nodeName") or ""


def _spared(pod: Mapping[str, Any]) -> bool:
    """True when fail-on names nodes and this pod's node is not one of them, or fail-attempts
    names attempts and this pod's is not one of them."""
    fail_on = _annotation(pod, ANNOTATION_FAIL_ON, "")
    if fail_on and _node_of(pod) not in {n.strip() for n in fail_on.split(",")}:
        return True
    attempts = _annotation(pod, ANNOTATION_FAIL_ATTEMPTS, "")
    attempt = ((pod.get("metadata") or {}).get("labels") or {}).get(LABEL_ATTEMPT, "0")
    return bool(attempts) and attempt not in {a.strip() for a in attempts.split(",")}


def _fails_somewhere(pod: Mapping[str, Any]) -> bool:
    return bool(_annotation(pod, ANNOTATION_FAIL_ON, "") or _annotation(pod, ANNOTATION_FAIL_ATTEMPTS, ""))


def pull_failure_status(pod: Mapping[str, Any]) -> dict[str, Any] | None:
    """The Pending status of a pod whose image is never pulled (image-pull: Never), else None."""
    if _annotation(pod, ANNOTATION_IMAGE_PULL, "") != "Never":
        return None
    statuses = [
        {
            "name": c["name"],
            "image": c.get("image", ""),
            "imageID": "",
            "ready": False,
            "started": False,
            "restartCount": 0,
            "state": {
                "waiting": {
                    "reason": "ImagePullBackOff",
                    "message": f'Back-off pulling image "{c.get("image", "")}"',
                }
            },
        }
        for c in (pod.get("spec") or {}).get("containers", [])
    ]
    conditions = pod_conditions("False")
    return {"phase": "Pending", "hostIP": "10.0.0.1", "conditions": conditions, "containerStatuses": statuses}


def sim_exit_code(pod: Mapping[str, Any]) -> int:
    if _spared(pod):
        return 0
    oom = _annotation(pod, ANNOTATION_REASON, "") == "OOMKilled"
    default = str(OOM_EXIT_CODE) if oom else "1" if _fails_somewhere(pod) else "0"
    try:
        return int(_annotation(pod, ANNOTATION_EXIT_CODE, default))
    except ValueError:
        return 1


def sim_ready(pod: Mapping[str, Any]) -> bool:
    """Whether the running pod's containers are Ready (all but where the ready annotation says false)."""
    return _annotation(pod, ANNOTATION_READY, "true").lower() != "false"


def sim_duration(pod: Mapping[str, Any]) -> float:
    try:
        return max(0.0, float(_annotation(pod, ANNOTATION_DURATION, "1")))
    except ValueError:
        return 1.0


def pod_conditions(ready: str) -> list[dict[str, str]]:
    now = now_rfc3339()
    return [
        {"type": t, "status": s, "lastTransitionTime": now}
        for t, s in (("Initialized", "True"), ("Ready", ready), ("ContainersReady", ready), ("PodScheduled", "True"))
    ]


def pod_output(pod: Mapping[str, Any]) -> str:
    """What the simulated container printed for its node, newline-ended: the failure output
    where it exits non-zero (if the pod has one), the output otherwise."""
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    text = annotations.get(ANNOTATION_OUTPUT, "")
    if ANNOTATION_FAILURE_OUTPUT in annotations and sim_exit_code(pod) != 0:
        text = annotations[ANNOTATION_FAILURE_OUTPUT]
    text = text.replace("{node}", (pod.get("spec") or {}).get("nodeName") or "")
    return text if not text or text.endswith("\n") else text + "\n"


def end_status(pod: Mapping[str, Any], started: str, now: str) -> dict[str, Any]:
    """Succeeded or Failed, as the exit-code annotation says, with terminated containers."""
    code = sim_exit_code(pod)
    spared = _spared(pod)
    reason = ("" if spared else _annotation(pod, ANNOTATION_REASON, "")) or ("Completed" if code == 0 else "Error")
    message = "" if spared else _annotation(pod, ANNOTATION_MESSAGE, "").replace("{node}", _node_of(pod))
    try:
        per_node = json.loads(_annotation(pod, ANNOTATION_MESSAGES, "{}"))
    except ValueError:
        per_node = {}
    if isinstance(per_node, dict) and _node_of(pod) in per_node:
        message = str(per_node[_node_of(pod)])
    statuses = []
    for c in pod["spec"].get("containers", []):
        terminated = {"exitCode": code, "reason": reason, "startedAt": started, "finishedAt": now}
        text = message
        if not text and code != 0 and c.get("terminationMessagePolicy") == "FallbackToLogsOnError":
            text = "".join(pod_output(pod).splitlines(keepends=True)[-80:])[-2048:]  # the kubelet's bounds
        if text:
            terminated["message"] = text
        statuses.append(
            {
                "name": c["name"],
                "image": c.get("image", ""),
                "imageID": "",
                "ready": False,
                "started": False,
                "restartCount": 0,
                "state": {"terminated": terminated},
            }
        )
    return {
        "phase": "Succeeded" if code == 0 else "Failed",
        "conditions": pod_conditions("False"),
        "containerStatuses": statuses,
    }


def pod_transform(pod: dict[str, Any]) -> dict[str, Any]:
    """What the simulated kubelet keeps of a pod: identity, its sim annotations, its containers."""
    spec = pod.get("spec") or {}
    meta = pod.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    return {
        "metadata": {
            k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion", "deletionTimestamp") if k in meta
        }
        | {"annotations": {k: v for k, v in annotations.items() if k.startswith("sim.")}}
        | {"labels": {k: v for k, v in (meta.get("labels") or {}).items() if k == LABEL_ATTEMPT}},
        "spec": {
            "nodeName": spec.get("nodeName"),
            "restartPolicy": spec.get("restartPolicy", "Always"),
            "containers": [
                {
                    "name": c["name"],
                    "image": c.get("image", ""),
                    "terminationMessagePolicy": c.get("terminationMessagePolicy", "File"),
                }
                for c in spec.get("containers", [])
            ],
        },
        "status": {k: v for k, v in (pod.get("status") or {}).items() if k in ("phase", "startTime")},
    }
