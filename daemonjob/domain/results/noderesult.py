"""A node's result: what its Job of one revision or run ended with, kept after the Job and pod.

Pure: built from a Job and its pod as the API server returns them, so the controller
records and the plugin shows one and the same value. A result is a flat JSON object
(camelCase, as the report objects store it); the outcome of a node is its exit code and
termination message, or one field of a JSON message (`--group-by .kernel`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from daemonjob import defaults
from daemonjob.domain.jobs.contract import (
    ACTIVE,
    FAILED,
    SUCCEEDED,
    job_attempt,
    job_node,
    job_revision,
    job_run,
    job_state,
    job_template_hash,
)
from daemonjob.domain.jobs.turnverdict import FAILED_CHECK, JOB_FAILED, turn_of

__all__ = [
    "NO_FIELD",
    "NOT_JSON",
    "cut_message",
    "outcome_of",
    "pod_of_job",
    "result_of",
    "rollout_key",
]

NOT_JSON = "(not JSON)"  # what --group-by .field reads from a message that is no JSON object
NO_FIELD = "(no such field)"


def rollout_key(revision: str | None, run: str | None) -> str:
    """What results are kept by: the run of a scheduled or run-now Job, else its revision."""
    return run or revision or ""


def cut_message(text: str, limit: int = defaults.RESULT_MESSAGE_BYTES) -> str:
    """At most `limit` bytes of UTF-8, cut on a character boundary."""
    raw = text.encode()
    return text if len(raw) <= limit else raw[:limit].decode(errors="ignore")


def _terminated(pod: Mapping[str, Any]) -> tuple[str, Mapping[str, Any]] | None:
    """The container that says how the pod ended: the first that failed, else the first that ended."""
    ended = [
        (c.get("name") or "", (c.get("state") or {}).get("terminated") or {})
        for c in (pod.get("status") or {}).get("containerStatuses") or ()
    ]
    ended = [(name, t) for name, t in ended if t]
    return next(((n, t) for n, t in ended if t.get("exitCode")), ended[0] if ended else None)


def pod_of_job(pods: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The pod that ended the Job: the newest that finished (a Job with backoffLimit may have several)."""
    if len(pods) == 1:
        return pods[0]
    done = [p for p in pods if _terminated(p) is not None]
    return max(done, key=lambda p: (p.get("metadata") or {}).get("creationTimestamp") or "", default=None)


def _job_condition(job: Mapping[str, Any]) -> Mapping[str, Any]:
    for cond in (job.get("status") or {}).get("conditions") or ():
        if cond.get("type") in ("Complete", "Failed") and cond.get("status") == "True":
            return cond
    return {}


def result_of(job: Mapping[str, Any], pod: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The result of a finished Job (None while it runs), from its pod if that is still there.
    A checked turn's result is its verdict's (None until written): a node left unhealthy fails
    with the check's reason and message, a reboot Job failed by its reboot succeeds.

    Without the pod (deleted, or a Job that ended without one) the Job's own condition says
    what it can: the reason (BackoffLimitExceeded, DeadlineExceeded...) and its message."""
    turn, verdict = turn_of(job)
    state = job_state(job)
    if turn == ACTIVE:
        return None  # a checked turn awaiting its verdict (nodecheck.py): not over
    if state not in (SUCCEEDED, FAILED):
        meta_state = _job_condition(job).get("type")
        if meta_state is None:
            return None
        state = SUCCEEDED if meta_state == "Complete" else FAILED
    if turn in (SUCCEEDED, FAILED):
        state = turn  # the turn's verdict, not the Job's own state
    meta = job.get("metadata") or {}
    out: dict[str, Any] = {"node": job_node(job) or "", "state": state, "job": meta.get("name") or ""}
    if meta.get("uid"):
        out["jobUID"] = meta["uid"]
    revision, run, attempt = job_revision(job), job_run(job), job_attempt(job)
    out["revision"] = revision or ""
    if template_hash := job_template_hash(job):
        out["templateHash"] = template_hash
    if run:
        out["run"] = run
    if attempt:
        out["attempt"] = attempt
    status = job.get("status") or {}
    cond = _job_condition(job)
    # API timestamps are kept as written (RFC3339, UTC): no parse and format per result
    started = status.get("startTime") or meta.get("creationTimestamp")
    finished = status.get("completionTime") or cond.get("lastTransitionTime")
    ended = _terminated(pod) if pod is not None else None
    if pod is not None and ended is not None:
        container, term = ended
        out["pod"] = (pod.get("metadata") or {}).get("name") or ""
        out["container"] = container
        if isinstance(term.get("exitCode"), int):
            out["exitCode"] = term["exitCode"]
        out["reason"] = term.get("reason") or ""
        out["message"] = cut_message(term.get("message") or "")
        started = term.get("startedAt") or started
        finished = term.get("finishedAt") or finished
    else:
        out["reason"] = cond.get("reason") or ("Completed" if state == SUCCEEDED else "Failed")
        out["message"] = cut_message(cond.get("message") or "")
    if verdict is not None and verdict.verdict == FAILED_CHECK and verdict.reason != JOB_FAILED:
        out["reason"] = verdict.reason or out["reason"]
        out["message"] = cut_message(verdict.message) if verdict.message else out["message"]
    if isinstance(started, str) and started:
        out["startTime"] = started
    if isinstance(finished, str) and finished:
        out["finishTime"] = finished
    return out


def _field(message: str, path: str) -> str:
    """`.a.b` of a JSON object message, as text (JSON for anything but a string)."""
    try:
        value: Any = orjson.loads(message)
    except orjson.JSONDecodeError:
        return NOT_JSON
    for part in (p for p in path.split(".") if p):
        if not isinstance(value, Mapping) or part not in value:
            return NO_FIELD
        value = value[part]
    return value if isinstance(value, str) else orjson.dumps(value).decode()


def outcome_of(result: Mapping[str, Any], group_by: str | None = None) -> tuple[int | None, str]:
    """What nodes are grouped by: (exit code, message), or (None, the field) with a `.field`."""
    message = str(result.get("message") or "").strip()
    if group_by and group_by.startswith("."):
        return None, _field(message, group_by)
    code = result.get("exitCode")
    return (code if isinstance(code, int) else None), message
