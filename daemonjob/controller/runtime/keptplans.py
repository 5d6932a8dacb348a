"""Each DaemonJob's plan, kept across passes: events mark the nodes they changed.

Event handlers mark a node for the DaemonJobs it may concern (a Job's owner; for a node
event, every DaemonJob kept here, which then reads back the node object only: its Jobs did
not change); a pass reads only the marked nodes back from the caches and hands them to that
DaemonJob's KeptPlan, so a Job finishing or a node joining costs one node's work. A DaemonJob
met for the first time, or after a check found a difference, is loaded whole. Every
SELF_CHECK_INTERVAL a pass also makes the full plan and compares (see `Controller`): a
difference is logged, counted and repaired by loading it whole.
"""

from __future__ import annotations

import bisect
import threading
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from daemonjob import defaults
from daemonjob.controller.runtime.informers import NODE_INDEX, OWNER_INDEX
from daemonjob.domain.jobs.contract import job_node
from daemonjob.domain.jobs.owners import daemonjob_ref, owner_id
from daemonjob.domain.rollout.keptplan import KeptPlan, node_views
from daemonjob.domain.rollout.plan import JobView, job_view
from daemonjob.domain.rollout.turns import Turn
from daemonjob.domain.shared.memo import Memo
from daemonjob.machinery.cache.informer import SharedInformer

__all__ = ["KeptPlans", "NO_NODE", "TURN", "MAYBE"]

NO_NODE = ""  # where Jobs without a node annotation are kept (only a TTL on them matters)
TURN, MAYBE = "turn", "maybe"  # how a node concerns a DaemonJob's next pass (KeptPlans.concern)


def _turn_node(turn: Turn) -> str:
    return turn.node


@dataclass
class _Entry:
    state: KeptPlan | None = None  # None: load it whole at the next pass
    dirty: set[str] = field(default_factory=set)  # nodes whose Jobs of this DaemonJob changed
    moved: set[str] = field(default_factory=set)  # nodes of which only the node object changed
    taken: int = -1  # the plan's `planned` when a pass took the marks: equal while that pass plans
    checked_at: float = 0.0
    recorded: bool = False  # loaded with recorded successes (spec.results.deleteSucceededJobs)
    namespace: str = ""  # the DaemonJob's: only its Jobs there are its (owner references are namespace-local)


