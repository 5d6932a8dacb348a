"""The result recorder: each finished node Job's result, written in batches to report objects.

Job events only note a finished Job (O(1), on the informer's thread). One thread writes a
DaemonJob's noted Jobs once RESULT_FLUSH_COUNT wait, after RESULT_FLUSH_DELAY, or after
RESULT_FLUSH_IDLE when none of its Jobs still runs: their pods read with one list per
RESULT_POD_BATCH Jobs, the results appended to the rollout's last chunk (new chunks once full).
What is recorded is known from the reports themselves, listed once per DaemonJob before its
first write: after a restart, finished Jobs still in the cluster are recorded if missing.
History cleanup holds a finished Job until it is recorded (`holds`). Rollouts beyond the
current one and max(historyLimit, 1) earlier ones are deleted when a new one starts.
A DaemonJob is kept here by owner id, "namespace/uid" (domain.jobs.owner_id): a Job in another
namespace carrying its uid (`foreign`) is never noted, nor filed under its name.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Mapping
from typing import Any

import structlog

from daemonjob import defaults
from daemonjob.controller.results.due import sooner_than, writes_due
from daemonjob.controller.results.flush import ReportFlush
from daemonjob.controller.results.kept import Kept
from daemonjob.controller.results.store import ReportsServed, ResultStore
from daemonjob.domain.jobs.contract import FAILED, SUCCEEDED, TERMINATING, job_finish_time
from daemonjob.domain.jobs.owners import daemonjob_ref, job_owner_id
from daemonjob.domain.jobs.turnverdict import turn_of
from daemonjob.domain.results.noderesult import rollout_key
from daemonjob.domain.results.outcomes import Outcomes, summary
from daemonjob.domain.results.unreadable import ResultsUnread
from daemonjob.domain.rollout.plan import JobView
from daemonjob.machinery.cache.informer import Handlers, Tombstone, deleted_object
from daemonjob.machinery.process.clock import Clock, RealClock

__all__ = ["ResultRecorder"]

log = structlog.get_logger("daemonjob.results")
Obj = Mapping[str, Any]


def _finished(job: Obj) -> bool:
    """The node's turn is over: its Job finished and, on a checked node, its verdict is written."""
    state = turn_of(job)[0]
    return state in (SUCCEEDED, FAILED) or (state == TERMINATING and job_finish_time(job) is not None)


