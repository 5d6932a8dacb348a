"""History cleanup waits for results to be recorded, but not for ever: a finished Job beyond
historyLimit whose result cannot be written (the DaemonJobReport CRD missing) is deleted
HISTORY_RESULT_WAIT after its first delete was held, counted in a metric, and its DaemonJob is
woken for that moment (no resync needed)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from daemonjob import defaults
from daemonjob.controller.metrics.metrics import Metrics
from daemonjob.controller.passes.history import HistoryCleaner
from daemonjob.domain.jobs.changes import DeleteJob
from daemonjob.domain.rollout.plan import HISTORY
from daemonjob.domain.schedule.runs import ANNOTATION_RUN_NOW
from daemonjob.machinery.client.apierror import ApiError
from daemonjob.machinery.process.clock import FakeClock
from daemonjob.testing.doubles.actbed import ActBed
from daemonjob.testing.doubles.builders import daemonjob
from daemonjob.testing.doubles.fakes import FakeJobControl

UNRECORDED = "daemonjob_jobs_deleted_unrecorded_total"
WAIT = defaults.HISTORY_RESULT_WAIT


def deletes(control: FakeJobControl, count: int) -> list[str]:
    """The names deleted, once `count` are (the cleaner's own thread sends them)."""
    deadline = time.monotonic() + 5
    while len(names := [c.name for c in control.calls if c.verb == "delete"]) < count:
        assert time.monotonic() < deadline, f"{len(names)} deletes of {count}"
        time.sleep(0.01)
    return names


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def holding(*names: str) -> FakeJobControl:
    control = FakeJobControl()
    for name in names:
        control.objects[f"ops/{name}"] = {"metadata": {"name": name, "namespace": "ops"}}
    return control


def test_a_held_job_goes_unrecorded_after_the_wait_and_is_counted(clock: FakeClock) -> None:
    control, metrics = holding("old-a", "old-b"), Metrics()
    recorded: set[str] = set()
    woken: list[tuple[str, float]] = []
    cleaner = HistoryCleaner(
        control,
        metrics,
        clock=clock,
        qps=1000,
        burst=1000,
        hold=lambda uid: uid not in recorded,
        wake_after=lambda key, seconds: woken.append((key, seconds)),
    )
    old, kept = DeleteJob("old-a", "a", HISTORY, "uid-a"), DeleteJob("old-b", "b", HISTORY, "uid-b")
    try:
        assert cleaner.submit("ops", [old, kept], "ops/audit") == []  # neither is recorded
        assert woken == [("ops/audit", WAIT)]  # its pass comes when the wait ends
        clock.step(WAIT - 1)
        assert cleaner.submit("ops", [old, kept], "ops/audit") == []
        assert woken[-1] == ("ops/audit", pytest.approx(1.0))  # counted from the first hold, not this pass
        recorded.add("uid-b")  # b's result is written meanwhile: it goes as any history does
        clock.step(1)
        assert cleaner.submit("ops", [old, kept], "ops/audit") == [old, kept]
        assert len(woken) == 2  # nothing held any more: nothing to wake for
        assert sorted(deletes(control, 2)) == ["old-a", "old-b"]
        assert metrics.registry.get_sample_value(UNRECORDED) == 1  # a only
        assert metrics.registry.get_sample_value("daemonjob_jobs_deleted_total", {"reason": HISTORY}) == 2
    finally:
        cleaner.stop()


def test_a_job_let_go_whose_delete_fails_goes_at_the_next_pass_not_after_another_wait(clock: FakeClock) -> None:
    control, metrics = holding("old-a"), Metrics()
    control.errors[("delete", "old-a")] = ApiError(500, "InternalError", "etcd")
    cleaner = HistoryCleaner(control, metrics, clock=clock, qps=1000, burst=1000, hold=lambda _uid: True)
    old = DeleteJob("old-a", "a", HISTORY, "uid-a")
    try:
        assert cleaner.submit("ops", [old]) == []
        clock.step(WAIT)
        assert cleaner.submit("ops", [old]) == [old]
        deletes(control, 1)
        del control.errors[("delete", "old-a")]
        deadline = time.monotonic() + 5
        while cleaner.submit("ops", [old]) != [old]:  # queued again once the failure is known
            assert time.monotonic() < deadline
            time.sleep(0.01)
        deletes(control, 2)
        assert metrics.registry.get_sample_value(UNRECORDED) == 1
    finally:
        cleaner.stop()


class MissingReports:
    """A result store whose DaemonJobReport resource is not served: every call answers 404."""

    def may_write(self) -> bool:
        return True

    def _missing(self, *_args: object) -> None:
        raise ApiError(404, "NotFound", "404 page not found")

    list_reports = list_pods = create_report = append = delete_report = _missing  # type: ignore[assignment]


@pytest.fixture
def bed() -> Iterator[ActBed]:
    bed = ActBed.start(result_store=MissingReports())  # --history-result-wait as by default
    yield bed
    bed.stop()


def test_without_the_reports_crd_history_stays_within_its_limit_after_the_wait(bed: ActBed) -> None:
    bed.add_nodes(2)
    bed.add_dj(daemonjob(historyLimit=0))

    def run(value: str | None) -> None:
        if value is not None:
            dj = bed.dj()
            dj["metadata"]["annotations"] = {ANNOTATION_RUN_NOW: value}
            dj["metadata"]["resourceVersion"] = str(int(dj["metadata"]["resourceVersion"]) + 100)
            bed.djs.update(dj)
        bed.ctl.reconcile(bed.key)
        bed.sync()
        bed.finish_jobs()
        bed.ctl.reconcile(bed.key)
        bed.sync()

    run(None)
    run("again")  # the first Jobs are beyond historyLimit 0, their results not recorded
    assert [c for c in bed.control.calls if c.verb == "delete"] == []
    assert bed.ready_within(defaults.JOB_EVENT_DELAY)  # the finished Jobs' pass: it holds them again
    bed.drain()
    bed.ctl.reconcile(bed.key)
    bed.drain()
    assert not bed.ready_within(WAIT - 2 * defaults.JOB_EVENT_DELAY)
    assert bed.ready_within(defaults.JOB_EVENT_DELAY)  # woken when the wait ends: no resync (the bed has none)
    bed.drain()
    bed.ctl.reconcile(bed.key)
    assert len(deletes(bed.control, 2)) == 2
    assert bed.ctl.metrics.registry.get_sample_value(UNRECORDED) == 2
