"""What the result recorder keeps of each DaemonJob: its rollouts as recorded, its Jobs waiting
to be, and (with spec.results.deleteSucceededJobs) each node's newest recorded success."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from daemonjob import defaults
from daemonjob.domain.outcomes import Outcomes
from daemonjob.domain.plan import JobView
from daemonjob.domain.recorded import newer, standin_of
from daemonjob.domain.resultsread import ResultsUnread

__all__ = ["Chunk", "Kept", "Rollout", "Successes", "outcomes"]

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
    """Each node's newest recorded success as a stand-in view (domain/recorded.py): one per
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
