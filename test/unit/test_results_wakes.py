"""The result recorder's wakes: of its thread, which looks for writes due, and of the passes
that write status.results after a batch.

Job events come by the hundred per second while a look goes over every DaemonJob with results
waiting: a note that changes no deadline must not wake the thread. A batch written while a pass
is coming anyway (its Jobs' events bring one) must not make one more."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pytest

from daemonjob import defaults
from daemonjob.controller.results.recorder import ResultRecorder
from daemonjob.controller.runtime.informers import RUNNING_INDEX, running_index
from daemonjob.domain.jobs.owners import owner_id
from daemonjob.machinery.cache.store import Store
from daemonjob.machinery.process.clock import FakeClock
from daemonjob.testing.doubles.actbed import ActBed
from daemonjob.testing.doubles.builders import daemonjob, job
from daemonjob.testing.doubles.nodefakes import NullResultStore


class Store_(NullResultStore):
    """Report objects in memory; no pods (a result then says what its Job says)."""

    def __init__(self) -> None:
        self.results: list[Mapping[str, Any]] = []
        self.reports: dict[str, int] = {}

    def create_report(self, namespace: str, body: Mapping[str, Any]) -> Mapping[str, Any]:
        self.results.extend(body["results"])
        self.reports[body["metadata"]["name"]] = len(body["results"])
        return {**body, "metadata": {**body["metadata"], "creationTimestamp": "2026-01-01T00:00:00Z"}}

    def append(self, namespace: str, name: str, patch: Sequence[Mapping[str, Any]]) -> None:
        self.results.extend(op["value"] for op in patch[1:-1])


class Bed:
    """A started recorder on a fake clock whose looks for writes due are counted."""

    def __init__(self) -> None:
        self.clock = FakeClock()
        self.store = Store_()
        self.dj = daemonjob()
        self.running: set[str] = {owner_id("ops", self.dj["metadata"]["uid"])}
        self.woken: list[str] = []
        self.urgent = False  # urgent passes queued or running
        self.rec = ResultRecorder(
            self.store,
            lambda key: self.dj,
            lambda uid: uid in self.running,
            self.woken.append,
            clock=self.clock,
            urgent=lambda: self.urgent,
        )
        self.looks = 0
        due = self.rec._due

        def counted(now: float) -> tuple[list[str], float | None]:
            self.looks += 1
            return due(now)

        self.rec._due = counted  # type: ignore[method-assign]
        self.rec.start()

    def finish(self, node: str) -> None:
        self.rec.job_seen(job(self.dj, node, "succeeded"))

    def parked(self) -> None:
        """Until the thread waits for a deadline (a timed wait on the fake clock)."""
        self.clock.block_until_waiters(1)

    def until(self, check: Callable[[], bool]) -> None:
        deadline = time.monotonic() + 5
        while not check():
            assert time.monotonic() < deadline, "not within 5 s"
            time.sleep(0.005)


@pytest.fixture
def bed() -> Any:
    b = Bed()
    yield b
    b.rec.stop()


def test_notes_that_move_no_deadline_do_not_wake_the_thread(bed: Bed) -> None:
    bed.finish("n000")
    bed.parked()
    looks = bed.looks
    for i in range(1, 100):
        bed.finish(f"n{i:03d}")
        time.sleep(0.001)  # room for a woken thread to look
    assert bed.looks == looks  # one look per note before: each over every DaemonJob waiting
    bed.clock.step(defaults.RESULT_FLUSH_DELAY)
    bed.until(lambda: bed.woken == ["ops/audit"])  # the wake follows the writes
    assert len(bed.store.results) == 100


def look_after(bed: Bed, seconds: float) -> None:
    """Move the clock on and wait for the thread's look, and for its wait after it."""
    looks = bed.looks
    bed.clock.step(seconds)
    bed.until(lambda: bed.looks > looks)
    bed.parked()


def test_writes_due_give_way_while_urgent_passes_wait_and_go_once_they_are_done(bed: Bed) -> None:
    bed.finish("a")
    bed.parked()
    bed.urgent = True
    look_after(bed, defaults.RESULT_FLUSH_DELAY)  # it found the write due, and waits to look again
    look_after(bed, defaults.RESULT_YIELD_RECHECK)
    assert bed.store.results == []
    bed.urgent = False
    bed.clock.step(defaults.RESULT_YIELD_RECHECK)
    bed.until(lambda: len(bed.store.results) == 1)


def test_notes_while_writes_give_way_do_not_wake_the_thread(bed: Bed) -> None:
    """While a burst of urgent passes runs, Job events keep coming; a look then finds every
    write due held back anyway, so none may bring one: it would only take the GIL and the
    queue's lock from the passes it gives way to."""
    bed.finish("a")
    bed.parked()
    bed.urgent = True
    look_after(bed, defaults.RESULT_FLUSH_DELAY)  # held back: it looks again in RESULT_YIELD_RECHECK
    looks = bed.looks
    for i in range(100):
        bed.finish(f"n{i:03d}")
        time.sleep(0.001)  # room for a woken thread to look
    assert bed.looks == looks
    look_after(bed, defaults.RESULT_YIELD_RECHECK)  # its next look, on time
    assert bed.looks == looks + 1 and bed.store.results == []
    bed.urgent = False
    bed.clock.step(defaults.RESULT_YIELD_RECHECK)
    bed.until(lambda: len(bed.store.results) == 101)


