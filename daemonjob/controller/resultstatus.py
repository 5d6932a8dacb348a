"""The result recorder in a controller: its wiring, and status.results in a pass's status."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from daemonjob.controller.informers import RUNNING_INDEX, Informers
from daemonjob.controller.observe import Observation
from daemonjob.controller.results import ResultRecorder
from daemonjob.controller.resultstore import ResultStore
from daemonjob.domain.decide import Decision
from daemonjob.machinery.clock import Clock

__all__ = ["recorder_for", "with_results"]


def recorder_for(
    store: ResultStore | None, informers: Informers, wake: Callable[[str], None], clock: Clock, chunk_bytes: int
) -> ResultRecorder | None:
    """A recorder told of every Job event (registered before the informers start); None without a store."""
    if store is None:
        return None
    jobs = informers.jobs
    recorder = ResultRecorder(
        store,
        informers.daemonjobs.store.get,
        lambda uid: bool(jobs.store.by_index(RUNNING_INDEX, uid)),
        wake,
        clock=clock,
        chunk_bytes=chunk_bytes,
    )
    jobs.add_handlers(recorder.handlers())
    return recorder


def with_results(recorder: ResultRecorder | None, observed: Observation, decision: Decision) -> Decision:
    """The decision's status with status.results of its rollout; the one written before is
    kept while the DaemonJob's reports are not read yet (the status is written whole)."""
    if recorder is None:
        return decision
    status = decision.status
    group_by = decision.reading.checked.spec.results_group_by if decision.reading is not None else None
    results = recorder.summary(observed.uid, status.get("currentRevision"), status.get("currentRun"), group_by)
    if results is None:
        results = (observed.cached.get("status") or {}).get("results")
    if results is None:
        return decision
    return replace(decision, status={**status, "results": results})
