"""Scheduled runs through the controller without a cluster: fake informers, a fake JobControl,
a fake clock (its wall time is what the schedule reads) and fake ConfigMap informers."""

from __future__ import annotations

import threading
import time
from datetime import timedelta
from typing import Any

import pytest

from daemonjob.controller.metrics.metrics import Metrics
from daemonjob.controller.passes.history import HistoryCleaner
from daemonjob.controller.wiring.controller import Controller
from daemonjob.domain.jobs.changes import DeleteJob
from daemonjob.domain.jobs.contract import job_node
from daemonjob.domain.rollout.plan import HISTORY
from daemonjob.domain.schedule.runids import tick_run_id
from daemonjob.domain.schedule.runs import ANNOTATION_RUN_NOW, SKIP_FORBID
from daemonjob.domain.shared.apinames import LABEL_RUN
from daemonjob.domain.shared.timestamps import format_time
from daemonjob.machinery.process.clock import FAKE_WALL_START
from daemonjob.testing.doubles import builders
from daemonjob.testing.doubles.actbed import ActBed
from daemonjob.testing.doubles.fakes import FakeJobControl, api_error

NS = "ops"
NAME = "nightly"
KEY = f"{NS}/{NAME}"
TICK1 = FAKE_WALL_START  # "*/5 * * * *": the fake clock starts on a tick
TICK2 = TICK1 + timedelta(minutes=5)
SCRIPT = "script"


def make_dj(**spec: Any) -> dict[str, Any]:
    """Every five minutes, created a minute before the fake clock's first tick."""
    return builders.daemonjob(
        NAME,
        resource_version="1",
        created=format_time(TICK1 - timedelta(minutes=1)),
        **{"schedule": "*/5 * * * *", **spec},
    )


@pytest.fixture
def bed(bed: ActBed) -> ActBed:
    """Three nodes, n0 to n2."""
    for i in range(3):
        bed.nodes.add(builders.node(f"n{i}"))
    return bed


def drain(ctl: Controller) -> None:
    """Take every key that is ready now, so the next one out of the queue is a delayed one."""
    while len(ctl.queue):
        key, _ = ctl.queue.get()
        ctl.queue.done(key)


def next_key(ctl: Controller, timeout: float = 5.0) -> Any:
    got: list[Any] = []
    thread = threading.Thread(target=lambda: got.append(ctl.queue.get()[0]), daemon=True)
    thread.start()
    thread.join(timeout)
    assert got, "no key came out of the queue"
    ctl.queue.done(got[0])
    return got[0]


def test_a_tick_starts_a_run_on_every_node_counted_once(bed: ActBed) -> None:
    bed.add_dj(make_dj())
    bed.ctl.reconcile(KEY)
    run = tick_run_id(TICK1)
    created = bed.created()
    assert sorted(job_node(j) for j in created) == ["n0", "n1", "n2"]
    assert {j["metadata"]["labels"][LABEL_RUN] for j in created} == {run}
    assert len({j["metadata"]["name"] for j in created}) == 3
    (status,) = [c.body for c in bed.control.of("status")]
    assert status["currentRun"] == run and status["lastScheduleTime"] == format_time(TICK1)
    assert bed.counter("daemonjob_runs_started_total") == 1
    assert any(run in m for m in bed.events("RunStarted"))

    # The Jobs reach the cache before the status does: the next pass decides the same start
    # again, and the API server refuses its status patch (stale resourceVersion).
    bed.control.deliver()
    bed.control.errors[("status", NAME)] = api_error(409, message="the object has been modified")
    with pytest.raises(Exception, match="modified"):
        bed.ctl.reconcile(KEY)
    assert len(bed.created()) == 3  # the same names: nothing new was created
    assert bed.counter("daemonjob_runs_started_total") == 1
    del bed.control.errors[("status", NAME)]
    bed.sync()
    bed.ctl.reconcile(KEY)
    assert bed.counter("daemonjob_runs_started_total") == 1

    bed.finish_jobs()
    bed.clock.step(30)
    bed.ctl.reconcile(KEY)
    bed.sync()
    assert bed.counter("daemonjob_runs_finished_total", result="succeeded") == 1
    assert bed.dj()["status"]["lastSuccessfulTime"] == format_time(TICK1 + timedelta(seconds=30))
    assert (
        bed.ctl.metrics.registry.get_sample_value(
            "daemonjob_last_successful_time_seconds", {"namespace": NS, "name": NAME}
        )
        == (TICK1 + timedelta(seconds=30)).timestamp()
    )
    bed.ctl.reconcile(KEY)
    assert bed.counter("daemonjob_runs_finished_total", result="succeeded") == 1

    bed.clock.step((TICK2 - bed.clock.wall()).total_seconds())
    bed.ctl.reconcile(KEY)
    second = bed.created()[3:]
    assert {j["metadata"]["labels"][LABEL_RUN] for j in second} == {tick_run_id(TICK2)}
    assert len(second) == 3 and not {j["metadata"]["name"] for j in second} & {j["metadata"]["name"] for j in created}
    assert bed.counter("daemonjob_runs_started_total") == 2


