"""One node's part of a plan (`plan_node`): what its node object and its Jobs say, before any
limit applies; plan.py sums the parts (and re-exports what is here).

A node is pending, active, succeeded or failed by the Job that stands for it, its record
(`_record`); its turn, its always-safe deletes and the slot it holds follow from that record
and the context every node shares (`PlanContext`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from daemonjob.domain.jobs.changes import DeleteJob
from daemonjob.domain.jobs.contract import ACTIVE, FAILED, SUCCEEDED, TERMINATING
from daemonjob.domain.jobs.jobview import JobView, checked_state
from daemonjob.domain.jobs.turnverdict import Awaiting
from daemonjob.domain.rollout.retries import Retrying, retry_of
from daemonjob.domain.rollout.starts import Unstarted, watched
from daemonjob.domain.rollout.turns import Turn
from daemonjob.domain.shared.memo import Memo, no_memo
from daemonjob.domain.spec.eligibility import Eligibility
from daemonjob.domain.spec.retryspec import Retry

__all__ = [
    "HISTORY",
    "Held",
    "NODE_GONE",
    "NodePlan",
    "OLD_REVISION",
    "OLD_RUN",
    "PlanContext",
    "RECORDED",
    "plan_node",
]

# Delete reasons
NODE_GONE = "NodeGone"
OLD_REVISION = "OldRevision"
OLD_RUN = "OldRun"  # an active Job of an earlier run, replaced (concurrencyPolicy Replace)
HISTORY = "History"
RECORDED = "Recorded"  # a succeeded Job whose result is recorded (spec.results.deleteSucceededJobs)


@dataclass(frozen=True, slots=True)
class Held:
    """An active Job standing for a node that is no longer eligible, and why the node is not."""

    node: str
    job: str
    why: str


@dataclass(frozen=True, slots=True)
class PlanContext:
    """What every node's plan depends on besides its node and Jobs; a change replans every node.
    Node rules compare by their canonical source, so recompiling equal rules replans nothing."""

    eligibility: Eligibility | None = field(compare=False)
    revision: str
    never: bool
    history_limit: int
    run: str | None = None  # the current run (None: Jobs without a run)
    replace_runs: bool = False  # Replace: another run's active Job is deleted at the node's turn; Forbid: it waits
    successes: bool = False  # keep when each node's record succeeded (pauseBetweenNodes reads it)
    retry: Retry | None = None  # spec.retry: a failed record with retries left is a turn (retries.py)
    checked: bool = False  # a turn ends with a verdict on its Job (reboot, healthCheck: nodecheck.py)
    reboot: bool = False  # a checked turn waits for its node's reboot whatever its Job's state
    let_go: bool = False  # spec.results.deleteSucceededJobs: recorded successes stand for their Jobs
    rules: Any = field(default=None, init=False)

    def __post_init__(self) -> None:
        rules = None if self.eligibility is None else (self.eligibility.rules or self.eligibility)
        object.__setattr__(self, "rules", rules)


@dataclass(frozen=True, slots=True)
class NodePlan:
    """One node's part of a plan: what its node object and its Jobs say, before any limit applies.

    A plan is the sum of its nodes' parts, so a node's event changes one part and the sums
    by its difference: the incremental plan (keptplan.py) and the full one are one rule book.
    """

    eligible: bool = False
    state: str | None = None  # the record counted for the node (ACTIVE, SUCCEEDED, FAILED), None: pending/none
    failed_current: bool = False  # its failed record is of the current revision
    held: Held | None = None  # an active record on a node no longer eligible
    busy: bool = False  # a Job of it may still run: the node holds a maxParallel slot
    turn: Turn | None = None
    deletes: tuple[DeleteJob, ...] = ()  # always safe: NodeGone, History
    extra_old: tuple[DeleteJob, ...] = ()  # running older Jobs beside a current record
    ttl_jobs: tuple[JobView, ...] = ()  # Jobs carrying a TTL
    succeeded_at: datetime | None = None  # when its succeeded record finished (only with PlanContext.successes)
    retry: Retrying | None = None  # its failed record runs again (its turn, once `retry.at` has passed)
    unstarted: Unstarted | None = None  # its active record shows no running pod yet (starts.py)
    suspended: str | None = None  # its active record, suspended by someone else
    awaiting: Awaiting | None = None  # its turn waits for a verdict (nodecheck.py): active, holding its slot


_COMMON: dict[NodePlan, NodePlan] = {}  # the few plain parts most nodes share (a succeeded node, ...)
_COMMON_MAX = 4096  # run ids make new plain parts at each tick: start over past this


def _shared(part: NodePlan) -> NodePlan:
    """One instance per plain part: at 10,000 nodes most parts are equal, and small."""
    if (
        part.held is not None
        or part.turn is not None
        or part.deletes
        or part.extra_old
        or part.ttl_jobs
        or part.succeeded_at is not None
        or part.retry is not None
        or part.unstarted is not None
        or part.suspended is not None
        or part.awaiting is not None
    ):
        return part
    if len(_COMMON) >= _COMMON_MAX:
        _COMMON.clear()
    return _COMMON.setdefault(part, part)


def _running(job: JobView) -> bool:
    """Work that may still run on the node: an active Job, or one being deleted before it finished."""
    return job.state == ACTIVE or (job.state == TERMINATING and job.finished is None)


def _record(node_jobs: Sequence[JobView], revision: str, never: bool, run: str | None = None) -> JobView | None:
    """The Job that stands for a node in the status, or None if the node is pending.

    OnTemplateChange: the newest non-terminating Job of the current revision.
    Never: the newest non-terminating Job of any revision, which the node keeps.
    Either way only Jobs of the current run (None: Jobs without a run) stand for a node.
    """
    best: JobView | None = None
    for job in node_jobs:
        if job.state == TERMINATING or job.run != run or (not never and job.revision != revision):
            continue
        if best is None or (job.created, job.attempt, job.name) > (best.created, best.attempt, best.name):
            best = job  # a retry made within the second of its failed attempt is the newer
    return best


def plan_node(
    name: str, node: Mapping[str, Any] | None, jobs: Sequence[JobView], ctx: PlanContext, memo: Memo = no_memo
) -> NodePlan:
    """One node's part: `node` is None once the node is deleted; `jobs` are its Jobs of this DaemonJob
    (and its newest recorded success standing for a deleted one: recorded.py)."""
    if any(j.standin for j in jobs) and not ctx.let_go:
        jobs = [j for j in jobs if not j.standin]
    ttl = tuple(j for j in jobs if j.ttl is not None and j.state != TERMINATING and not j.standin)
    if not name:  # Jobs without a node annotation: only a TTL on them matters
        return NodePlan(ttl_jobs=ttl)
    if node is None:
        gone = tuple(
            DeleteJob(j.name, name, NODE_GONE, j.uid) for j in jobs if j.state != TERMINATING and not j.standin
        )
        held = any(j.state == ACTIVE for j in jobs)  # held until its delete is issued
        return _shared(NodePlan(busy=held, deletes=gone, ttl_jobs=ttl))
    eligibility, revision, run = ctx.eligibility, ctx.revision, ctx.run
    eligible = eligibility is not None and eligibility.eligible_cached(node, memo)
    if not jobs:
        return _shared(NodePlan(eligible=True, turn=Turn(name))) if eligible else _shared(NodePlan())

    def current(j: JobView) -> bool:
        return j.revision == revision and j.run == run

    busy = any(_running(j) for j in jobs)
    record = _record(jobs, revision, ctx.never, run)
    older = [j for j in jobs if not current(j)]  # usually none: the steady state
    deletes: tuple[DeleteJob, ...] = ()
    let_go = [j for j in jobs if j.recorded and not j.standin and j.state == SUCCEEDED] if ctx.let_go else []
    if older:
        history = sorted(
            (j for j in older if j is not record and j.state in (SUCCEEDED, FAILED) and not j.standin),
            key=lambda j: j.history_key,
            reverse=True,
        )
        deletes = tuple(
            DeleteJob(j.name, name, HISTORY, j.uid) for j in history[ctx.history_limit :] if j not in let_go
        )
    if let_go:  # their recorded results stand for them from now on
        deletes += tuple(DeleteJob(j.name, name, RECORDED, j.uid) for j in let_go)
    common: dict[str, Any] = dict(eligible=eligible, busy=busy, deletes=deletes, ttl_jobs=ttl)
    if record is not None and record.state == ACTIVE:
        common.update(watched(record))
    state, awaiting = checked_state(name, record, ctx.checked, ctx.reboot) if record is not None else (None, None)
    if awaiting is not None:
        common["busy"] = True  # a turn awaiting its verdict (a reboot, a health check) holds its slot
    if not eligible:
        # it keeps a running Job to completion and gets nothing new; an active record holds its slot
        if record is not None and state == ACTIVE:
            why = eligibility.reason(node) if eligibility is not None else None
            kept = Held(name, record.name, why or "node is not eligible")
            return _shared(NodePlan(state=ACTIVE, held=kept, awaiting=awaiting, **common))
        if record is not None and record.verdict is not None and state == FAILED:  # not back, or unhealthy
            return _shared(
                NodePlan(state=FAILED, failed_current=record.revision == revision, **common | {"eligible": True})
            )
        return _shared(NodePlan(**common))
    running_older = tuple(
        DeleteJob(j.name, name, OLD_REVISION, j.uid)
        for j in older
        if j.state == ACTIVE and j.run == run and not ctx.never
    )
    other_runs = [j for j in older if j.state == ACTIVE and j.run != run]
    if ctx.replace_runs:
        running_older += tuple(DeleteJob(j.name, name, OLD_RUN, j.uid) for j in other_runs)
    if record is None:
        if running_older:
            return NodePlan(turn=Turn(name, running_older), **common)
        if not (other_runs and not ctx.replace_runs) and not any(_running(j) or current(j) for j in jobs):
            # else it waits for another run's Job, or for one still terminating (a deleted Job of
            # the current rollout: its successor, the next attempt, comes once it is gone);
            # finished history being deleted does not hold a run back
            return _shared(NodePlan(turn=Turn(name), **common))
        return _shared(NodePlan(**common))
    checked = replace(record, state=state or record.state) if state != record.state else record
    retry = retry_of(jobs, checked, ctx.retry) if current(record) and not common["busy"] else None
    if retry is not None:  # pending again, not failed: its turn comes once the backoff has passed
        return NodePlan(turn=Turn(name), retry=retry, **common)
    failed_current = state == FAILED and record.revision == revision
    succeeded_at = record.finished if ctx.successes and state == SUCCEEDED else None
    return _shared(
        NodePlan(
            state=state,
            awaiting=awaiting,
            failed_current=failed_current,
            extra_old=running_older,
            succeeded_at=succeeded_at,
            **common,
        )
    )