class ResultRecorder(ReportFlush):
    def __init__(
        self,
        store: ResultStore,
        daemonjob: Callable[[str], Obj | None],
        running: Callable[[str], bool],
        wake: Callable[[str], None],
        *,
        wake_soon: Callable[[str], None] | None = None,
        clock: Clock | None = None,
        chunk_bytes: int = defaults.RESULT_CHUNK_BYTES,
        urgent: Callable[[], bool] = lambda: False,
        foreign: Callable[[Obj], bool] = lambda _job: False,
    ) -> None:
        """`daemonjob(key)`: the cached DaemonJob; `running(uid)`: whether any of its Jobs may still
        run; `wake(key)`: a pass for it now (its reports read or not: a pass may wait for them);
        `wake_soon(key)`: one soon, once a batch is written (status.results, held history deletes);
        `urgent()`: passes that must not wait (a joined node's first Jobs) are queued or running,
        or were moments ago (a burst of them goes on): writes due give way to them for up to
        RESULT_YIELD_MAX, looking again every RESULT_YIELD_RECHECK. `foreign(job)`: the Job
        carries the uid of a DaemonJob of another namespace (ownership.py), ignored.
        The other methods name a DaemonJob by its owner id."""
        self.store = store
        self.chunk_bytes = min(max(chunk_bytes, 4096), defaults.RESULT_CHUNK_BYTES)  # as --result-chunk-bytes says
        self.daemonjob = daemonjob
        self.running = running
        self.wake, self.wake_soon = wake, wake_soon or wake
        self.clock = clock or RealClock()
        self.urgent = urgent
        self.foreign = foreign
        self._yielding_since: float | None = None  # when writes due began to give way to urgent passes
        self._holding = False  # the thread's last look held writes due back: notes wake nothing
        self._kept: dict[str, Kept] = {}  # by DaemonJob owner id (namespace/uid)
        self._held: dict[str, str] = {}  # Job uid -> DaemonJob owner id, while pending
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._thread: threading.Thread | None = None
        self._stopped = False
        self._looks_at = -math.inf  # when the thread looks for writes due next (-inf: looking now)
        self._changed = False  # pending writes changed since the thread's look began
        self.writes = 0  # report creates and appends, for the figures
        self.served = ReportsServed()  # the CRD missing is logged once, not per DaemonJob
        # (DaemonJob uid, key, nodes): its recorded successes changed on nodes (None: read whole)
        self.told: Callable[[str, str, list[str] | None], None] = lambda _uid, _key, _nodes: None

    def handlers(self) -> Handlers:
        return Handlers(self.job_seen, lambda _old, new: self.job_seen(new), self.job_deleted)

    def job_seen(self, job: Obj) -> None:
        if daemonjob_ref(job) is not None and _finished(job) and not self.foreign(job):
            self._note(job)

    def job_deleted(self, obj: Obj | Tombstone) -> None:
        """A finished Job deleted unrecorded: recorded from its last state; a running one: maybe due sooner."""
        job = deleted_object(obj)
        if daemonjob_ref(job) is None or self.foreign(job):
            return
        if _finished(job):
            return self._note(job)
        owner = job_owner_id(job)
        with self._lock:
            if (kept := self._kept.get(owner)) is not None and kept.pending:
                self._sooner(owner, kept)

    def _sooner(self, owner: str, kept: Kept) -> None:
        """Wake the thread if `kept`'s write falls due before it looks again (resultdue.py; locked).

        Not while its writes give way to urgent passes: it looks again every RESULT_YIELD_RECHECK
        then, and a write a note brings due would be held back too; a look per Job event of the
        burst would take the GIL and the queue's lock from the passes it gives way to."""
        if self._holding:
            return
        self._changed = True
        if sooner_than(kept, lambda: self.running(owner), self._looks_at):
            self._cond.notify()

    def _note(self, job: Obj) -> None:
        meta = job.get("metadata") or {}
        uid, owner = meta.get("uid") or "", job_owner_id(job)
        if not uid:
            return
        with self._lock:
            kept = self._kept.get(owner)
            if kept is None:
                ref = daemonjob_ref(job) or {}
                kept = self._kept[owner] = Kept(meta.get("namespace") or "", ref.get("name") or "")
            if uid in kept.pending or (kept.loaded and self._recorded(kept, uid)):
                return
            kept.pending[uid] = job
            self._held[uid] = owner
            if kept.since is None:
                kept.since = self.clock.now()
            self._sooner(owner, kept)

    def holds(self, job_uid: str) -> bool:
        """The Job finished and its result is not recorded yet: do not delete it now."""
        with self._lock:
            return job_uid in self._held

    def forget(self, dj_uid: str) -> None:
        """The DaemonJob `dj_uid` is gone: its reports go with it (owner references)."""
        with self._lock:
            for owner in [o for o in self._kept if o.rpartition("/")[2] == dj_uid]:
                for uid in self._kept.pop(owner).pending:
                    self._held.pop(uid, None)

    def summary(
        self, owner: str, revision: str | None, run: str | None, group_by: str | None = None
    ) -> dict[str, Any] | None:
        """status.results of the rollout; None while the DaemonJob's reports are not read yet
        (or read again, grouped by another `group_by`)."""
        key = rollout_key(revision, run)
        with self._lock:
            kept = self._kept.get(owner)
            if kept is None or not kept.loaded or not key:
                return None
            if kept.group_by != group_by:
                kept.regroup = self._changed = True
                self._cond.notify()
                return None
            rollout = kept.rollouts.get(key)
            if rollout is None:
                return summary(Outcomes(), revision or "", run)
            if rollout.status is None:
                rollout.status = summary(rollout.outcomes, rollout.revision, rollout.run)
            return rollout.status

    def successes(self, owner: str, namespace: str, name: str) -> Mapping[str, JobView] | None:
        """Each node's newest recorded success (spec.results.deleteSucceededJobs); None until
        the reports are read, which this asks for (`told` and a wake follow). Live: read it
        by node; copy it before going over it."""
        with self._lock:
            kept = self._kept.get(owner)
            if kept is None:
                kept = self._kept[owner] = Kept(namespace, name)
            if kept.loaded and kept.successes is not None:
                return kept.successes.nodes
            if not kept.track or not kept.regroup:
                kept.track = kept.regroup = self._changed = True
                self._cond.notify()
            return None

    def stands_for(self, owner: str, node: str, job_uid: str) -> bool:
        """Whether the Job `job_uid` is `node`'s newest recorded success of `owner` (its let-go
        under spec.results.deleteSucceededJobs leaves the record standing for it). Reads only."""
        with self._lock:
            kept = self._kept.get(owner)
            if kept is None or not kept.loaded or kept.successes is None:
                return False
            view = kept.successes.nodes.get(node)
        return view is not None and view.uid == job_uid

    def start(self) -> None:
        with self._lock:
            if self._thread is None and not self._stopped:
                self._thread = threading.Thread(target=self._run, name="results", daemon=True)
                self._thread.start()

    def stop(self) -> None:
        with self._lock:
            self._stopped = self._changed = True
            self._cond.notify_all()

    def alive(self) -> bool:
        return self._thread is None or self._thread.is_alive() or self._stopped

    def _run(self) -> None:
        while True:
            with self._lock:
                self._looks_at, self._changed = -math.inf, False
            now = self.clock.now()
            due, wait = self._due(now)
            if held := self._held_due(due, now):
                due = [owner for owner in due if owner not in held]
                wait = defaults.RESULT_YIELD_RECHECK
            with self._lock:
                self._holding = bool(held) and not due
                if self._stopped:
                    return
                if not due:
                    if not self._changed:  # else something changed while it looked: look again
                        self._looks_at = math.inf if wait is None else now + wait
                        self.clock.wait(self._cond, wait)
                    continue
            self.flush_due(due)

    def _held_due(self, due: list[str], now: float) -> list[str]:
        """The DaemonJobs of `due` whose writes wait for urgent passes (urgent() asked once)."""
        if not due or not self._gives_way(now):
            return []
        with self._lock:
            return [owner for owner in due if not self._waited_for(owner)]

    def _waited_for(self, owner: str) -> bool:
        """A pass waits for the DaemonJob's reports to be read (spec.results.deleteSucceededJobs,
        a new groupBy), which may be one of the urgent passes: never held back (locked)."""
        kept = self._kept.get(owner)
        return kept is not None and kept.regroup

    def _gives_way(self, now: float) -> bool:
        """Whether writes due wait for the urgent passes: a pod list, a report write and the
        status pass after it take the API server's time a joined node's first Jobs are waiting
        for. Bounded, so results are written however long urgent passes keep coming; between
        two bursts (nodes joining a few at a time) the writes due go on one DaemonJob at a time."""
        if not self.urgent():
            self._yielding_since = None
            return False
        if self._yielding_since is None:
            self._yielding_since = now
        return now - self._yielding_since < defaults.RESULT_YIELD_MAX

    def flush_due(self, due: list[str]) -> None:
        """One round of the recorder's thread over the DaemonJobs due now; from the second on,
        those held back by urgent passes are left for a later look (they stay due)."""
        for i, owner in enumerate(due):
            if i and self._held_due([owner], self.clock.now()):
                continue
            try:
                self.flush(owner)
            except Exception as exc:  # the next round tries again; nothing is dropped
                self._failed(owner, exc)

    def unread(self, owner: str) -> ResultsUnread | None:
        """Why the DaemonJob's reports cannot be read or written now (None: they can)."""
        with self._lock:
            kept = self._kept.get(owner)
            return kept.unread if kept is not None else None

    def _due(self, now: float) -> tuple[list[str], float | None]:
        with self._lock:  # the informer's index read under it: a count, no Job read
            return writes_due(self._kept, self.running, now)