def test_the_daemonjob_is_requeued_for_its_next_tick(bed: ActBed) -> None:
    bed.clock.step(60)  # a minute after the first tick, which runs
    bed.add_dj(make_dj())
    drain(bed.ctl)
    bed.ctl.reconcile(KEY)
    assert (
        bed.ctl.metrics.registry.get_sample_value(
            "daemonjob_next_schedule_time_seconds", {"namespace": NS, "name": NAME}
        )
        == TICK2.timestamp()
    )
    drain(bed.ctl)
    until = (TICK2 - bed.clock.wall()).total_seconds()
    bed.ctl.queue.add_after("probe", until - 0.5)  # due just before the tick: comes out first
    bed.clock.step(until - 0.5)
    assert next_key(bed.ctl) == "probe"
    bed.clock.step(1)
    assert next_key(bed.ctl) == KEY


def test_forbid_skips_a_tick_while_the_run_is_active(bed: ActBed) -> None:
    bed.add_dj(make_dj())
    bed.ctl.reconcile(KEY)
    bed.sync()
    bed.clock.step(300)
    bed.ctl.reconcile(KEY)
    assert len(bed.created()) == 3
    assert bed.counter("daemonjob_runs_skipped_total", reason=SKIP_FORBID) == 1
    assert bed.events(SKIP_FORBID)
    bed.sync()
    assert bed.dj()["status"]["lastSkipReason"] == SKIP_FORBID
    bed.ctl.reconcile(KEY)
    assert bed.counter("daemonjob_runs_skipped_total", reason=SKIP_FORBID) == 1


def test_replace_deletes_the_old_runs_jobs_and_starts_the_new_run_within_max_parallel(bed: ActBed) -> None:
    bed.add_dj(make_dj(concurrencyPolicy="Replace", maxParallel=2))
    bed.ctl.reconcile(KEY)
    bed.sync()
    first = {job_node(j): j["metadata"]["name"] for j in bed.created()}
    assert sorted(first) == ["n0", "n1"]
    bed.clock.step(300)
    bed.ctl.reconcile(KEY)
    assert sorted(c.name for c in bed.control.of("delete")) == sorted(first.values())
    assert len(bed.created()) == 2  # nothing new while the replaced Jobs are still there
    bed.sync()  # the deletes reach the cache: the Jobs are gone
    bed.ctl.reconcile(KEY)
    second = bed.created()[2:]
    assert sorted(job_node(j) for j in second) == ["n0", "n1"]
    assert {j["metadata"]["labels"][LABEL_RUN] for j in second} == {tick_run_id(TICK2)}
    assert bed.counter("daemonjob_runs_started_total") == 2


def test_the_run_now_annotation_enqueues_and_starts_exactly_one_run(bed: ActBed) -> None:
    bed.add_dj(make_dj(schedule=None))
    bed.ctl.reconcile(KEY)
    bed.sync()
    bed.finish_jobs()
    bed.ctl.reconcile(KEY)
    bed.sync()
    drain(bed.ctl)
    dj = bed.dj()
    dj["metadata"]["annotations"] = {ANNOTATION_RUN_NOW: "2024-01-01"}
    dj["metadata"]["resourceVersion"] = "99"
    bed.djs.update(dj)  # the generation stays: only the annotation changed
    assert next_key(bed.ctl) == KEY
    bed.ctl.reconcile(KEY)
    runs = {j["metadata"]["labels"].get(LABEL_RUN) for j in bed.created()[3:]}
    assert len(bed.created()) == 6 and len(runs) == 1 and runs != {None}
    bed.sync()
    bed.ctl.reconcile(KEY)
    bed.clock.step(1)
    bed.ctl.reconcile(KEY)
    assert len(bed.created()) == 6
    assert bed.counter("daemonjob_runs_started_total") == 1


