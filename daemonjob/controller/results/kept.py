"""What the result recorder keeps of each DaemonJob: its rollouts as recorded, its Jobs waiting
to be, and (with spec.results.deleteSucceededJobs) each node's newest recorded success."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from daemonjob import defaults
from daemonjob.domain.jobs.standins import newer, standin_of
from daemonjob.domain.results.noderesult import rollout_key
from daemonjob.domain.results.outcomes import Outcomes
from daemonjob.domain.results.reports import LABEL_CHUNK, LABEL_ROLLOUT, result_size
from daemonjob.domain.results.unreadable import ResultsUnread
from daemonjob.domain.rollout.plan import JobView

__all__ = ["Chunk", "Kept", "Rollout", "Successes", "outcomes", "read_rollouts"]

Obj = Mapping[str, Any]


def outcomes(group_by: str | None) -> Outcomes:
    return Outcomes(group_by, names=defaults.RESULT_GROUP_NODES, sample=defaults.RESULT_GROUP_MESSAGE)


@dataclass
class Chunk:
    name: str
    count: int
    size: int


@dataclass
class Rollout:
    key: str
    revision: str
    run: str | None
    order: str  # the first chunk's creationTimestamp: newer rollouts sort later
    chunks: dict[int, Chunk] = field(default_factory=dict)
    # Job uids, a dict used as a set: 5000 of them take 104 KB where a set takes 525
    recorded: dict[str, None] = field(default_factory=dict)
    outcomes: Outcomes = field(default_factory=lambda: outcomes(None))
    status: dict[str, Any] | None = None  # its summary, made once per change


class Successes:
    """Each node's newest recorded success as a stand-in view (domain/jobs/standins.py): one per
    node, whichever rollout it is of, so it costs a view per node, not per result."""

    def __init__(self) -> None:
        self.nodes: dict[str, JobView] = {}

    def add(self, result: Obj) -> str | None:
        """The node whose newest success `result` is, if it is."""
        view = standin_of(result)
        if view is None or not view.node or not newer(view, self.nodes.get(view.node)):
            return None
        self.nodes[view.node] = view
        return view.node


@dataclass
class Kept:
    """One DaemonJob's rollouts as recorded, and its Jobs waiting to be."""

    namespace: str
    name: str
    loaded: bool = False
    group_by: str | None = None  # spec.results.groupBy the outcomes were counted by
    regroup: bool = False  # spec.results.groupBy changed (or the reports are wanted): read them again
    rollouts: dict[str, Rollout] = field(default_factory=dict)
    pending: dict[str, Obj] = field(default_factory=dict)  # by Job uid
    pruned: set[str] = field(default_factory=set)  # rollouts deleted: their Jobs left are not recorded again
    since: float | None = None  # when the oldest pending Job was noted
    retry_at: float = 0.0
    track: bool = False  # keep `successes` (spec.results.deleteSucceededJobs): set by the first pass that asks
    successes: Successes | None = None  # made by a read of the reports once `track` is set
    unread: ResultsUnread | None = None  # why the last read or write failed, until one goes through


def read_rollouts(
    reports: Iterable[Mapping[str, Any]], dj_uid: str, group_by: str | None, successes: Successes | None
) -> dict[str, Rollout]:
    """What the DaemonJob `dj_uid`'s report objects record, by rollout, its outcomes counted by
    `group_by`; each result also told to `successes`, if given."""
    rollouts: dict[str, Rollout] = {}
    for report in reports:
        meta = report.get("metadata") or {}
        if not any(ref.get("uid") == dj_uid for ref in meta.get("ownerReferences") or ()):
            continue  # a namesake DaemonJob's, deleted: the garbage collector takes it
        labels = meta.get("labels") or {}
        key = labels.get(LABEL_ROLLOUT) or rollout_key(report.get("revision"), report.get("run"))
        rollout = rollouts.get(key)
        created = meta.get("creationTimestamp") or ""
        if rollout is None:
            rollout = Rollout(
                key, report.get("revision") or "", report.get("run"), created, outcomes=outcomes(group_by)
            )
            rollouts[key] = rollout
        rollout.order = min(rollout.order, created)
        results = report.get("results") or []
        chunk = int(labels.get(LABEL_CHUNK) or report.get("chunk") or 0)
        size = sum(result_size(r) for r in results)
        rollout.chunks[chunk] = Chunk(meta.get("name") or "", int(report.get("count") or len(results)), size)
        for r in results:
            rollout.recorded[r.get("jobUID") or ""] = None
            rollout.outcomes.add(r)
            if successes is not None:
                successes.add(r)
    return rollouts
