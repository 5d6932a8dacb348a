"""Stuck starts (spec.startTimeout): a node's Job whose pod never ran fails instead of holding a slot.

A pod can stay Pending for good (unschedulable, an image never pulled, a volume never
attached: kubernetes/kubernetes#118321), and its Job stays active, holding the node's
maxParallel slot. The plan keeps the active records whose Job shows no running pod
(`jobs.job_started`) in order of creation; once `startTimeout` has passed for one, the
decision asks the act layer to read its pods, once (no pod watch: a watch of every pod of
the Jobs' namespaces would cost memory in proportion to them, for a question asked once per
slow Job). A pod found running marks the Job started; else the Job is failed, with its pod's
reason (starts' act side: controller/passes/startchecks.py), and the node is retried per spec.retry.

A Job suspended by someone else (Kueue suspends Jobs without a queue name) keeps its slot:
whoever suspended it may resume it at any time, and it runs then without asking, so freeing
its slot could put more than maxParallel nodes at work. `Reconciling` names it instead.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from daemonjob.domain.jobs.jobview import JobView

__all__ = ["watched", "Unstarted", "StartCheck", "due_start_checks", "SUSPENDED_EXTERNALLY", "suspended_message"]

SUSPENDED_EXTERNALLY = "JobSuspendedExternally"  # Reconciling's reason while a node's Job is suspended
START_CHECKS_PER_PASS = 32  # pod reads asked for by one pass; the rest at the next
START_CHECKS_PAUSE = timedelta(seconds=1)


@dataclass(frozen=True, slots=True, order=True)
class Unstarted:
    """An active record whose Job shows no running pod yet (ordered by when it started)."""

    created: datetime  # the Job's creation, or its status.startTime if later
    node: str
    job: str
    uid: str | None


@dataclass(frozen=True, slots=True)
class StartCheck:
    """Read the pods of `job` (node `node`): its start timeout has passed."""

    node: str
    job: str
    uid: str | None
    since: datetime  # the Job's creation, or its status.startTime if later


def watched(record: JobView) -> dict[str, Any]:
    """What a node's plan keeps of its active record: unstarted, suspended by someone else."""
    out: dict[str, Any] = {}
    if not record.started and not record.suspended and record.node is not None:
        # from its start: a Job resumed after a queue's suspension (startTime set anew) has its full timeout
        since = max(record.created, record.began) if record.began is not None else record.created
        out["unstarted"] = Unstarted(since, record.node, record.name, record.uid)
    if record.suspended:
        out["suspended"] = record.name
    return out


def due_start_checks(
    unstarted: Sequence[Unstarted], timeout: timedelta, now: datetime
) -> tuple[list[StartCheck], datetime | None]:
    """The checks due at `now` (at most START_CHECKS_PER_PASS) and when to look again."""
    end = bisect.bisect_right(unstarted, now - timeout, key=lambda u: u.created)
    due = [StartCheck(u.node, u.job, u.uid, u.created) for u in unstarted[: min(end, START_CHECKS_PER_PASS)]]
    if end > START_CHECKS_PER_PASS:
        return due, now + START_CHECKS_PAUSE  # the rest next, once the cache shows these checked
    return due, unstarted[end].created + timeout if end < len(unstarted) else None


def suspended_message(suspended: Sequence[tuple[str, str]], cap: int) -> str:
    """What Reconciling says of node Jobs suspended by someone else."""
    shown = ", ".join(f"{job} on {node}" for node, job in suspended[:cap])
    more = f" and {len(suspended) - cap} more" if len(suspended) > cap else ""
    return (
        f"{len(suspended)} node Job(s) suspended by someone else (spec.suspend, as Kueue sets it on Jobs "
        f"without a queue name): {shown}{more}; each keeps its node's maxParallel slot until it finishes"
    )