def script_dj(**spec: Any) -> dict[str, Any]:
    """Unscheduled, its container's environment read from the ConfigMap `SCRIPT`, re-run when it changes."""
    template = builders.job_template(container={"envFrom": [{"configMapRef": {"name": SCRIPT}}]})
    return make_dj(schedule=None, rerunOnConfigChange=True, template=template, **spec)


def test_a_missing_configmap_is_named_and_its_creation_starts_the_nodes(bed: ActBed) -> None:
    bed.add_dj(script_dj())
    bed.ctl.reconcile(KEY)
    assert list(bed.configmaps.made) == [(NS, SCRIPT)]
    assert bed.created() == []
    status = bed.control.of("status")[-1].body
    stalled = next(c for c in status["conditions"] if c["type"] == "Stalled")
    assert stalled["status"] == "True" and stalled["reason"] == "ConfigMapMissing" and SCRIPT in stalled["message"]
    bed.sync()
    drain(bed.ctl)
    bed.configmaps.made[(NS, SCRIPT)].add({"metadata": {"name": SCRIPT, "namespace": NS}, "data": {"a": "1"}})
    assert next_key(bed.ctl) == KEY  # the ConfigMap's watch wakes the DaemonJob
    bed.ctl.reconcile(KEY)
    assert bed.created() == []  # the new revision is recorded before its first Job
    bed.sync()
    assert next_key(bed.ctl) == KEY  # the recorded revision wakes it
    bed.ctl.reconcile(KEY)
    assert len(bed.created()) == 3


def test_editing_a_referenced_configmap_reruns_every_node(bed: ActBed) -> None:
    bed.add_dj(script_dj())
    bed.ctl.reconcile(KEY)  # starts the ConfigMap's watch
    informer = bed.configmaps.made[(NS, SCRIPT)]
    informer.add({"metadata": {"name": SCRIPT, "namespace": NS}, "data": {"a": "1"}})
    bed.sync()
    bed.ctl.reconcile(KEY)  # records the revision that covers the ConfigMap
    bed.sync()
    bed.ctl.reconcile(KEY)
    bed.sync()
    assert len(bed.created()) == 3
    bed.finish_jobs()
    bed.ctl.reconcile(KEY)
    bed.sync()
    revision = bed.dj()["status"]["currentRevision"]
    informer.update({"metadata": {"name": SCRIPT, "namespace": NS, "labels": {"x": "y"}}, "data": {"a": "1"}})
    bed.ctl.reconcile(KEY)
    assert len(bed.created()) == 3  # labels are not content
    informer.update({"metadata": {"name": SCRIPT, "namespace": NS}, "data": {"a": "2"}})
    bed.ctl.reconcile(KEY)
    assert len(bed.created()) == 3  # the new revision is recorded before its first Job
    bed.sync()
    bed.ctl.reconcile(KEY)
    assert len(bed.created()) == 6
    assert bed.control.of("status")[-1].body["currentRevision"] != revision


def test_a_configmap_that_cannot_be_listed_stalls_naming_it_and_nothing_polls(bed: ActBed) -> None:
    bed.configmaps.unlisted = True
    bed.add_dj(script_dj())
    drain(bed.ctl)
    bed.ctl.reconcile(KEY)  # starts the watch; it has not listed yet: nothing to say, no requeue
    assert bed.control.of("status") == [] and len(bed.ctl.queue) == 0
    informer = bed.configmaps.made[(NS, SCRIPT)]
    forbidden = 'configmaps "script" is forbidden: User "daemonjob" cannot list resource "configmaps"'
    informer.fail_list(forbidden)
    assert next_key(bed.ctl) == KEY  # the failed list wakes the DaemonJob once
    bed.ctl.reconcile(KEY)
    status = bed.control.of("status")[-1].body
    stalled = next(c for c in status["conditions"] if c["type"] == "Stalled")
    assert (stalled["status"], stalled["reason"]) == ("True", "ConfigMapUnreadable")
    assert SCRIPT in stalled["message"] and "forbidden" in stalled["message"]
    assert len(bed.events("ConfigMapUnreadable")) == 1 and bed.created() == []
    bed.clock.step(60)  # the watch backs off by itself: nothing is queued for later either
    bed.settle()  # anything due is handed over to the queue
    assert len(bed.ctl.queue) == 0
    informer.list_succeeds()
    informer.add({"metadata": {"name": SCRIPT, "namespace": NS}, "data": {"a": "1"}})
    assert next_key(bed.ctl) == KEY
    bed.ctl.reconcile(KEY)
    bed.sync()
    bed.ctl.reconcile(KEY)
    assert len(bed.created()) == 3


