"""A step of the decision for spec.nodeMaintenance: cordon, drain, the node's Job, uncordon.

A node's turn (within maxParallel, which counts nodes in maintenance) first writes this
DaemonJob's record on the Node and cordons it, in one patch; then drains it (the act layer
evicts, and reports back what is left); then the node's Job is created, tolerating the
cordon; once the Job has finished, the node is released: the record goes and, only if the
record says this DaemonJob cordoned a schedulable node, the cordon goes with it.

The Node's record is the truth a successor reads after a crash at any step, so each node
is cordoned once per revision or run, and released once. A node is released when its Job
finished, when its drain timed out (the release writes the outcome on the Node in the same
patch, so neither a crash nor the status's cut at 1000 names drains it again), and, while
no Job of ours runs there, when the rollout stops (suspend, an unusable spec, the failure
budget, the namespace no longer allowed), when its record is of an older revision or run,
or when the node stops being selected. A deleted DaemonJob's finalizer releases the rest
(`releases_on_delete`).

With keepFailedCordoned a node whose Job failed is kept: its record is marked `kept` (a Node
write, once), and it stays cordoned through later revisions and runs, out of their
rollouts, until a person releases it (`kubectl daemonjob release`, domain/nodework/releases.py), the
DaemonJob no longer uses node maintenance (its spec, its namespace), or it is deleted.

Pure: the records, the drain outcomes, the drains' progress and the allowed namespaces come
in the input (`MaintenanceInput`); the Node writes go out in `NodeWork`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from daemonjob.domain.jobs.contract import ACTIVE, FAILED, SUCCEEDED, TERMINATING, format_time, parse_time
from daemonjob.domain.nodework.noderecord import DrainOutcome, NodeRecord
from daemonjob.domain.nodework.releases import release_requests
from daemonjob.domain.rollout.actions import Turns
from daemonjob.domain.rollout.plan import JobView, Plan
from daemonjob.domain.spec.maintenancespec import ON_TIMEOUT_FAIL, ON_TIMEOUT_SKIP, Maintenance

__all__ = [
    "FINALIZER",
    "DrainProgress",
    "MaintenanceInput",
    "Cordon",
    "DrainNode",
    "Keep",
    "Release",
    "NodeWork",
    "DrainTimeouts",
    "drain_timeouts",
    "with_drain_timeouts",
    "node_work",
    "releases_on_delete",
]

FINALIZER = "daemonjob.io/node-maintenance"  # on a DaemonJob: what it cordoned is released before it goes

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
DELETED = "the DaemonJob is being deleted"


@dataclass(frozen=True, slots=True)
class DrainProgress:
    """What the act layer's last look at a draining node found (kept between passes, not across restarts)."""

    drained: bool = False
    waiting: tuple[str, ...] = ()  # namespace/name of the pods still on the node, first few
    blocked: str | None = None  # why they are still there: a PodDisruptionBudget, a pod not evictable


@dataclass(frozen=True, slots=True)
class MaintenanceInput:
    """What the maintenance step reads besides the DaemonJob and its plan."""

    records: Mapping[str, NodeRecord] = field(default_factory=dict)  # node -> this DaemonJob's record on it
    drains: Mapping[str, DrainProgress] = field(default_factory=dict)  # node -> its drain's progress
    allowed_namespaces: frozenset[str] = frozenset()  # --node-maintenance-namespaces
    outcomes: Mapping[str, DrainOutcome] = field(default_factory=dict)  # node -> this DaemonJob's drain outcome on it


@dataclass(frozen=True, slots=True)
class Cordon:
    """Write `record` on the node and cordon it (if schedulable), in one patch."""

    node: str
    record: NodeRecord


@dataclass(frozen=True, slots=True)
class DrainNode:
    """Evict what is left on a cordoned node (the act layer reports back a DrainProgress)."""

    node: str
    record: NodeRecord


@dataclass(frozen=True, slots=True)
class Keep:
    """Mark `record` kept: its node stays cordoned until a person releases it."""

    node: str
    record: NodeRecord


@dataclass(frozen=True, slots=True)
class Release:
    """Remove `record` from the node and, if it says we cordoned it, uncordon it; `outcome`:
    a timed-out drain's, written in the same patch."""

    node: str
    record: NodeRecord
    why: str
    outcome: DrainOutcome | None = None


@dataclass(frozen=True, slots=True)
class DrainTimeouts:
    """Nodes whose drain timed out in this revision or run: recorded on the Node (or, by an
    earlier version, in the status) (`recorded`) or found now (`new`), by onTimeout policy;
    both are released, a new one with its outcome. `kept`: nodes kept cordoned from an
    earlier revision or run, out of this one's rollout as a skipped node is."""

    rollout: str
    failed: frozenset[str] = frozenset()
    skipped: frozenset[str] = frozenset()
    recorded: frozenset[str] = frozenset()
    new: tuple[str, ...] = ()
    kept: frozenset[str] = frozenset()

    @property
    def done(self) -> frozenset[str]:
        return self.failed | self.skipped