class KeptPlans:
    def __init__(self, jobs: SharedInformer, nodes: SharedInformer, memo: Memo) -> None:
        self._jobs = jobs
        self._nodes = nodes
        self._memo = memo
        self._lock = threading.Lock()
        self._entries: dict[str, _Entry] = {}  # by DaemonJob uid

    # -- from the event handlers ---------------------------------------------------------
    def job_changed(self, *jobs: Mapping[str, Any]) -> None:
        """A Job's versions (before and after): their owners' nodes are marked."""
        with self._lock:
            for job in jobs:
                ref = daemonjob_ref(job)
                entry = self._entries.get(ref.get("uid") or "") if ref is not None else None
                if entry is not None and entry.namespace == job["metadata"].get("namespace"):
                    entry.dirty.add(job_node(job) or NO_NODE)

    def node_changed(self, name: str) -> None:
        """A node object changed: its Jobs did not (their events mark them), so a pass reads
        only the node back, not the Jobs there (which, with many DaemonJobs, are many)."""
        with self._lock:
            for entry in self._entries.values():
                entry.moved.add(name)

    def recorded_changed(self, uid: str, nodes: list[str] | None) -> None:
        """The recorded successes changed on `nodes` (None: read again whole)."""
        with self._lock:
            entry = self._entries.get(uid)
            if entry is not None and nodes is None:
                entry.state = None
            elif entry is not None and nodes is not None:
                entry.dirty.update(nodes)

    def forget(self, uid: str) -> None:
        with self._lock:
            self._entries.pop(uid, None)

    def reload(self, uid: str) -> None:
        """Load this DaemonJob whole at its next pass (its kept plan was found wrong)."""
        with self._lock:
            entry = self._entries.get(uid)
            if entry is not None:
                entry.state = None

    # -- from a pass (one at a time per DaemonJob) -------------------------------------------
    def kept_plan(
        self,
        uid: str,
        adopted: Iterable[Mapping[str, Any]] = (),
        recorded: Mapping[str, JobView] | None = None,
        *,
        namespace: str,
    ) -> KeptPlan:
        """The DaemonJob's kept plan, told of every node marked since the last pass. `adopted`:
        Jobs adopted in this pass, not in the owner's index until their update arrives (which
        marks their nodes again). `recorded`: each node's newest recorded success, with
        spec.results.deleteSucceededJobs (the plan is loaded whole when that is turned on or off).
        `namespace`: the DaemonJob's; its Jobs are read by owner id, namespace and uid."""
        owner = owner_id(namespace, uid)
        with self._lock:
            entry = self._entries.setdefault(uid, _Entry(namespace=namespace))
            if entry.recorded != (recorded is not None):
                entry.state, entry.recorded = None, recorded is not None
            dirty, entry.dirty = entry.dirty, set()  # marks from now on come to the next pass
            moved, entry.moved = entry.moved, set()
            state = entry.state
            entry.taken = state.planned if state is not None else 0
        extra: dict[str, list[Mapping[str, Any]]] = {}
        for job in adopted:
            extra.setdefault(job_node(job) or NO_NODE, []).append(job)
        if state is None:
            state = KeptPlan.of(
                [*self._jobs.store.by_index(OWNER_INDEX, owner), *(j for js in extra.values() for j in js)],
                self._nodes.store.list(),
                self._memo,
                dict(recorded) if recorded is not None else None,
            )
            with self._lock:
                entry.state = state
            return state
        for name in dirty | extra.keys():
            jobs = [*self._jobs_of(owner, name), *extra.get(name, ())]
            node = self._nodes.store.get(name) if name != NO_NODE else None
            views = [job_view(j, self._memo) for j in jobs]
            state.set_node(name, node, node_views(node, views, recorded.get(name) if recorded is not None else None))
        for name in moved - dirty - extra.keys():
            inputs = state.node(name)
            state.set_node(name, self._nodes.store.get(name), inputs[1] if inputs is not None else ())
        return state

    def _jobs_of(self, owner: str, node: str) -> Iterable[Mapping[str, Any]]:
        if node == NO_NODE:
            return [j for j in self._jobs.store.by_index(OWNER_INDEX, owner) if not job_node(j)]
        # A node holds a Job of every DaemonJob there: the index's owner tags pick this one's.
        return self._jobs.store.by_index(NODE_INDEX, node, owner)

    def turn_nodes(self, uid: str) -> list[str]:
        """The nodes where this DaemonJob's last pass left a turn waiting (another DaemonJob of
        its exclusion group reads them: an older member goes first there). Empty before its
        first pass. A snapshot: the lists are copied whole, while its own pass may change them."""
        with self._lock:
            entry = self._entries.get(uid)
            state = entry.state if entry is not None else None
        if state is None:
            return []
        plan = state.plan
        return [t.node for t in (*list(plan.replacing), *list(plan.starting))]

    def concerned(self, uid: str, node: str) -> bool:
        """Whether `node` may matter to this DaemonJob's next pass (`concern` says how)."""
        return bool(self.concern(uid, node))

    def concern(self, uid: str, node: str) -> str:
        """How `node` matters to this DaemonJob's next pass: TURN, its last plan left a turn
        there; MAYBE, its plan does not show the node yet (marked since, loaded whole next, or
        being made now); "" not at all. What changes on a node wakes only the DaemonJobs of an
        order it concerns."""
        with self._lock:
            entry = self._entries.get(uid)
            if entry is None or entry.state is None or node in entry.dirty or node in entry.moved:
                return MAYBE
            if entry.state.planned == entry.taken:
                return MAYBE  # a pass took its marks and has not made its plan yet
            plan = entry.state.plan
        try:  # the lists are sorted by node; its own pass may change them meanwhile
            for turns in (plan.starting, plan.replacing):
                i = bisect.bisect_left(turns, node, key=_turn_node)
                if i < len(turns) and turns[i].node == node:
                    return TURN
        except IndexError:
            return MAYBE
        return ""

    def marked(self, uid: str) -> bool:
        """Whether an event marked this DaemonJob's nodes since its pass took the marks: a
        full plan made now may have read what the kept one has not yet (its next pass will)."""
        with self._lock:
            entry = self._entries.get(uid)
            return entry is not None and bool(entry.dirty or entry.moved)

    def check_soon(self, uid: str) -> None:
        """The comparison was inconclusive (the caches moved in between): due at the next pass
        that has nothing to do."""
        with self._lock:
            entry = self._entries.get(uid)
            if entry is not None:
                entry.checked_at = float("-inf")

    def check_due(self, uid: str, now: float) -> bool:
        """True once per SELF_CHECK_INTERVAL for a DaemonJob: time to compare with a full plan.

        The first check of each DaemonJob is offset by a share of the interval drawn from its
        uid, so DaemonJobs loaded together (at a start) are not all checked in the same moment."""
        with self._lock:
            entry = self._entries.get(uid)
            if entry is None:
                return False
            if not entry.checked_at:  # loaded whole by its first pass: the clock starts then
                spread = (zlib.crc32(uid.encode()) % 1000) / 1000
                entry.checked_at = now + spread * defaults.PLAN_SELF_CHECK_INTERVAL
                return False
            if now - entry.checked_at < defaults.PLAN_SELF_CHECK_INTERVAL:
                return False
            entry.checked_at = now
            return True
