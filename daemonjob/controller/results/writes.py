"""The result recorder's writes of report objects: what is recorded read back once, results
appended to a rollout's last chunk or new chunks made, old rollouts deleted.

Apart from the recorder (recorder.py: what is noted and when a DaemonJob's results are due),
whose state it shares through the attributes it names.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any

import structlog

from daemonjob.controller.results.kept import Chunk, Kept, Rollout, Successes, outcomes, read_rollouts
from daemonjob.controller.results.store import ResultStore
from daemonjob.domain.results.noderesult import rollout_key
from daemonjob.domain.results.reports import append_patch, pack, report_body, result_size
from daemonjob.domain.spec.validate import read_spec
from daemonjob.machinery.client.kube import ApiError

__all__ = ["ReportWrites"]

log = structlog.get_logger("daemonjob.results")
Obj = Mapping[str, Any]


class ReportWrites:
    """The writes; ResultRecorder sets these attributes."""

    store: ResultStore
    chunk_bytes: int
    writes: int
    told: Callable[[str, str, list[str] | None], None]
    _lock: threading.Lock

    def _load(self, kept: Kept, owner: str, group_by: str | None) -> None:
        """What is recorded already, from the DaemonJob's report objects (one paged list),
        its outcomes counted by `group_by`."""
        with self._lock:
            successes = Successes() if kept.track else None
        reports = self.store.list_reports(kept.namespace, kept.name)
        rollouts = read_rollouts(reports, owner.rpartition("/")[2], group_by, successes)
        with self._lock:
            kept.rollouts, kept.successes = rollouts, successes
            kept.loaded, kept.regroup, kept.group_by = True, False, group_by
        if successes is not None:
            self.told(owner.rpartition("/")[2], f"{kept.namespace}/{kept.name}", None)

    def _write(self, kept: Kept, dj: Obj, key: str, results: list[dict[str, Any]]) -> int:
        """Append to the rollout's last chunk while it has room, then new chunks."""
        dj_uid = (dj.get("metadata") or {}).get("uid") or ""
        with self._lock:
            rollout = kept.rollouts.get(key)
            if rollout is None:
                rollout = Rollout(
                    key, results[0].get("revision") or "", results[0].get("run"), "", outcomes=outcomes(kept.group_by)
                )
        last = max(rollout.chunks, default=-1)
        last_size = rollout.chunks[last].size if last >= 0 else 0
        written = 0
        for index, part in pack(results, last, last_size, self.chunk_bytes):
            chunk = rollout.chunks.get(index)
            ns = kept.namespace
            if chunk is None:
                body = report_body(dj, rollout.revision, rollout.run, key, index, part)
                try:
                    made = self.store.create_report(ns, body)
                except ApiError as exc:
                    if exc.already_exists:  # a create that went through, or another writer's: read again
                        self._forget_loaded(kept)
                    raise
                if not rollout.order:
                    rollout.order = (made.get("metadata") or {}).get("creationTimestamp") or "~"
                chunk = rollout.chunks[index] = Chunk(body["metadata"]["name"], 0, 0)
            else:
                try:
                    self.store.append(ns, chunk.name, append_patch(chunk.count, part))
                except ApiError as exc:
                    if exc.status in (404, 409, 422):  # the chunk is not what was read: read again
                        self._forget_loaded(kept)
                    raise
            self.writes += 1
            with self._lock:
                chunk.count += len(part)
                chunk.size += sum(result_size(r) for r in part)
                successes, nodes = kept.successes, []
                for r in part:
                    rollout.recorded[r.get("jobUID") or ""] = None
                    rollout.outcomes.add(r)
                    if successes is not None and (node := successes.add(r)) is not None:
                        nodes.append(node)
                rollout.status = None
                kept.rollouts[key] = rollout
            if nodes:
                self.told(dj_uid, f"{kept.namespace}/{kept.name}", nodes)
            written += len(part)
        return written

    def _forget_loaded(self, kept: Kept) -> None:
        """What was read of the reports is stale: read them again before the next write."""
        with self._lock:
            kept.loaded = False

    def _prune(self, kept: Kept, dj: Obj) -> None:
        """Keep the newest max(historyLimit, 1) + 1 rollouts, and always the current one."""
        status = dj.get("status") or {}
        current = rollout_key(status.get("currentRevision"), status.get("currentRun"))
        limit = max(read_spec(dj).settings.history_limit, 1)
        with self._lock:
            ordered = sorted(kept.rollouts.values(), key=lambda r: r.order, reverse=True)
            gone = [r for r in ordered[limit + 1 :] if r.key != current]
            for r in gone:
                kept.rollouts.pop(r.key, None)
                kept.pruned.add(r.key)
        for r in gone:
            for chunk in r.chunks.values():
                try:
                    self.store.delete_report(kept.namespace, chunk.name)
                except ApiError as exc:
                    if not exc.not_found:
                        log.warning("report delete failed", report=chunk.name, error=exc.message[:300])
            log.info("results of an old rollout deleted", daemonjob=kept.name, rollout=r.key)
