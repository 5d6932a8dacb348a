"""Where a DaemonJob's Jobs succeeded, by revision and run: what spec.after reads.

A DaemonJob that comes after another starts on a node only once the other has a succeeded
Job there of its current revision and run (domain/order/rules.py). Reading that from the other's
Jobs costs one look at each of them, in every pass of every DaemonJob after it; kept here
from the Job events instead (the router hands over each change before it wakes anyone), it
costs a set copy. An event changes at most one node's entry.

Only the DaemonJobs some other one names in spec.after are kept (an entry per node each, so
keeping every DaemonJob's would cost memory for nothing at thousands of nodes): a set is
built from the Jobs cache the first time it is read, follows the Job events from then on,
and is dropped once no DaemonJob names its DaemonJob any more (or that one is deleted). A
read of one not named (a pass that read a spec.after just edited away) is a full read of
its Jobs, kept nowhere.

The build reads the cache under the lock the event handler takes, after marking the DaemonJob
kept: an event of a Job changed after that read waits for the build, and one changed before
it is already in the read. Each node's entry holds the names of its succeeded Jobs (one,
unless names were reused), so an event the read already showed changes nothing when its
handler comes.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from daemonjob.domain.jobs.contract import job_node, job_revision, job_run
from daemonjob.domain.jobs.owners import daemonjob_ref, job_owner_id, owner_id
from daemonjob.domain.jobs.turnverdict import turn_succeeded

__all__ = ["SucceededNodes"]

Obj = Mapping[str, Any]
_Entry = tuple[str, str, str | None, str]  # (owner id, revision, run, node): namespace/uid, owner_id
_Names = str | set[str]  # the succeeded Jobs on a node: one name, or several


def _entry(job: Obj | None) -> _Entry | None:
    """Where `job` counts as succeeded, if it does (the same rule as a full read of the Jobs)."""
    if job is None or daemonjob_ref(job) is None or not turn_succeeded(job):  # a checked turn: its verdict
        return None
    node, revision = job_node(job), job_revision(job)
    if not node or not revision:
        return None
    return job_owner_id(job), revision, job_run(job), node


def _name(job: Obj) -> str:
    return job["metadata"]["name"]


class SucceededNodes:
    def __init__(self, jobs_of: Callable[[str], Iterable[Obj]], named: Callable[[str, str], bool]) -> None:
        """`jobs_of(owner)`: the cached Jobs the DaemonJob of owner id `owner` (namespace/uid)
        controls; `named(namespace, name)`: whether some DaemonJob names that one in spec.after.
        Kept by owner id, so a Job in another namespace carrying a DaemonJob's uid counts for none."""
        self._jobs_of = jobs_of
        self._named = named
        self._lock = threading.Lock()
        self._kept: dict[str, tuple[str, str]] = {}  # owner id -> (namespace, name) of the DaemonJobs kept
        # owner id -> (revision, run) -> node -> its succeeded Jobs' names
        self._nodes: dict[str, dict[tuple[str, str | None], dict[str, _Names]]] = {}

    # -- the router: every Job event -----------------------------------------------------------
    def job_changed(self, old: Obj | None, new: Obj | None) -> None:
        """A Job event: `old` before (None: added), `new` after (None: deleted)."""
        before, after = _entry(old), _entry(new)
        if before == after:
            return
        with self._lock:
            if before is not None and old is not None and before[0] in self._kept:
                self._remove(before, _name(old))
            if after is not None and new is not None and after[0] in self._kept:
                self._add(after, _name(new))

    # -- the DaemonJobs kept -----------------------------------------------------------------------
    def drop(self, namespace: str, name: str) -> None:
        """No DaemonJob names `namespace/name` in spec.after any more: its sets go."""
        with self._lock:
            for owner in [o for o, at in self._kept.items() if at == (namespace, name)]:
                del self._kept[owner]
                self._nodes.pop(owner, None)

    def forget(self, uid: str) -> None:
        """The DaemonJob `uid` was deleted or re-created: its sets go."""
        with self._lock:
            for owner in [o for o in self._kept if o.rpartition("/")[2] == uid]:
                del self._kept[owner]
                self._nodes.pop(owner, None)

    def kept(self) -> set[str]:
        """The uids of the DaemonJobs whose sets are kept."""
        with self._lock:
            return {o.rpartition("/")[2] for o in self._kept}

    # -- the order's readers -------------------------------------------------------------------------
    def nodes(self, dep: Obj, revision: str | None, run: str | None) -> frozenset[str]:
        """The nodes where the DaemonJob `dep` has a succeeded Job of this revision and run."""
        if not revision:
            return frozenset()
        uid = self._keep(dep)
        if uid is None:
            return frozenset(self._read(dep, revision, run))
        with self._lock:
            return frozenset(self._nodes.get(uid, {}).get((revision, run), ()))

    def has(self, dep: Obj, revision: str | None, run: str | None, node: str) -> bool:
        if not revision:
            return False
        uid = self._keep(dep)
        if uid is None:
            return node in self._read(dep, revision, run)
        with self._lock:
            return node in self._nodes.get(uid, {}).get((revision, run), ())

    def _keep(self, dep: Obj) -> str | None:
        """`dep`'s owner id once its sets are kept (built now if need be); None if no DaemonJob names it."""
        meta = dep["metadata"]
        at = (meta.get("namespace") or "", meta["name"])
        uid = owner_id(at[0], meta.get("uid") or "")
        with self._lock:
            if self._kept.get(uid) == at:
                return uid
        if not self._named(*at):
            return None
        with self._lock:
            if self._kept.get(uid) != at:
                self._kept[uid] = at  # first, so an event from now on waits for this lock
                self._nodes.pop(uid, None)
                for job in self._jobs_of(uid):
                    entry = _entry(job)
                    if entry is not None and entry[0] == uid:
                        self._add(entry, _name(job))
        if not self._named(*at):  # the spec.after that named it went while it was built
            self.drop(*at)
            return None
        return uid

    def _read(self, dep: Obj, revision: str, run: str | None) -> set[str]:
        meta = dep["metadata"]
        uid = owner_id(meta.get("namespace") or "", meta.get("uid") or "")
        return {e[3] for j in self._jobs_of(uid) if (e := _entry(j)) is not None and e[:3] == (uid, revision, run)}

    # -- under the lock ----------------------------------------------------------------------------------
    def _add(self, entry: _Entry, name: str) -> None:
        uid, revision, run, node = entry
        at = self._nodes.setdefault(uid, {}).setdefault((revision, run), {})
        held = at.get(node)
        if held is None:
            at[node] = name
        elif isinstance(held, str):
            if held != name:
                at[node] = {held, name}
        else:
            held.add(name)

    def _remove(self, entry: _Entry, name: str) -> None:
        uid, revision, run, node = entry
        runs = self._nodes.get(uid)
        at = runs.get((revision, run)) if runs is not None else None
        held = at.get(node) if at is not None else None
        if held is None:
            return
        assert runs is not None and at is not None
        if isinstance(held, str):
            if held != name:
                return
            del at[node]
        else:
            held.discard(name)
            if len(held) == 1:
                at[node] = next(iter(held))
        if not at:
            del runs[(revision, run)]
            if not runs:
                del self._nodes[uid]
