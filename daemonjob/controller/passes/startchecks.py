"""Stuck starts, the act side: read a node Job's pods once its start timeout has passed.

The decision (domain/rollout/starts.py) names the Jobs whose pod has not been seen running by
`spec.startTimeout`. Their pods are listed once each (label `controller-uid`, set by every
Job controller since 1.8; no pod watch). A pod running or done: the Job is marked started
(`daemonjob.io/started`), so it is never read again. Else the Job is failed through its own
field, `spec.activeDeadlineSeconds` (mutable, honoured by every Job controller since 1.x, the
same on 1.20 as now): the Job controller deletes its pod and marks it Failed
(DeadlineExceeded), and the pod's reason is kept on the Job (`daemonjob.io/start-failure`),
so status and `kubectl daemonjob status` name it. The node then counts as failed, or is
retried per spec.retry.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from cachetools import TTLCache

from daemonjob import defaults
from daemonjob.controller.passes.observe import Observation
from daemonjob.controller.runtime.jobcontrol import JobControl, NotLeader
from daemonjob.domain.rollout.starts import StartCheck
from daemonjob.domain.shared.apinames import ANNOTATION_START_FAILURE, ANNOTATION_STARTED
from daemonjob.domain.shared.events import WARNING, EventSpec
from daemonjob.domain.shared.timestamps import format_time
from daemonjob.machinery.client.kube import ApiError
from daemonjob.machinery.process.clock import RealClock

__all__ = ["StartChecks", "pod_verdict", "START_TIMEOUT_EVENT"]

START_TIMEOUT_EVENT = "StartTimeout"
POD_UID_LABEL = "controller-uid"
_STARTED_PHASES = ("Running", "Succeeded")
_MESSAGE_MAX = 512


def pod_verdict(pods: Sequence[Mapping[str, Any]]) -> str | None:
    """None when a pod of the Job ran; else why none did (`Reason: message`), from the pod the
    Job controller made last."""
    if any((p.get("status") or {}).get("phase") in _STARTED_PHASES for p in pods):
        return None
    if not pods:
        return "NoPod: the Job controller made no pod (a quota or an admission webhook may refuse it)"
    pod = max(pods, key=lambda p: ((p.get("metadata") or {}).get("creationTimestamp") or "", id(p)))
    status = pod.get("status") or {}
    for c in (*(status.get("initContainerStatuses") or ()), *(status.get("containerStatuses") or ())):
        waiting = (c.get("state") or {}).get("waiting") or {}
        if waiting.get("reason") and waiting["reason"] not in ("ContainerCreating", "PodInitializing"):
            return _cut(f"{waiting['reason']}: {waiting.get('message') or 'container ' + str(c.get('name'))}")
    for cond in status.get("conditions") or ():
        if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
            return _cut(f"{cond.get('reason') or 'Unschedulable'}: {cond.get('message') or 'not scheduled'}")
    phase = status.get("phase") or "Pending"
    detail = status.get("message") or f"pod {(pod.get('metadata') or {}).get('name')} is {phase}"
    return _cut(f"{status.get('reason') or phase}: {detail}")


def _cut(text: str) -> str:
    return text if len(text) <= _MESSAGE_MAX else text[: _MESSAGE_MAX - 3] + "..."


class StartChecks:
    """Carries out a decision's start checks; a Job looked at is not read again for `ttl`
    (the cache may not show the mark written on it yet)."""

    def __init__(
        self, control: JobControl, ttl: float = defaults.START_CHECK_TTL, timer: Callable[[], float] = RealClock().now
    ) -> None:
        self.control = control
        self._seen: TTLCache[str, bool] = TTLCache(maxsize=100_000, ttl=ttl, timer=timer)

    def run(self, observed: Observation, checks: Sequence[StartCheck], now: datetime) -> list[EventSpec]:
        events: list[EventSpec] = []
        for check in checks:
            if not check.uid or check.uid in self._seen:
                continue
            try:
                events.extend(self._check(observed, check, now))
            except NotLeader:
                raise
            except ApiError as exc:
                if not exc.not_found:
                    observed.log.warning("start check failed", job=check.job, error=str(exc))
                continue
            self._seen[check.uid] = True
        return events

    def _check(self, observed: Observation, check: StartCheck, now: datetime) -> list[EventSpec]:
        assert check.uid is not None
        ns = observed.namespace
        pods = self.control.list_pods(ns, f"{POD_UID_LABEL}={check.uid}")
        why = pod_verdict(pods)
        if why is None:
            self.control.patch_job(
                ns, check.job, check.uid, {"metadata": {"annotations": {ANNOTATION_STARTED: format_time(now)}}}
            )
            return []
        elapsed = max(1, int((now - check.since).total_seconds()))
        patch = {
            "metadata": {"annotations": {ANNOTATION_START_FAILURE: why}},
            "spec": {"activeDeadlineSeconds": elapsed},
        }
        self.control.patch_job(ns, check.job, check.uid, patch)
        observed.log.warning("job did not start in time: failed", job=check.job, node=check.node, reason=why)
        message = f"Job {check.job} on node {check.node} had no running pod after {elapsed}s: {why}; it is failed"
        return [EventSpec(WARNING, START_TIMEOUT_EVENT, message)]