def test_turning_rerun_on_config_change_off_or_deleting_stops_the_watches(bed: ActBed) -> None:
    bed.add_dj(script_dj())
    bed.ctl.reconcile(KEY)
    assert bed.ctl.configmaps is not None and bed.ctl.configmaps.watched() == 1
    dj = bed.dj()
    dj["spec"]["rerunOnConfigChange"] = False
    dj["metadata"]["generation"] = 2
    bed.djs.update(dj)
    bed.ctl.reconcile(KEY)
    assert bed.ctl.configmaps.watched() == 0
    dj["spec"]["rerunOnConfigChange"] = True
    dj["metadata"]["generation"] = 3
    bed.djs.update(dj)
    bed.ctl.reconcile(KEY)
    assert bed.ctl.configmaps.watched() == 1
    bed.djs.delete(KEY)
    assert bed.ctl.configmaps.watched() == 0


def test_the_next_tick_gauge_goes_away_while_suspended(bed: ActBed) -> None:
    bed.add_dj(make_dj())
    bed.ctl.reconcile(KEY)
    bed.sync()
    labels = {"namespace": NS, "name": NAME}
    assert (
        bed.ctl.metrics.registry.get_sample_value("daemonjob_next_schedule_time_seconds", labels) == TICK2.timestamp()
    )
    dj = bed.dj()
    dj["spec"]["suspend"] = True
    dj["metadata"]["generation"] = 2
    bed.djs.update(dj)
    bed.control.deliver()
    bed.ctl.reconcile(KEY)
    assert bed.ctl.metrics.registry.get_sample_value("daemonjob_next_schedule_time_seconds", labels) is None


def test_history_cleanup_comes_after_the_new_runs_creates_and_is_not_waited_for(bed: ActBed) -> None:
    bed.add_dj(make_dj(schedule=None, historyLimit=1))

    def run_now(value: str) -> None:
        dj = bed.dj()
        dj["metadata"]["annotations"] = {ANNOTATION_RUN_NOW: value}
        dj["metadata"]["resourceVersion"] = str(int(dj["metadata"]["resourceVersion"]) + 100)
        bed.djs.update(dj)
        bed.ctl.reconcile(KEY)
        bed.sync()
        bed.finish_jobs()
        bed.ctl.reconcile(KEY)
        bed.sync()

    bed.ctl.reconcile(KEY)
    bed.sync()
    bed.finish_jobs()
    bed.ctl.reconcile(KEY)
    bed.sync()
    run_now("first")  # keeps the first Jobs as history (historyLimit 1)
    before = len(bed.control.calls)
    run_now("second")  # the first Jobs are now beyond the limit
    calls = bed.control.calls[before:]
    deadline = time.monotonic() + 5
    while len([c for c in bed.control.calls[before:] if c.verb == "delete"]) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)  # the cleaner's own thread
    calls = bed.control.calls[before:]
    verbs = [c.verb for c in calls if c.verb in ("create", "delete")]
    assert verbs[:3] == ["create"] * 3 and verbs[3:] == ["delete"] * 3  # the run's creates went first
    assert {c.body for c in calls if c.verb == "delete"} == {"Background"}
    assert bed.ctl.expectations.satisfied("dj-uid")  # nothing waits on history deletes
    assert bed.events("SuccessfulDelete")


def test_history_deletes_wait_while_any_pass_is_creating_jobs() -> None:
    control = FakeJobControl()
    for i in range(3):
        control.objects[f"ns/old-{i}"] = {"metadata": {"name": f"old-{i}", "namespace": "ns"}}
    cleaner = HistoryCleaner(control, Metrics(), qps=1000, burst=1000)
    history = [DeleteJob(f"old-{i}", f"node-{i}", HISTORY, f"uid-{i}") for i in range(3)]

    def deleted() -> int:
        return len([c for c in control.calls if c.verb == "delete"])

    try:
        with cleaner.creates_first():
            with cleaner.creates_first():  # two passes creating at once
                assert cleaner.submit("ns", history) == history
                time.sleep(0.2)
            time.sleep(0.2)
            assert deleted() == 0  # held while either pass creates
        deadline = time.monotonic() + 5
        while deleted() < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert [c.name for c in control.calls] == ["old-0", "old-1", "old-2"]
        assert cleaner.submit("ns", history) == []  # queued once
    finally:
        cleaner.stop()
