"""The contract between a DaemonJob and the Jobs it owns: what a Job is read by (its node,
revision, run, attempt, state, times), its keys being shared/apinames.py's.

A node Job is found by its labels (the Job informer watches `daemonjob.io/name`),
tied to its node by an annotation (node names may exceed label value limits) and
pinned there with `matchFields metadata.name`, which, unlike the hostname label,
cannot be spoofed or differ from the node name.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from types import MappingProxyType
from typing import Any

from daemonjob.domain.shared.apinames import (
    ANNOTATION_NODE,
    ANNOTATION_START_FAILURE,
    ANNOTATION_STARTED,
    LABEL_ATTEMPT,
    LABEL_REVISION,
    LABEL_RUN,
    LABEL_TEMPLATE_HASH,
)
from daemonjob.domain.shared.timestamps import parse_time

__all__ = [
    "job_template_hash",
    "job_attempt",
    "job_started",
    "job_suspended",
    "ACTIVE",
    "SUCCEEDED",
    "FAILED",
    "TERMINATING",
    "job_state",
    "job_node",
    "job_revision",
    "job_run",
    "job_created",
    "job_finish_time",
    "job_ttl",
    "meta_of",
]

ACTIVE = "active"
SUCCEEDED = "succeeded"
FAILED = "failed"
TERMINATING = "terminating"

_NO_META: Mapping[str, Any] = MappingProxyType({})


def meta_of(job: Mapping[str, Any]) -> Mapping[str, Any]:
    """The object's metadata, read once (a cached Job is a record: `or {}` would ask its truth)."""
    meta = job.get("metadata")  # no `or {}`: a cached Job's metadata is a record, whose truth is a Python call
    return _NO_META if meta is None else meta


def job_node(job: Mapping[str, Any]) -> str | None:
    return (meta_of(job).get("annotations") or {}).get(ANNOTATION_NODE) or None


def job_revision(job: Mapping[str, Any]) -> str | None:
    return (meta_of(job).get("labels") or {}).get(LABEL_REVISION) or None


def job_template_hash(job: Mapping[str, Any]) -> str | None:
    return (meta_of(job).get("labels") or {}).get(LABEL_TEMPLATE_HASH) or None


def job_attempt(job: Mapping[str, Any]) -> int:
    """The Job's attempt: 0 without the label (a first Job, or one made before attempts existed)."""
    value = (meta_of(job).get("labels") or {}).get(LABEL_ATTEMPT)
    return int(value) if isinstance(value, str) and value.isdigit() and len(value) <= 9 else 0


def job_started(job: Mapping[str, Any]) -> bool:
    """A pod of the Job ran, as far as the Job tells: a ready or succeeded pod (`status.ready`
    exists from Kubernetes 1.24), or the controller's own mark after reading the pod."""
    annotations = meta_of(job).get("annotations") or {}
    if ANNOTATION_STARTED in annotations or ANNOTATION_START_FAILURE in annotations:
        return True
    status = job.get("status") or {}
    return any(isinstance(status.get(k), int) and status[k] > 0 for k in ("ready", "succeeded"))


def job_suspended(job: Mapping[str, Any]) -> bool:
    """`spec.suspend` is set: we never set it, so someone else (Kueue, a person) did."""
    spec = job.get("spec")
    return isinstance(spec, Mapping) and spec.get("suspend") is True


def job_run(job: Mapping[str, Any]) -> str | None:
    """The run a Job belongs to (None for Jobs of a DaemonJob that never had a run)."""
    value = (meta_of(job).get("labels") or {}).get(LABEL_RUN)
    return value if isinstance(value, str) and value else None


def job_created(job: Mapping[str, Any]) -> datetime | None:
    return parse_time(meta_of(job).get("creationTimestamp"))


def _true_condition(job: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    for cond in (job.get("status") or {}).get("conditions") or ():
        if cond.get("type") == kind and cond.get("status") == "True":
            return cond
    return None


def job_ttl(job: Mapping[str, Any]) -> Any:
    """`spec.ttlSecondsAfterFinished` as set on the Job (by us never; by an admission policy maybe)."""
    spec = job.get("spec")
    return spec.get("ttlSecondsAfterFinished") if isinstance(spec, Mapping) else None


def job_state(job: Mapping[str, Any]) -> str:
    """One of active, succeeded, failed, terminating.

    Only the terminal Complete/Failed conditions count: until then the Job
    controller may still have pods running on the node.
    """
    if meta_of(job).get("deletionTimestamp"):
        return TERMINATING
    if _true_condition(job, "Complete") is not None:
        return SUCCEEDED
    if _true_condition(job, "Failed") is not None:
        return FAILED
    return ACTIVE


def job_finish_time(job: Mapping[str, Any]) -> datetime | None:
    """When the Job finished: completionTime (success only), else its terminal condition's time."""
    done = parse_time((job.get("status") or {}).get("completionTime"))
    if done is not None:
        return done
    for kind in ("Complete", "Failed"):
        cond = _true_condition(job, kind)
        if cond is not None:
            return parse_time(cond.get("lastTransitionTime"))
    return None
