"""The maintenance step: which nodes carrying this DaemonJob's record are released, kept or drained.

Or given their Job; and what the status says of them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from daemonjob.domain.jobs.contract import ACTIVE, FAILED, SUCCEEDED, TERMINATING
from daemonjob.domain.jobs.jobview import JobView
from daemonjob.domain.nodework.draintimeouts import DrainTimeouts
from daemonjob.domain.nodework.maintenance import DrainNode, DrainProgress, Keep, MaintenanceInput, NodeWork, Release
from daemonjob.domain.nodework.releases import release_requests
from daemonjob.domain.shared.noderecord import DrainOutcome, NodeRecord
from daemonjob.domain.spec.maintenancespec import ON_TIMEOUT_FAIL, ON_TIMEOUT_SKIP, Maintenance

__all__ = ["Situation", "node_work", "DRAIN_TIMED_OUT", "JOB_SUCCEEDED", "JOB_FAILED", "RELEASE_ASKED"]

DRAINING_SHOWN_MAX = 10  # nodes whose drain is detailed in the status
NODE_NAMES_MAX = 1000  # names kept per list of the status (a list is the outcome's record: not truncated lightly)

# Why a node is released (the Uncordoned Event says it)
JOB_SUCCEEDED = "its Job succeeded"
JOB_FAILED = "its Job failed"
DRAIN_TIMED_OUT = "its drain timed out"
STOPPED = "the rollout stopped"
OLDER_ROLLOUT = "its record is of an older revision or run"
NOT_SELECTED = "the node is no longer selected"
RELEASE_ASKED = "a person released it (daemonjob.io/release)"
OFF = "spec.nodeMaintenance no longer asks for it"


@dataclass(frozen=True, slots=True)
class Situation:
    """What the step reads of the decision so far."""

    dj: Mapping[str, Any]
    spec: Maintenance | None
    refusal: str | None
    revision: str
    run: str | None
    now: datetime
    stopped: bool  # suspend, an unusable spec, the failure budget: nothing new starts, nothing new is held
    eligible: Mapping[str, bool]  # nodes with a record -> still selected (absent: the node is gone)
    jobs: Mapping[str, Sequence[JobView]]  # nodes with a record -> this DaemonJob's Jobs there
    awaiting: frozenset[str] = frozenset()  # nodes whose turn awaits its verdict (reboot, health check)
    states: Mapping[str, str | None] = field(default_factory=dict)  # checked turns: their state as the plan reads it


def node_work(s: Situation, mi: MaintenanceInput, outcomes: DrainTimeouts) -> NodeWork:
    """The Node writes for the nodes carrying this DaemonJob's record: a node in maintenance
    keeps its slot until it is released (and takes no new turn meanwhile: the gate's to say)."""
    work = NodeWork(refusal=s.refusal)
    draining: list[tuple[str, DrainProgress]] = []
    kept: list[str] = []
    uncordoning = 0
    requests = release_requests(s.dj)
    for node, record in sorted(mi.records.items()):
        if node not in s.eligible:
            continue  # the node is gone: nothing to write
        jobs = s.jobs.get(node, ())
        running = any(j.state == ACTIVE or (j.state == TERMINATING and j.finished is None) for j in jobs)
        current = [j for j in jobs if j.revision == record.revision and j.run == record.run and j.state != TERMINATING]
        state = max(current, key=lambda j: j.age_key).state if current else None
        state = s.states.get(node, state) if node in s.states else state
        if node in s.awaiting:
            continue  # its reboot or health check holds the node (and the slot the plan counts)
        why = _release(s, record, outcomes, node, state, running)
        if why == "keep" and requests.get(node) == record.since:
            why = RELEASE_ASKED
        if why == "keep":
            kept.append(node)
            if not record.kept:
                work.keeps.append(Keep(node, replace(record, kept=True)))
            continue
        if why is not None:
            work.releases.append(Release(node, record, why, _outcome(s, record, outcomes, node, why)))
            uncordoning += 1
            continue
        if state is not None or running:
            continue  # its Job runs: it holds its slot as any running node does
        work.held += 1
        progress = mi.drains.get(node, DrainProgress())
        if s.spec is not None and s.spec.drain is not None and not progress.drained:
            if node not in outcomes.new:
                work.drains.append(DrainNode(node, record))
            draining.append((node, progress))
        else:
            work.start.append(node)
    work.held += uncordoning  # released in this pass: their slot frees once the release is seen
    work.status = _status(s, mi, outcomes, _Tally(draining, kept, uncordoning))
    return work


def _outcome(s: Situation, record: NodeRecord, outcomes: DrainTimeouts, node: str, why: str) -> DrainOutcome | None:
    if why != DRAIN_TIMED_OUT:
        return None
    policy = ON_TIMEOUT_FAIL if node in outcomes.failed else ON_TIMEOUT_SKIP
    return DrainOutcome(record.daemon_job, record.uid, s.revision, s.run, policy)


def _kept(s: Situation, record: NodeRecord, state: str | None) -> bool:
    """A failed node kept cordoned: its Job of the record's rollout failed (under
    keepFailedCordoned), or its record was marked kept in an earlier revision or run.
    Only while the DaemonJob uses node maintenance: without it the node is released."""
    if s.spec is None or s.refusal is not None:
        return False
    if state == FAILED and (record.kept or s.spec.keep_failed_cordoned):
        return True
    return record.kept and not record.of_rollout(s.revision, s.run)


def _release(
    s: Situation, record: NodeRecord, outcomes: DrainTimeouts, node: str, state: str | None, running: bool
) -> str | None:
    """Why the node is released now ("keep": a failed node kept cordoned), or None: it stays in maintenance."""
    if _kept(s, record, state):
        return "keep"
    if record.of_rollout(s.revision, s.run):
        if state == SUCCEEDED:
            return JOB_SUCCEEDED
        if state == FAILED:
            return JOB_FAILED
    if running:
        return None  # a Job of ours runs there: it finishes first, whatever changed
    if s.spec is None:
        return OFF
    if s.refusal is not None or s.stopped:
        return STOPPED
    if not record.of_rollout(s.revision, s.run):
        return OLDER_ROLLOUT
    if not s.eligible.get(node):
        return NOT_SELECTED
    if node in outcomes.recorded or node in outcomes.new:
        return DRAIN_TIMED_OUT
    return None


@dataclass(frozen=True, slots=True)
class _Tally:
    """What the pass over the nodes carrying a record counted, for the status."""

    draining: list[tuple[str, DrainProgress]]
    kept: list[str]
    uncordoning: int


def _status(s: Situation, mi: MaintenanceInput, outcomes: DrainTimeouts, tally: _Tally) -> dict[str, Any] | None:
    if s.spec is None and not mi.records:
        return None
    draining, kept = tally.draining, tally.kept
    shown = []
    for node, progress in draining[:DRAINING_SHOWN_MAX]:
        entry: dict[str, Any] = {"node": node, "waitingPods": list(progress.waiting)}
        if progress.blocked:
            entry["blockedBy"] = progress.blocked
        shown.append(entry)
    return {
        "rollout": outcomes.rollout,
        "cordonedNodes": sum(1 for r in mi.records.values() if r.cordoned),
        "drainingNodes": len(draining),
        "uncordoningNodes": tally.uncordoning,
        "draining": shown,
        "drainFailedNodes": sorted(outcomes.failed)[:NODE_NAMES_MAX],
        "skippedNodes": sorted(outcomes.skipped)[:NODE_NAMES_MAX],
        "keptCordonedNodes": kept[:NODE_NAMES_MAX],
    }
