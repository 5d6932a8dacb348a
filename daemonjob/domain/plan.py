"""Step 2 of a decision: what the nodes and Jobs say, node by node, before any limit applies.

Each existing node is one of: pending (eligible, no Job standing for it yet: its turn to
come, or waiting for a terminating Job to go), active, succeeded or failed (by the Job
that stands for it, its record). A node that stopped being eligible is left alone,
except that while its record is active it stays counted (desired and active) and holds
its slot: its Job may still run, or wait for the node to come back.

With runs (scheduled or run-now), a node's record is its Job of the current run; Jobs of
other runs are history like older revisions. A node whose Job of another run is still
active either has it deleted first (concurrencyPolicy Replace, a turn like an older
revision's) or waits for it to finish (Forbid), so a node never runs two Jobs at once.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from daemonjob.domain.actions import DeleteJob, Turn
from daemonjob.domain.eligibility import Eligibility
from daemonjob.domain.jobs import (
    ACTIVE,
    FAILED,
    SUCCEEDED,
    TERMINATING,
    job_created,
    job_finish_time,
    job_node,
    job_revision,
    job_run,
    job_state,
    job_template_hash,
    job_ttl,
)
from daemonjob.domain.memo import Memo, compute

__all__ = ["JobView", "job_views", "Held", "Nodes", "Plan", "classify_nodes", "plan_nodes", "NODE_GONE", "OLD_REVISION", "OLD_RUN",
           "active_runs",
           "HISTORY"]

# Delete reasons
NODE_GONE = "NodeGone"
OLD_REVISION = "OldRevision"
OLD_RUN = "OldRun"  # an active Job of an earlier run, replaced (concurrencyPolicy Replace)
HISTORY = "History"

_OLDEST = datetime.min.replace(tzinfo=timezone.utc)


@dataclass(frozen=True, slots=True)
class JobView:
    """What a decision needs of one Job; kept by the memo on a cached Job, so parsed once per version."""

    name: str
    uid: str | None
    node: str | None
    revision: str | None
    state: str
    created: datetime
    finished: datetime | None
    ttl: Any = None
    run: str | None = None
    template_hash: str | None = None

    @classmethod
    def of(cls, job: Mapping[str, Any]) -> JobView:
        meta = job.get("metadata") or {}
        return cls(
            name=meta.get("name") or "",
            uid=meta.get("uid"),
            node=job_node(job),
            revision=job_revision(job),
            state=job_state(job),
            created=job_created(job) or _OLDEST,
            finished=job_finish_time(job),
            ttl=job_ttl(job),
            run=job_run(job),
            template_hash=job_template_hash(job),
        )

    @property
    def age_key(self) -> tuple[datetime, str]:
        return (self.created, self.name)

    @property
    def history_key(self) -> tuple[datetime, datetime, str]:
        return (self.finished or self.created, self.created, self.name)


_JOB_VIEW = JobView.of  # one object, so it serves as the memo key of the view kept on each cached Job


@dataclass(frozen=True, slots=True)
class Held:
    """An active Job standing for a node that is no longer eligible, and why the node is not."""

    node: str
    job: str
    why: str


@dataclass(slots=True)
class Nodes:
    """The existing nodes by name, and which of them are eligible."""

    by_name: dict[str, Mapping[str, Any]] = field(default_factory=dict)
    eligible: set[str] = field(default_factory=set)


@dataclass(slots=True)
class Plan:
    """Counts, turns and always-safe deletes; `pending` follows from them, `busy` is the slots held."""

    eligible: int = 0
    active: int = 0  # eligible or held nodes whose record is active
    succeeded: int = 0
    failed: int = 0
    failed_names: list[str] = field(default_factory=list)
    failed_current_names: list[str] = field(default_factory=list)  # failed Jobs of the current revision
    held: list[Held] = field(default_factory=list)
    busy: int = 0  # nodes running a Job of this DaemonJob (any revision or run): each holds a slot
    turns: list[Turn] = field(default_factory=list)
    deletes: list[DeleteJob] = field(default_factory=list)  # always safe: NodeGone, History
    extra_old: list[DeleteJob] = field(default_factory=list)  # running older Jobs beside a current one
    ttl_jobs: list[JobView] = field(default_factory=list)  # Jobs carrying a TTL

    @property
    def desired(self) -> int:
        return self.eligible + len(self.held)

    @property
    def pending(self) -> int:
        return self.desired - self.active - self.succeeded - self.failed


def job_views(jobs: Iterable[Mapping[str, Any]], memo: Memo = compute) -> list[JobView]:
    return [memo(j, _JOB_VIEW) for j in jobs]


def active_runs(jobs: Iterable[Mapping[str, Any]], memo: Memo = compute) -> set[str | None]:
    """The runs that have an active Job (None: Jobs without a run), for the schedule's step."""
    return {view.run for view in (memo(j, _JOB_VIEW) for j in jobs) if view.state == ACTIVE}


