"""spec.retry, spec.startTimeout and the Job controller a template names, read by the rule book.

A failed node runs again as a new Job (the node's next attempt, attempts.py) after a backoff
that doubles from `backoff` up to `maxBackoff`, at most `limit` times per rollout, before it
counts against maxFailedNodes (retries.py). `startTimeout`: how long a node's Job may go
without a running pod before it fails with its pod's reason (starts.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from daemonjob import defaults
from daemonjob.domain.spec.problems import INVALID_SPEC, Problem, is_int, show
from daemonjob.domain.spec.rolloutspec import read_duration

__all__ = ["Retry", "read_retry", "read_start_timeout", "check_managed_by", "backoff_delay", "JOB_CONTROLLER"]

PATH = "spec.retry"
JOB_CONTROLLER = "kubernetes.io/job-controller"  # the only spec.managedBy whose Jobs run here


@dataclass(frozen=True, slots=True)
class Retry:
    """spec.retry: retries per node and rollout, and the backoff before each."""

    limit: int
    backoff: timedelta = defaults.RETRY_BACKOFF
    max_backoff: timedelta = defaults.RETRY_MAX_BACKOFF


def backoff_delay(retry: Retry, failures: int) -> timedelta:
    """The wait before the retry that follows the node's `failures`-th failure: `backoff`,
    doubled for each failure before, never above `maxBackoff`."""
    if failures <= 1:
        return min(retry.backoff, retry.max_backoff)
    doublings = min(failures - 1, 40)  # 2**40 backoffs outlast any cap
    return min(retry.backoff * (2**doublings), retry.max_backoff)


def read_retry(spec: Mapping[str, Any], problems: list[Problem]) -> Retry | None:
    """spec.retry, None when unset or invalid (an invalid one adds a problem: nothing starts)."""
    raw = spec.get("retry")
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        problems.append(Problem(INVALID_SPEC, f"{PATH}: Invalid value: {show(raw)}: must be an object"))
        return None
    count = len(problems)
    limit = raw.get("limit")
    if limit is None:
        problems.append(Problem(INVALID_SPEC, f"{PATH}.limit: Required value"))
    elif not is_int(limit) or not 0 <= limit <= defaults.RETRY_LIMIT_MAX:
        problems.append(
            Problem(
                INVALID_SPEC,
                f"{PATH}.limit: Invalid value: {show(limit)}: must be an integer from 0 to "
                f"{defaults.RETRY_LIMIT_MAX} (retries of a failed node per rollout)",
            )
        )
    backoff = read_duration(raw, "backoff", PATH, problems, positive=True)
    cap = read_duration(raw, "maxBackoff", PATH, problems, positive=True)
    if backoff is not None and cap is not None and cap < backoff:
        problems.append(
            Problem(
                INVALID_SPEC,
                f"{PATH}.maxBackoff: Invalid value: {show(raw.get('maxBackoff'))}: "
                f"must not be shorter than {PATH}.backoff ({show(raw.get('backoff'))})",
            )
        )
    backoff = backoff or defaults.RETRY_BACKOFF
    cap = cap or max(defaults.RETRY_MAX_BACKOFF, backoff)
    if len(problems) > count:
        return None
    return Retry(int(limit), backoff, cap)  # type: ignore[arg-type]  # limit checked an int above


def read_start_timeout(spec: Mapping[str, Any], problems: list[Problem]) -> timedelta:
    """spec.startTimeout, the default where unset or invalid (an invalid one adds a problem)."""
    value = read_duration(spec, "startTimeout", "spec", problems, positive=True)
    return value or defaults.START_TIMEOUT


def check_managed_by(job_spec: Mapping[str, Any], problems: list[Problem]) -> None:
    """A Job managed by another controller (MultiKueue's, say) never runs in this cluster: its
    node would wait for it for good, so such a template is refused."""
    managed_by = job_spec.get("managedBy")
    if managed_by is None or managed_by == JOB_CONTROLLER:
        return
    problems.append(
        Problem(
            INVALID_SPEC,
            f"spec.jobTemplate.spec.managedBy: Unsupported value: {show(managed_by)}: supported values: "
            f'"{JOB_CONTROLLER}" (a Job another controller manages never runs on the node here)',
        )
    )