def test_writes_give_way_to_urgent_passes_for_a_bounded_time(bed: Bed, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(defaults, "RESULT_YIELD_MAX", 20 * defaults.RESULT_YIELD_RECHECK)  # fewer looks to wait out
    bed.finish("a")
    bed.parked()
    bed.urgent = True  # and they keep coming
    look_after(bed, defaults.RESULT_FLUSH_DELAY)
    for _ in range(round(defaults.RESULT_YIELD_MAX / defaults.RESULT_YIELD_RECHECK) - 1):
        look_after(bed, defaults.RESULT_YIELD_RECHECK)
        assert bed.store.results == []
    bed.clock.step(2 * defaults.RESULT_YIELD_RECHECK)  # past the bound, whatever the rounding
    bed.until(lambda: len(bed.store.results) == 1)


def test_the_last_running_job_finished_brings_the_write_sooner(bed: Bed) -> None:
    bed.finish("a")
    bed.parked()
    looks = bed.looks
    bed.running.clear()  # the informer's index, updated before the handlers run
    bed.finish("b")
    bed.until(lambda: bed.looks == looks + 1)
    bed.parked()
    bed.clock.step(defaults.RESULT_FLUSH_IDLE)
    bed.until(lambda: len(bed.store.results) == 2)


def test_a_running_job_deleted_brings_the_write_sooner(bed: Bed) -> None:
    bed.finish("a")
    bed.parked()
    looks = bed.looks
    bed.running.clear()
    bed.rec.job_deleted(job(bed.dj, "b", "active"))
    bed.until(lambda: bed.looks == looks + 1)
    bed.parked()
    bed.clock.step(defaults.RESULT_FLUSH_IDLE)
    bed.until(lambda: len(bed.store.results) == 1)


def test_a_full_batch_is_written_sooner(bed: Bed) -> None:
    bed.finish("n000")
    bed.parked()
    looks = bed.looks
    for i in range(1, defaults.RESULT_FLUSH_COUNT):
        bed.finish(f"n{i:03d}")
    bed.until(lambda: bed.looks == looks + 1)
    bed.parked()
    bed.clock.step(defaults.RESULT_FLUSH_IDLE)
    bed.until(lambda: len(bed.store.results) == defaults.RESULT_FLUSH_COUNT)


def test_notes_while_the_thread_looks_are_not_missed() -> None:
    """Notes race the thread's look: whatever arrives, every result is written by its deadline."""
    for _ in range(20):
        bed = Bed()

        def finish_all(b: Bed = bed) -> None:
            for i in range(50):
                b.finish(f"n{i}")

        def written(b: Bed = bed) -> bool:
            return len(b.store.results) == 50

        try:
            writer = threading.Thread(target=finish_all)
            writer.start()
            writer.join()
            bed.parked()
            bed.clock.step(defaults.RESULT_FLUSH_DELAY)
            bed.until(written)
        finally:
            bed.rec.stop()


def test_the_running_check_counts_without_reading_the_jobs() -> None:
    store = Store({RUNNING_INDEX: running_index})
    dj = daemonjob()
    store.add(job(dj, "a", "active"))
    store.add(job(dj, "b", "succeeded"))
    assert store.count_index(RUNNING_INDEX, owner_id("ops", dj["metadata"]["uid"])) == 1
    assert store.count_index(RUNNING_INDEX, "other") == 0


# -- the pass after a written batch --------------------------------------------------------
def rollout(bed: ActBed, store: Store_) -> str:
    """A DaemonJob over three nodes, its Jobs created and seen, then finished and noted."""
    bed.add_nodes(3)
    bed.add_dj(daemonjob())
    bed.ctl.reconcile(bed.key)
    bed.sync()
    bed.drain()
    bed.ctl.reconcile(bed.key)
    bed.sync()
    bed.clock.step(defaults.JOB_EVENT_DELAY_MAX)
    bed.settle()
    bed.drain()
    uid = owner_id("ops", str(bed.dj()["metadata"]["uid"]))
    first = next(iter(bed.control.objects.values()))  # one Job first: its batch reads the reports
    first["status"] = {"conditions": [{"type": "Complete", "status": "True"}], "completionTime": "2026-01-01T00:00:00Z"}
    bed.jobs.update(first)
    assert bed.ctl.results is not None and bed.ctl.results.flush(uid) == 1
    assert len(bed.ctl.queue) == 1  # read: woken at once (a pass may wait for the reports)
    passes_within(bed, 5)
    bed.finish_jobs()  # Job events: a pass in JOB_EVENT_DELAY, and two results waiting
    return uid


def passes_within(bed: ActBed, seconds: float) -> int:
    """The passes queued or coming due within `seconds` (each run: a pass's own look-again counts)."""
    count = 0
    for _ in range(int(seconds / 0.25)):
        bed.clock.step(0.25)
        time.sleep(0.02)
        bed.settle()
        while len(bed.ctl.queue):
            key, _ = bed.ctl.queue.get()
            bed.ctl.reconcile(str(key))
            bed.ctl.queue.done(key)
            count += 1
    return count


def test_a_batch_written_while_a_pass_is_coming_makes_no_pass_more() -> None:
    store = Store_()
    bed = ActBed.start(result_store=store)
    try:
        uid = rollout(bed, store)
        assert bed.ctl.results is not None and bed.ctl.results.flush(uid) == 2
        assert len(bed.ctl.queue) == 0  # before: queued at once, beside the Job events' pass
        assert passes_within(bed, 5) == 1
        assert bed.last_status()["results"]["recorded"] == 3
    finally:
        bed.stop()


def test_a_batch_written_with_no_pass_coming_brings_one() -> None:
    store = Store_()
    bed = ActBed.start(result_store=store)
    try:
        uid = rollout(bed, store)
        assert passes_within(bed, 5) == 1  # the Job events' pass, before the batch is written
        assert bed.ctl.results is not None and bed.ctl.results.flush(uid) == 2
        assert passes_within(bed, 5) == 1
        assert bed.last_status()["results"]["recorded"] == 3
    finally:
        bed.stop()
