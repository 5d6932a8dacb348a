"""A DaemonJob's pending results written: its reports read first if need be, then by rollout.

The recorder's thread calls `flush`; a failure is retried after RESULT_RETRY_DELAY, and a new
one logged and told to the DaemonJob's status (`unread`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import structlog

from daemonjob import defaults
from daemonjob.controller.results.kept import Kept
from daemonjob.controller.results.store import ReportsServed, read_results
from daemonjob.controller.results.writes import ReportWrites
from daemonjob.domain.results.noderesult import rollout_key
from daemonjob.domain.results.unreadable import ResultsUnread
from daemonjob.domain.spec.validate import read_spec
from daemonjob.machinery.client.kube import ApiError
from daemonjob.machinery.process.clock import Clock

__all__ = ["ReportFlush"]

log = structlog.get_logger("daemonjob.results")
Obj = Mapping[str, Any]


class ReportFlush(ReportWrites):
    """The flush of one DaemonJob; ResultRecorder sets these attributes."""

    clock: Clock
    served: ReportsServed
    daemonjob: Callable[[str], Obj | None]
    foreign: Callable[[Obj], bool]
    wake: Callable[[str], None]
    wake_soon: Callable[[str], None]
    _kept: dict[str, Kept]
    _held: dict[str, str]

    @staticmethod
    def _recorded(kept: Kept, uid: str) -> bool:
        return any(uid in r.recorded for r in kept.rollouts.values())

    def flush(self, owner: str) -> int:
        """Write what the DaemonJob has pending; returns the results written."""
        with self._lock:
            kept = self._kept.get(owner)
            if kept is None or not (kept.pending or kept.regroup):
                return 0
            namespace, name = kept.namespace, kept.name
        dj = self.daemonjob(f"{namespace}/{name}")
        ours = dj is not None and (dj.get("metadata") or {}).get("uid") == owner.rpartition("/")[2]
        if dj is None or not ours or not self.store.may_write():
            if not ours:  # noted before its DaemonJob was cached: foreign Jobs, after all?
                with self._lock:
                    foreign = [uid for uid, job in kept.pending.items() if self.foreign(job)]
                self._release(kept, foreign)
            self._retry_later(owner)
            return 0
        if read := not kept.loaded or kept.regroup:
            self._load(kept, owner, read_spec(dj).results_group_by)
        with self._lock:
            jobs = [j for uid, j in kept.pending.items() if not self._recorded(kept, uid)]
            done = [uid for uid in kept.pending if self._recorded(kept, uid)]
        self._release(kept, done)
        results = read_results(self.store, namespace, jobs)
        written = 0
        by_rollout: dict[str, list[dict[str, Any]]] = {}
        for r in results:
            key = rollout_key(r.get("revision"), r.get("run"))
            if key in kept.pruned:
                self._release(kept, [r["jobUID"]])
                continue
            by_rollout.setdefault(key, []).append(r)
        new_rollout = False
        for key, rs in by_rollout.items():
            new_rollout |= key not in kept.rollouts
            try:
                written += self._write(kept, dj, key, rs)
            except BaseException:  # a write may have gone through: read the reports again first
                self._forget_loaded(kept)
                raise
            self._release(kept, [r["jobUID"] for r in rs])
        if new_rollout:
            self._prune(kept, dj)
        with self._lock:
            kept.unread = None  # read and written (cleared only now: a write refused after a read would flap)
        self.served.found(True)
        (self.wake if read else self.wake_soon)(f"{namespace}/{name}")
        return written

    def _release(self, kept: Kept, uids: list[str]) -> None:
        with self._lock:
            for uid in uids:
                kept.pending.pop(uid, None)
                self._held.pop(uid, None)
            kept.since = self.clock.now() if kept.pending else None

    def _failed(self, owner: str, exc: Exception) -> None:
        """Tried again later; a new error is logged and wakes the DaemonJob: its status says why."""
        why = ResultsUnread(exc.status, str(exc)[:500]) if isinstance(exc, ApiError) else ResultsUnread(None, repr(exc))
        with self._lock:
            kept = self._kept.get(owner)
            if kept is None:
                return
            kept.retry_at = self.clock.now() + defaults.RESULT_RETRY_DELAY
            news, kept.unread = kept.unread != why, why
            key = f"{kept.namespace}/{kept.name}"
        if why.crd_missing:
            self.served.found(False)
        elif news:
            log.warning("recording results failed", daemonjob=key, error=why.error[:300], exc_info=why.status is None)
        if news:
            self.wake(key)

    def _retry_later(self, owner: str) -> None:
        with self._lock:
            kept = self._kept.get(owner)
            if kept is not None:
                kept.retry_at = self.clock.now() + defaults.RESULT_RETRY_DELAY
