"""A node's checked turn as its Job records it: the verdict on the Job, the turn's state from it.

nodework/nodecheck.py says what a checked turn is.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from daemonjob.domain.jobs.contract import ACTIVE, FAILED, SUCCEEDED, TERMINATING, job_state
from daemonjob.domain.shared.apinames import ANNOTATION_BOOT_ID, ANNOTATION_NODE_CHECK

__all__ = [
    "PASSED",
    "FAILED_CHECK",
    "JOB_FAILED",
    "Awaiting",
    "Verdict",
    "turn_state",
    "turn_of",
    "turn_shown",
    "turn_succeeded",
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
