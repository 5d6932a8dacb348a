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

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from daemonjob.domain.jobs.contract import (
    ACTIVE,
    ANNOTATION_BOOT_ID,
    ANNOTATION_NODE_CHECK,
    FAILED,
    SUCCEEDED,
    TERMINATING,
    UNHEALTHY_TAINTS,
    job_state,
    parse_time,
    with_reboot_fields,
)

__all__ = [
    "ANNOTATION_BOOT_ID",
    "ANNOTATION_NODE_CHECK",
    "PASSED",
    "FAILED_CHECK",
    "JOB_FAILED",
    "Awaiting",
    "DaemonSetPod",
    "HealthInput",
    "Verdict",
    "boot_id",
    "turn_state",
    "turn_of",
    "turn_shown",
    "turn_succeeded",
    "node_ready",
    "ready_since",
    "unhealthy_taints",
    "with_reboot_fields",
]

PASSED = "Passed"
FAILED_CHECK = "Failed"
# The verdict of a checked turn whose Job failed, no reboot expected: the Job's own reason says why
JOB_FAILED = "JobFailed"


@dataclass(frozen=True, slots=True)
class Verdict:
    """The outcome of a node's turn as written on its Job."""

    verdict: str  # PASSED or FAILED_CHECK
    reason: str = ""
    message: str = ""

    def text(self) -> str:
        body = {"verdict": self.verdict, "reason": self.reason, "message": self.message}
        return json.dumps({k: v for k, v in body.items() if v}, sort_keys=True, separators=(",", ":"))

    @classmethod
    def parse(cls, text: Any) -> Verdict | None:
        try:
            body = json.loads(text) if isinstance(text, str) else None
        except ValueError:
            return None
        if not isinstance(body, Mapping) or body.get("verdict") not in (PASSED, FAILED_CHECK):
            return None
        reason, message = body.get("reason", ""), body.get("message", "")
        text = message if isinstance(message, str) else ""
        return cls(body["verdict"], reason if isinstance(reason, str) else "", text)


@dataclass(frozen=True, slots=True)
class Awaiting:
    """A node whose turn is not over though its Job may be: the gate (gates/health.py) reads it."""

    node: str
    job: str
    uid: str | None
    boot_id: str  # the node's boot ID when the Job was created
    created: datetime
    finished: datetime | None  # when the Job finished, if it did
    job_failed: bool


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


def turn_state(state: str, boot: str | None, verdict: Verdict | None) -> str:
    """The state of the node's turn a Job stands for, from the Job alone: its verdict once written
    (a reboot Job failed by its node's reboot is a turn that passed; a Job that succeeded on a node
    left unhealthy is a turn that failed); a checked turn without one is not over (active); an
    unchecked Job's own state. A Job being deleted stays terminating: a rerun by hand."""
    if state == TERMINATING:
        return state
    if verdict is not None:
        return FAILED if verdict.verdict == FAILED_CHECK else SUCCEEDED
    return ACTIVE if boot is not None else state


def turn_shown(job: Mapping[str, Any], state: str, reason: str, message: str) -> tuple[str, str, str]:
    """A node's row as `kubectl daemonjob status` shows it: a checked turn's verdict over its
    Job's own state (a Job failed by its node's reboot is a turn that passed); a turn awaiting
    its verdict is active."""
    annotations = (job.get("metadata") or {}).get("annotations") or {}
    verdict = Verdict.parse(annotations.get(ANNOTATION_NODE_CHECK))
    if verdict is not None:
        if verdict.verdict == PASSED:
            return SUCCEEDED, reason, message
        if verdict.reason == JOB_FAILED:
            return FAILED, reason, message  # the Job's own failure says more
        return FAILED, verdict.reason, verdict.message
    if ANNOTATION_BOOT_ID in annotations and state != ACTIVE:
        return ACTIVE, "WaitingForNodeHealth", "the turn waits for its node's reboot or health check"
    return state, reason, message


def turn_of(job: Mapping[str, Any]) -> tuple[str, Verdict | None]:
    """The turn's state of a Job as the API server or the cache holds it (turn_state), and its verdict."""
    annotations = (job.get("metadata") or {}).get("annotations") or {}
    verdict = Verdict.parse(annotations.get(ANNOTATION_NODE_CHECK))
    boot = annotations.get(ANNOTATION_BOOT_ID)
    return turn_state(job_state(job), boot if isinstance(boot, str) else None, verdict), verdict


def turn_succeeded(job: Mapping[str, Any]) -> bool:
    """Whether the node's turn this Job stands for succeeded, as the order across DaemonJobs
    (`after`) reads it: a checked turn by its verdict only (a reboot Job failed by its node's
    reboot may have passed; one that succeeded may still await its node's health)."""
    return turn_of(job)[0] == SUCCEEDED