@dataclass(slots=True)
class NodeWork:
    """The Node writes of one decision, and what the status and the slots make of them."""

    cordons: list[Cordon] = field(default_factory=list)
    drains: list[DrainNode] = field(default_factory=list)
    releases: list[Release] = field(default_factory=list)
    keeps: list[Keep] = field(default_factory=list)
    start: list[str] = field(default_factory=list)  # nodes in maintenance whose Job is created now
    held: int = 0  # slots held by nodes in maintenance with no running Job of ours
    add_finalizer: bool = False
    refusal: str | None = None
    status: dict[str, Any] | None = None
    turns: Turns | None = None  # the turns left to choose from (nodes in maintenance taken out; `held` not added)

    @property
    def writes(self) -> bool:
        return bool(self.cordons or self.drains or self.releases or self.keeps or self.add_finalizer)


def rollout_key(revision: str, run: str | None) -> str:
    return run if run is not None else revision


def drain_timeouts(
    spec: Maintenance | None,
    mi: MaintenanceInput,
    status: Mapping[str, Any],
    revision: str,
    run: str | None,
    now: datetime,
    started: Mapping[str, bool],
) -> DrainTimeouts:
    """The drains that timed out in this revision or run. `started`: nodes with a current
    record whose Job exists (their drain is over)."""
    key = rollout_key(revision, run)
    previous = status.get("nodeMaintenance")
    previous = previous if isinstance(previous, Mapping) and previous.get("rollout") == key else {}
    failed = set(_names(previous.get("drainFailedNodes")))
    skipped = set(_names(previous.get("skippedNodes")))
    for node, outcome in mi.outcomes.items():
        if outcome.of_rollout(revision, run):
            (failed if outcome.on_timeout == ON_TIMEOUT_FAIL else skipped).add(node)
    recorded = frozenset(failed | skipped)
    new: list[str] = []
    drain = spec.drain if spec is not None else None
    if drain is not None:
        for node, record in sorted(mi.records.items()):
            if (
                node in recorded
                or not record.of_rollout(revision, run)
                or started.get(node)
                or mi.drains.get(node, DrainProgress()).drained
            ):
                continue
            since = parse_time(record.since)
            if since is not None and now >= since + drain.timeout:
                new.append(node)
                (failed if drain.on_timeout == ON_TIMEOUT_FAIL else skipped).add(node)
    kept = frozenset(n for n, r in mi.records.items() if r.kept and not r.of_rollout(revision, run))
    return DrainTimeouts(key, frozenset(failed), frozenset(skipped), recorded, tuple(new), kept)


def _names(value: Any) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def with_drain_timeouts(plan: Plan, outcomes: DrainTimeouts) -> Plan:
    """The plan with timed-out drains folded in: a failed one counts as a failed node (the
    failure budget spends it), a skipped one is left out of this rollout, as a node kept
    cordoned from an earlier one is; none takes a turn."""
    if not outcomes.done and not outcomes.kept:
        return plan
    done = outcomes.done | outcomes.kept
    starting_nodes = {t.node for t in plan.starting}
    starting = [t for t in plan.starting if t.node not in done]
    failed = sorted(n for n in outcomes.failed if n in starting_nodes)
    skipped = sum(1 for n in starting_nodes if n in outcomes.skipped or n in outcomes.kept)
    return replace(
        plan,
        starting=starting,
        eligible=plan.eligible - skipped,
        failed=plan.failed + len(failed),
        failed_names=sorted([*plan.failed_names, *failed]),
        failed_current_names=sorted([*plan.failed_current_names, *failed]),
    )


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


def node_work(s: Situation, mi: MaintenanceInput, outcomes: DrainTimeouts, turns: Turns) -> NodeWork:
    """The Node writes for the nodes carrying this DaemonJob's record, and the turns left for
    the others: a node in maintenance keeps its slot until it is released."""
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
    if mi.records:  # a node carrying a record takes no new turn until its release is seen
        turns = replace(turns, starting=[t for t in turns.starting if t.node not in mi.records])
    work.turns = turns  # the slots `held` counts are added by the gate step
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


def cordons_for(
    dj: Mapping[str, Any], revision: str, run: str | None, now: datetime, nodes: Iterable[str]
) -> list[Cordon]:
    """The records written on the nodes whose turn came in this decision."""
    meta = dj.get("metadata") or {}
    name = f"{meta.get('namespace') or ''}/{meta.get('name') or ''}"
    since = format_time(now)
    return [Cordon(node, NodeRecord(name, meta.get("uid") or "", revision, run, True, since)) for node in nodes]


def releases_on_delete(records: Mapping[str, NodeRecord]) -> list[Release]:
    """A deleted DaemonJob's finalizer: every node still carrying its record is released."""
    return [Release(node, record, DELETED) for node, record in sorted(records.items())]


def has_finalizer(dj: Mapping[str, Any]) -> bool:
    return FINALIZER in ((dj.get("metadata") or {}).get("finalizers") or ())
