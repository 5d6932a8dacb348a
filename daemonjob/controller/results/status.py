"""The result recorder in a controller: its wiring, and status.results in a pass's status."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import datetime, timezone
from typing import Any

from daemonjob import defaults
from daemonjob.controller.order.reader import OrderReader
from daemonjob.controller.passes.observe import Observation, Observer
from daemonjob.controller.passes.report import Reporter, write_status
from daemonjob.controller.results.recorder import ResultRecorder
from daemonjob.controller.results.store import ResultStore
from daemonjob.controller.runtime.informers import RUNNING_INDEX, Informers
from daemonjob.controller.runtime.keptplans import KeptPlans
from daemonjob.controller.runtime.specs import SpecCache
from daemonjob.domain.decision.decide import Decision
from daemonjob.domain.jobs.contract import job_node
from daemonjob.domain.jobs.owners import owner_id, owner_uid
from daemonjob.domain.results.unreadable import (
    ResultsUnread,
    with_recorded_condition,
    with_results_unread,
    with_unread_conditions,
)
from daemonjob.domain.rollout.plan import JobView
from daemonjob.domain.shared.timestamps import format_time
from daemonjob.machinery.cache.frozen import thaw
from daemonjob.machinery.process.clock import Clock
from daemonjob.machinery.queue.workqueue import DelayingQueue

__all__ = ["recorded_for", "recorder_for", "report_unread", "wire_recorded", "with_results"]


def recorder_for(
    store: ResultStore | None,
    informers: Informers,
    queue: DelayingQueue,
    clock: Clock,
    chunk_bytes: int,
    foreign: Callable[[Mapping[str, Any]], bool] = lambda _job: False,
) -> ResultRecorder | None:
    """A recorder told of every Job event (registered before the informers start); None without a store.

    A written batch wakes its DaemonJob for status.results (and the history deletes it held)
    within RESULT_WAKE_DELAY, by the pass already queued or coming in that time if there is
    one: while its Jobs finish, their events bring passes anyway, and a pass more per batch
    over a DaemonJob of hundreds of nodes cost more than the batch."""
    if store is None:
        return None
    jobs = informers.jobs
    recorder = ResultRecorder(
        store,
        informers.daemonjobs.store.get,
        lambda owner: jobs.store.count_index(RUNNING_INDEX, owner) > 0,
        queue.add,
        wake_soon=lambda key: queue.add_soon(key, defaults.RESULT_WAKE_DELAY),
        clock=clock,
        chunk_bytes=chunk_bytes,
        urgent=lambda: queue.urgent_within(defaults.RESULT_YIELD_QUIET),
        foreign=foreign,
    )
    jobs.add_handlers(recorder.handlers())
    return recorder


def recorded_for(
    recorder: ResultRecorder | None, observed: Observation, specs: SpecCache, reporter: Reporter | None = None
) -> tuple[bool, Mapping[str, JobView] | None]:
    """Whether a pass may decide, and each node's newest recorded success for it to read.

    With spec.results.deleteSucceededJobs a node's record may be all there is of its run: no
    decision before the reports are read (their read wakes the DaemonJob), or a node whose
    Job is gone would run again. While they cannot be read (the recorder retries, and wakes
    the DaemonJob when that changes) the status says why, through `reporter`. Without a
    recorder nothing is recorded, so nothing is let go."""
    if recorder is None or not specs.get(observed.key, observed.cached).spec.delete_succeeded_jobs:
        return True, None
    owner = owner_id(observed.namespace, observed.uid)
    recorded = recorder.successes(owner, observed.namespace, observed.name)
    why = recorder.unread(owner) if recorded is None else None
    if why is not None and reporter is not None:
        report_unread(reporter, observed, why)
    elif recorded is None:
        observed.log.debug("waiting for the recorded results to be read")
    return recorded is not None, recorded


def report_unread(reporter: Reporter, observed: Observation, why: ResultsUnread) -> None:
    """The status as last written with Reconciling (and Stalled) saying the reports cannot be
    read, and the Warning Event once; nothing else is decided or written."""
    old = thaw(observed.cached.get("status") or {})
    now = format_time(reporter.clock.wall())
    status, events = with_unread_conditions(old, why, now, observed.dj["metadata"].get("generation"))
    if write_status(reporter.control, observed.dj, old, status):
        observed.log.info("results unreadable: status updated", error=why.error[:300])
    reporter.post(observed, events)


def wire_recorded(
    recorder: ResultRecorder | None,
    plans: KeptPlans,
    observer: Observer,
    specs: SpecCache,
    order: OrderReader,
    wake_readers: Callable[[str], None],
) -> None:
    """Recorded successes told to the kept plans, read by the self-check's full plan and by
    the DaemonJobs that come after one (`order`); once a DaemonJob's are read, `wake_readers`
    wakes those (a pass of theirs may have read them before)."""
    if recorder is None:
        return

    def told(uid: str, key: str, nodes: list[str] | None) -> None:
        plans.recorded_changed(uid, nodes)
        if nodes is None:
            wake_readers(key)

    def done(dep: Mapping[str, Any], revision: str | None, run: str | None) -> frozenset[str]:
        meta = dep.get("metadata") or {}
        if not revision or not order.order_index.spec_of(dep).delete_succeeded_jobs:
            return frozenset()
        ns = meta.get("namespace") or ""
        kept = recorder.successes(owner_id(ns, meta.get("uid") or ""), ns, meta.get("name") or "")
        views = list(kept.values()) if kept is not None else ()
        return frozenset(v.node for v in views if v.node and v.revision == revision and v.run == run)

    recorder.told = told
    observer.recorded = lambda o: recorded_for(recorder, o, specs)[1]
    order.recorded = done


def recorded_success(recorder: ResultRecorder | None) -> Callable[[Mapping[str, Any]], bool]:
    """Whether a deleted Job is its node's newest recorded success (router.py: its delete is
    the let-go of spec.results.deleteSucceededJobs, not a lost attempt)."""

    def check(job: Mapping[str, Any]) -> bool:
        meta = job.get("metadata") or {}
        node, uid = job_node(job), meta.get("uid")
        if recorder is None or not node or not uid:
            return False
        return recorder.stands_for(owner_id(meta.get("namespace") or "", owner_uid(job)), node, uid)

    return check


def with_results(
    recorder: ResultRecorder | None, observed: Observation, decision: Decision, now: datetime | None = None
) -> Decision:
    """The decision's status with status.results of its rollout; the one written before is
    kept while the DaemonJob's reports are not read yet (the status is written whole). While
    they cannot be written, status.results and ResultsRecorded=False (at `now`) say why."""
    if recorder is None:
        return decision
    status = decision.status
    group_by = decision.reading.checked.spec.results_group_by if decision.reading is not None else None
    results = recorder.summary(
        owner_id(observed.namespace, observed.uid), status.get("currentRevision"), status.get("currentRun"), group_by
    )
    if results is None:
        results = thaw((observed.cached.get("status") or {}).get("results"))  # as old is: equal when unchanged
    events = decision.events
    why = recorder.unread(owner_id(observed.namespace, observed.uid))
    if why is not None:  # cannot be recorded now: the rollout goes on, status.results says why
        results, said = with_results_unread(results, why)
        events = [*events, *said]
        previous = observed.cached.get("status") or {}
        when = format_time(now or datetime.now(timezone.utc))
        status = with_recorded_condition(status, previous, why, when, observed.dj["metadata"].get("generation"))
    if results is None:
        return decision
    return replace(decision, status={**status, "results": results}, events=events)
