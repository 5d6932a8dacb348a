"""The cluster's nodes out of service, counted for the whole process, and the cordons in flight.

Counted from the Node informer's events (so a pass reads the count without walking every
node): each node's state, out of service or not and protected or not, and the totals. A
decision reads `snapshot()`; the act layer then `take`s the cordons it is about to write,
under one lock for every worker and every namespace: a cordon the limit or the protected set
refuses is dropped, one it admits is reserved, counted as out of service until the cache shows
the node unschedulable (its watch event), its write fails (`settle`), or `ttl` passes. So two
DaemonJobs deciding at the same moment from the same caches never both take the last unit.

A reservation is keyed by node and DaemonJob, and only its owner's `settle` ends it: two
DaemonJobs may both take the same node (the second at no cost, the node being reserved), and
the one whose write loses (the node is held by the other's record) must not free the unit the
winner's cordon, not yet in the cache, still takes.

A DaemonJob the budget holds is woken when a node comes back in service, a node joins or
leaves, or a reservation ends with no cordon: from the Node events, not by a periodic resync.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import structlog

from daemonjob import defaults
from daemonjob.domain.nodework.disruption import Admission, Disruption, admit, is_protected, out_of_service
from daemonjob.domain.nodework.maintenance import Cordon
from daemonjob.domain.spec.selectors import LabelMatcher
from daemonjob.machinery.cache.informer import Handlers, SharedInformer, Tombstone, deleted_object

__all__ = ["ClusterDisruption"]

log = structlog.get_logger("daemonjob.controller")

Obj = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class _State:
    down: bool
    protected: bool


class ClusterDisruption:
    def __init__(
        self,
        nodes: SharedInformer,
        wake: Callable[[str], None],
        timer: Callable[[], float],
        *,
        max_unavailable: int | str | None = defaults.MAX_UNAVAILABLE_NODES,
        protected: LabelMatcher | None = None,
        protected_selector: str = "",
        ttl: float = defaults.EXPECTATIONS_TTL,
    ) -> None:
        """`max_unavailable`: --max-unavailable-nodes (None: no limit); `protected`: the
        compiled --protected-node-selector (None: no protected set), `protected_selector` its text."""
        self.nodes = nodes
        self.max_unavailable = max_unavailable
        self.protected, self.protected_selector = protected, protected_selector
        self._wake, self._timer, self.ttl = wake, timer, ttl
        self._lock = threading.Lock()
        self._states: dict[str, _State] = {}
        self._down = 0
        self._protected_up = 0
        self._reserved: dict[str, dict[str, float]] = {}  # node -> {DaemonJob key: when taken}, never empty
        self._waiting: set[str] = set()
        self._frees = 0  # events that may have made room: a waiter registered with an older count is woken
        nodes.add_handlers(Handlers(self._added, self._updated, self._deleted))
        for node in nodes.store.list():  # what an informer started before holds already
            self._added(node)

    # -- what a decision reads -----------------------------------------------------------------
    @property
    def version(self) -> int:
        """Read before the snapshot; `wait` with it wakes at once if room was made since."""
        return self._frees

    def snapshot(self) -> Disruption:
        with self._lock:
            return self._snapshot()

    def _snapshot(self) -> Disruption:
        self._expire()
        unavailable, protected_up = self._down, self._protected_up
        reserved = frozenset(self._reserved)
        for name in reserved:
            state = self._states.get(name)
            if state is None or not state.down:
                unavailable += 1
                protected_up -= state is not None and state.protected
        return Disruption(
            self.max_unavailable,
            len(self._states),
            unavailable,
            reserved,
            self.protected,
            self.protected_selector,
            protected_up,
        )

    def unavailable(self) -> float:
        return float(self.snapshot().unavailable)

    def limit(self) -> float:
        """The limit as a number of nodes (-1: no limit), for its metric."""
        limit = self.snapshot().limit
        return -1.0 if limit is None else float(limit)

    def wait(self, key: str, version: int) -> None:
        """`key` is held by the budget: woken when room is made (at once if it was since `version`)."""
        with self._lock:
            if self._frees == version:
                self._waiting.add(key)
                return
        self._wake(key)

    # -- the act layer ---------------------------------------------------------------------------
    def take(self, key: str, cordons: Sequence[Cordon]) -> tuple[list[Cordon], Admission]:
        """The cordons that may be written now (each reserved), and what was held."""
        if not cordons or self.max_unavailable is None:
            return list(cordons), Admission()
        with self._lock:
            admission = admit(self._snapshot(), [(c.node, self.nodes.store.get(c.node)) for c in cordons])
            now = self._timer()
            taken = [c for c in cordons if c.node in set(admission.admitted)]
            for c in taken:
                self._reserved.setdefault(c.node, {})[key] = now
            if admission.held:
                self._waiting.add(key)
        if admission.held:
            log.info(
                "cordons held by the cluster disruption budget",
                key=key,
                over_limit=list(admission.over_limit),
                protected=list(admission.protected),
            )
        return taken, admission

    def settle(self, taken: Sequence[Cordon], cordoned: Sequence[str], *, key: str) -> None:
        """After the writes of `key`'s pass: its reservations of cordons not in place (`cordoned`:
        written now, or found written by its earlier pass) end, making room once no other
        DaemonJob holds the node reserved; another's are left alone."""
        done = set(cordoned)
        freed = False
        with self._lock:
            for c in taken:
                owners = self._reserved.get(c.node)
                if c.node in done or owners is None or owners.pop(key, None) is None:
                    continue
                if not owners:
                    del self._reserved[c.node]
                    freed = True
            woken = self._freed() if freed else []
        self._wake_all(woken)

    # -- Node events ------------------------------------------------------------------------------
    def _added(self, node: Obj) -> None:
        self._changed(node["metadata"]["name"], node)

    def _updated(self, old: Obj, new: Obj) -> None:
        self._changed(new["metadata"]["name"], new)

    def _deleted(self, obj: Obj | Tombstone) -> None:
        self._changed(deleted_object(obj)["metadata"]["name"], None)

    def _changed(self, name: str, node: Obj | None) -> None:
        new = None if node is None else _State(out_of_service(node), is_protected(self.protected, node))
        with self._lock:
            old = self._states.pop(name, None)
            if old is not None:
                self._down -= old.down
                self._protected_up -= old.protected and not old.down
            if new is not None:
                self._states[name] = new
                self._down += new.down
                self._protected_up += new.protected and not new.down
            if new is None or new.down:
                self._reserved.pop(name, None)  # counted by the cache now, or gone: every owner's
            frees = old is None or new is None or (old.down and not new.down) or old.protected != new.protected
            woken = self._freed() if frees else []
        self._wake_all(woken)

    # -- internals (under the lock) --------------------------------------------------------------
    def _freed(self) -> list[str]:
        self._frees += 1
        woken = sorted(self._waiting)
        self._waiting.clear()
        return woken

    def _expire(self) -> None:
        cutoff = self._timer() - self.ttl
        for node, owners in list(self._reserved.items()):
            for key in [k for k, since in owners.items() if since <= cutoff]:
                del owners[key]
            if not owners:
                del self._reserved[node]

    def _wake_all(self, keys: list[str]) -> None:
        for key in keys:
            self._wake(key)
