"""Attempts: a node's Job re-created after a delete takes a name no earlier Job of it had.

The Job controller keys its pod expectations by namespace/name: a Job re-created under the
name of one just deleted can inherit the deleted Job's unobserved pod create and be left
without a pod for 5 minutes, or for good (kubernetes/kubernetes#131917, #142142). No wait
after the delete is long enough under every load, so a name is never used twice.

Within one rollout (revision, run) a node's Jobs are numbered: its first Job is attempt 0,
named as it always was; the Job that replaces a deleted one is the next attempt, named with
it (`job_name(..., attempt)`) and labelled `daemonjob.io/attempt`. A node's next attempt is
read from the cluster, so the same state gives the same name and a create racing a restart
or a second pass gets AlreadyExists instead of a second Job:
- its Jobs of the rollout (the label; any state, terminating included): one more than the
  highest;
- `status.nodeAttempts`: the attempt recorded for a node before its Job is created, so it
  outlives the deleted Job it follows. An attempt above 0 is created only once the status
  records it (a pass records it, the write wakes the pass that creates);
- the deletes the controller saw (in memory, `DeletedJobs`): a deleted Job leaves nothing
  in the cluster, so the next pass records the attempt after it, whether or not the node's
  turn has come.
The record holds only the nodes of the current rollout that still exist and whose recorded
attempt has no Job yet: once its Job is in the cache, the Job carries the attempt, so the
record stays as small as the re-runs under way. The nodes' Jobs are found by labels and
their node annotation, never by name, so Jobs named before attempts existed are attempt 0.

A delete no replica saw (made while none ran, or just before a restart, before the next
pass recorded it) leaves no trace: that node's next Job takes the attempt the cluster still
tells, the name of the deleted Job if it was the last. Guessing higher after a restart would
break the rule that a restart creating the Job an earlier process was creating meets
AlreadyExists.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from daemonjob.domain.jobs.changes import CreateJob
from daemonjob.domain.jobs.jobview import JobView
from daemonjob.domain.spec.revision import job_name

__all__ = ["STATUS_FIELD", "DeletedJobs", "Assigned", "rollout_of", "recorded_attempts", "next_attempt", "assign"]

STATUS_FIELD = "nodeAttempts"

Rollout = tuple[str | None, str | None]  # (revision, run)
# a node's inputs as the kept plan holds them: its node object (None: deleted) and its Jobs
NodeInputs = tuple[Mapping[str, Any] | None, Sequence[JobView]]


@dataclass(frozen=True, slots=True)
class DeletedJobs:
    """Jobs of one DaemonJob seen deleted: (revision, run) -> node -> the highest attempt among them."""

    attempts: Mapping[Rollout, Mapping[str, int]] = field(default_factory=dict)

    def of(self, revision: str, run: str | None) -> Mapping[str, int]:
        return self.attempts.get((revision, run)) or {}


@dataclass(frozen=True, slots=True)
class Assigned:
    """The creates that may go now, each with its attempt; the nodes whose next attempt must be
    recorded first; the status field to write (None: nothing recorded)."""

    creates: list[CreateJob]
    recording: tuple[str, ...] = ()
    status: dict[str, Any] | None = None


def rollout_of(revision: str, run: str | None) -> str:
    """What the record belongs to: another revision or run starts every node at attempt 0."""
    return revision if run is None else f"{revision}/{run}"


def recorded_attempts(status: Mapping[str, Any], revision: str, run: str | None) -> dict[str, int]:
    """node -> the attempt `status` records for the rollout (a record of another one is void)."""
    raw = status.get(STATUS_FIELD)
    if not isinstance(raw, Mapping) or raw.get("rollout") != rollout_of(revision, run):
        return {}
    out: dict[str, int] = {}
    for entry in raw.get("nodes") or ():
        if not isinstance(entry, Mapping):
            continue
        node, attempt = entry.get("node"), entry.get("attempt")
        if isinstance(node, str) and node and isinstance(attempt, int) and attempt > 0:
            out[node] = max(out.get(node, 0), attempt)
    return out


def _made(jobs: Iterable[JobView], revision: str, run: str | None, attempt: int) -> bool:
    """A Job of the rollout of that attempt (or a later one) is in the cache: it carries the
    attempt. Or the node's recorded success of the rollout stands for its Job, let go once
    recorded (spec.results.deleteSucceededJobs): no Job of the rollout is coming there, and
    recording one for every let-go node made the status grow with the cluster (10,000 entries
    at 10,000 nodes, written and read whole by every pass). Should the record go, the delete
    seen (`DeletedJobs`) still moves the next Job's attempt on."""
    return any((j.standin or j.attempt >= attempt) and j.revision == revision and j.run == run for j in jobs)


def next_attempt(
    jobs: Iterable[JobView], revision: str, run: str | None, recorded: int = 0, deleted: int | None = None
) -> int:
    """The attempt of the node's next Job of the rollout: above every attempt its Jobs (standing
    or seen deleted) had, and never below what the status records."""
    tried = [j.attempt for j in jobs if j.revision == revision and j.run == run]
    if deleted is not None:
        tried.append(deleted)
    return max(recorded, max(tried) + 1 if tried else 0)


def assign(
    creates: Sequence[CreateJob],
    status: Mapping[str, Any],
    revision: str,
    run: str | None,
    node_inputs: Callable[[str], NodeInputs | None],
    deleted: DeletedJobs = DeletedJobs(),
) -> Assigned:
    """Give each create its attempt. A create whose attempt the status does not record yet is
    held back and recorded (written with the status of this pass); every node seen losing a
    Job of the rollout is recorded with the attempt after it, so a restart keeps it."""
    recorded = recorded_attempts(status, revision, run)
    record = dict(recorded)
    gone = deleted.of(revision, run)
    for node, attempt in gone.items():
        if attempt + 1 > record.get(node, 0):
            record[node] = attempt + 1
    kept: list[CreateJob] = []
    recording: list[str] = []
    dj_name = ""
    for create in creates:
        inputs = node_inputs(create.node)
        jobs = inputs[1] if inputs is not None else ()
        attempt = next_attempt(jobs, revision, run, recorded.get(create.node, 0), gone.get(create.node))
        if attempt == recorded.get(create.node, 0):
            if attempt:
                dj_name = dj_name or ((create.dj.get("metadata") or {}).get("name") or "")
                name = job_name(dj_name, create.node, create.revision, create.run, attempt)
                create = dataclasses.replace(create, name=name, attempt=attempt, follows=gone.get(create.node))
            kept.append(create)
        else:
            record[create.node] = max(record.get(create.node, 0), attempt)
            recording.append(create.node)
    entries = [
        {"node": node, "attempt": attempt}
        for node, attempt in sorted(record.items())
        if (inputs := node_inputs(node)) is not None
        and inputs[0] is not None
        and not _made(inputs[1], revision, run, attempt)
    ]
    field_ = {"rollout": rollout_of(revision, run), "nodes": entries} if entries else None
    return Assigned(kept, tuple(recording), field_)