def classify_nodes(nodes: Iterable[Mapping[str, Any]], eligibility: Eligibility | None, memo: Memo = compute) -> Nodes:
    out = Nodes()
    for node in nodes:
        name = (node.get("metadata") or {}).get("name")
        if name:
            out.by_name[name] = node
            if eligibility is not None and eligibility.eligible_cached(node, memo):
                out.eligible.add(name)
    return out


def _running(job: JobView) -> bool:
    """Work that may still run on the node: an active Job, or one being deleted before it finished."""
    return job.state == ACTIVE or (job.state == TERMINATING and job.finished is None)


def _record(node_jobs: list[JobView], revision: str, never: bool, run: str | None = None) -> JobView | None:
    """The Job that stands for a node in the status, or None if the node is pending.

    OnTemplateChange: the newest non-terminating Job of the current revision.
    Never: the newest non-terminating Job of any revision, which the node keeps.
    Either way only Jobs of the current run (None: Jobs without a run) stand for a node.
    """
    best: JobView | None = None
    for job in node_jobs:
        if job.state == TERMINATING or job.run != run or (not never and job.revision != revision):
            continue
        if best is None or job.age_key > best.age_key:
            best = job
    return best


def plan_nodes(
    jobs: Iterable[Mapping[str, Any]],
    nodes: Nodes,
    eligibility: Eligibility | None,
    revision: str,
    never: bool,
    history_limit: int,
    memo: Memo = compute,
    run: str | None = None,
    replace_runs: bool = False,
) -> Plan:
    """`run`: the current run (None: Jobs without a run); `replace_runs`: an active Job of
    another run is deleted when its node's turn comes (Replace), else the node waits (Forbid)."""
    plan = Plan(eligible=len(nodes.eligible))

    def current(j: JobView) -> bool:
        return j.revision == revision and j.run == run

    by_node: dict[str, list[JobView]] = {}
    for raw in jobs:
        job = memo(raw, _JOB_VIEW)
        if job.ttl is not None and job.state != TERMINATING:
            plan.ttl_jobs.append(job)
        if job.node:
            by_node.setdefault(job.node, []).append(job)

    for node, node_jobs in by_node.items():
        if node not in nodes.by_name:
            plan.deletes.extend(DeleteJob(j.name, node, NODE_GONE, j.uid) for j in node_jobs if j.state != TERMINATING)
            plan.busy += any(j.state == ACTIVE for j in node_jobs)  # held until its delete is issued
            continue
        plan.busy += any(_running(j) for j in node_jobs)
        record = _record(node_jobs, revision, never, run)
        older = [j for j in node_jobs if not current(j)]  # usually none: the steady state
        if older:
            history = sorted(
                (j for j in older if j is not record and j.state in (SUCCEEDED, FAILED)),
                key=lambda j: j.history_key,
                reverse=True,
            )
            plan.deletes.extend(DeleteJob(j.name, node, HISTORY, j.uid) for j in history[history_limit:])
        if node not in nodes.eligible:
            # it keeps a running Job to completion and gets nothing new; an active record holds its slot
            if record is not None and record.state == ACTIVE:
                plan.active += 1
                why = eligibility.reason(nodes.by_name[node]) if eligibility is not None else None
                plan.held.append(Held(node, record.name, why or "node is not eligible"))
            continue
        running_older = [
            DeleteJob(j.name, node, OLD_REVISION, j.uid) for j in older
            if j.state == ACTIVE and j.run == run and not never
        ]
        other_runs = [j for j in older if j.state == ACTIVE and j.run != run]
        if replace_runs:
            running_older += [DeleteJob(j.name, node, OLD_RUN, j.uid) for j in other_runs]
        if record is None:
            if running_older:
                plan.turns.append(Turn(node, tuple(running_older)))
            elif not (other_runs and not replace_runs) and not any(_running(j) or current(j) for j in node_jobs):
                # else it waits for another run's Job, for one still terminating, or for the name of
                # its new Job (a deleted Job of the current revision) to be free; finished history
                # being deleted does not hold a run back
                plan.turns.append(Turn(node))
            continue
        plan.extra_old.extend(running_older)
        if record.state == ACTIVE:
            plan.active += 1
        elif record.state == SUCCEEDED:
            plan.succeeded += 1
        else:
            plan.failed += 1
            plan.failed_names.append(node)
            if record.revision == revision:
                plan.failed_current_names.append(node)
    plan.turns.extend(Turn(n) for n in nodes.eligible if n not in by_node)
    plan.turns.sort(key=lambda t: t.node)
    plan.failed_names.sort()
    plan.failed_current_names.sort()
    plan.held.sort(key=lambda h: h.node)
    return plan
