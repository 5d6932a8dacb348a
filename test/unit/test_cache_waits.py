"""Expectations and re-runs: the controller never waits silently, never acts twice, and
never hands the Job controller a name a deleted Job had."""

from __future__ import annotations

from typing import Any

import pytest

from daemonjob import defaults
from daemonjob.controller.runtime.expectations import Expectations
from daemonjob.domain.rollout.cachewait import CacheWait, with_cache_wait
from daemonjob.domain.shared.apinames import LABEL_ATTEMPT, LABEL_REVISION
from daemonjob.domain.spec.revision import job_name
from daemonjob.machinery.process.clock import FakeClock
from daemonjob.testing.doubles.actbed import ActBed
from daemonjob.testing.doubles.builders import daemonjob, node

NS = "ops"
KEY = f"{NS}/audit"
UID = "dj-uid"
NOW = "2024-01-01T00:00:00Z"


def finished(job: dict[str, Any]) -> dict[str, Any]:
    return {
        **job,
        "status": {"succeeded": 1, "conditions": [{"type": "Complete", "status": "True", "lastTransitionTime": NOW}]},
    }


@pytest.fixture
def bed(bed: ActBed) -> ActBed:
    """One node, one DaemonJob."""
    bed.nodes.add(node("node-00"))
    bed.add_dj(daemonjob())
    return bed


def rolled_out(bed: ActBed) -> str:
    """One node, its Job created and seen by the cache; returns the Job's name."""
    bed.drain()
    bed.ctl.reconcile(KEY)
    bed.control.deliver()
    (name,) = bed.created_names()
    bed.control.reset()
    return name


def reconciling(status: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in status["conditions"] if c["type"] == "Reconciling")


# -- Jobs deleted by hand mid-rollout: the next attempt, under a name of its own ---------------
def rerun_after_delete(bed: ActBed, name: str, attempt: int = 1) -> dict[str, Any]:
    """The delete wakes the DaemonJob; its pass records the node's next attempt and creates
    nothing; that status write wakes the pass that creates it. Returns the created body."""
    assert bed.ready_within(defaults.JOB_EVENT_DELAY), "the delete wakes the DaemonJob"
    bed.drain()
    bed.ctl.reconcile(KEY)
    assert bed.created_names() == [], "created before the status records its attempt"
    status = bed.last_status()
    assert status["pendingNodes"] == 1, "the status never hides the re-run"
    assert status["nodeAttempts"] == {
        "rollout": status["currentRevision"],
        "nodes": [{"node": "node-00", "attempt": attempt}],
    }
    bed.sync()
    assert bed.ready_within(0), "the recorded attempt wakes the pass that creates it"
    bed.drain()
    bed.ctl.reconcile(KEY)
    (body,) = bed.created()
    return body


def test_an_unfinished_job_deleted_by_hand_is_recreated_under_a_new_name_at_once(bed: ActBed) -> None:
    """Re-created under its name, the Job got no pod from the Job controller for 5 minutes
    (kubernetes/kubernetes#131917): no name is used twice, and no wait is needed."""
    name = rolled_out(bed)
    bed.user_deletes(name)  # while its pod may still be on its way
    body = rerun_after_delete(bed, name)
    assert body["metadata"]["name"] != name
    assert body["metadata"]["name"] == job_name("audit", "node-00", body["metadata"]["labels"][LABEL_REVISION], None, 1)
    assert body["metadata"]["labels"][LABEL_ATTEMPT] == "1"
    assert bed.ctl.metrics.registry.get_sample_value("daemonjob_jobs_rerun_total") == 1
    bed.control.reset()
    bed.ctl.reconcile(KEY)  # the cache has not shown it yet: nothing twice
    assert bed.created_names() == []


def test_a_finished_job_deleted_by_hand_is_recreated_under_a_new_name(bed: ActBed) -> None:
    name = rolled_out(bed)
    bed.jobs.update(finished(bed.control.objects[f"{NS}/{name}"]))
    bed.user_deletes(name)
    assert rerun_after_delete(bed, name)["metadata"]["name"] != name


def test_a_succeeded_job_let_go_for_its_recorded_result_is_not_noted_as_a_lost_attempt(bed: ActBed) -> None:
    """spec.results.deleteSucceededJobs lets every node's Job go once its result is recorded:
    noted as lost attempts, all of them were read by each pass for an hour (0.9 s of CPU per
    node join at 10,000 nodes x 10 DaemonJobs). The record stands for such a Job instead;
    one deleted by hand is still a lost attempt."""
    name = rolled_out(bed)
    bed.jobs.update(finished(bed.control.objects[f"{NS}/{name}"]))
    let_go = bed.control.objects[f"{NS}/{name}"]["metadata"]["uid"]
    bed.ctl.router.recorded_success = lambda job: job["metadata"]["uid"] == let_go
    bed.user_deletes(name)
    assert bed.ctl.deleted_jobs.of(UID).attempts == {}
    assert rolled_out(bed) == name, "no record here (no recorder): the node runs again, its first attempt"
    bed.ctl.router.recorded_success = lambda job: False
    bed.user_deletes(name)
    assert list(bed.ctl.deleted_jobs.of(UID).attempts.values()) == [{"node-00": 0}]


def test_every_rerun_of_a_node_takes_the_next_attempt(bed: ActBed) -> None:
    names = [rolled_out(bed)]
    for attempt in (1, 2, 3):
        bed.user_deletes(names[-1])
        body = rerun_after_delete(bed, names[-1], attempt)
        assert body["metadata"]["labels"][LABEL_ATTEMPT] == str(attempt)
        names.append(body["metadata"]["name"])
        bed.control.deliver()
        bed.control.reset()
    assert len(set(names)) == 4


def test_a_restart_between_recording_and_creating_creates_the_same_name() -> None:
    """The attempt is read from the status: a new process (no memory of the delete) creates the
    Job the old one would have, so a create it sent before dying meets AlreadyExists."""
    first = ActBed.start()
    try:
        first.nodes.add(node("node-00"))
        first.add_dj(daemonjob())
        name = rolled_out(first)
        first.user_deletes(name)
        expected = rerun_after_delete(first, name)["metadata"]["name"]
        dj = first.dj()  # with the recorded attempt
    finally:
        first.stop()
    second = ActBed.start()
    try:
        second.nodes.add(node("node-00"))
        second.add_dj(dj)
        second.ctl.reconcile(KEY)
        assert second.created_names() == [expected]
    finally:
        second.stop()


def test_a_lost_status_reruns_no_node_that_has_its_job(bed: ActBed) -> None:
    name = rolled_out(bed)
    bed.user_deletes(name)
    rerun_after_delete(bed, name)
    bed.sync()
    bed.control.reset()
    dj = bed.dj()
    dj["status"] = {}
    bed.djs.update(dj)
    bed.ctl.reconcile(KEY)
    assert bed.created_names() == []
    assert bed.last_status()["activeNodes"] == 1


def test_a_delete_and_recreate_seen_as_one_update_satisfies_the_expectations(bed: ActBed) -> None:
    """A relist can show a Job deleted and re-created under its name as one update: both the
    delete and the create were observed, or the DaemonJob would wait for the TTL."""
    name = rolled_out(bed)
    old = bed.jobs.store.get(f"{NS}/{name}")
    del bed.control.objects[f"{NS}/{name}"]  # deleted; the watch is down, so no event
    bed.jobs.store.delete(old)  # as if the delete had been seen, so the next pass re-creates
    bed.ctl.reconcile(KEY)
    assert bed.created_names() == [name]
    bed.jobs.store.add(old)  # ...but the relist still had the old one: it comes back as an update
    bed.control._pending.clear()
    bed.jobs.update(bed.control.objects[f"{NS}/{name}"])  # new uid, same name
    assert bed.ctl.expectations.satisfied(UID)


# -- a wait past the deadline: checked, named, requeued --------------------------------------
def test_a_wait_past_the_deadline_is_requeued_checked_named_and_counted(bed: ActBed) -> None:
    bed.ctl.reconcile(KEY)  # creates; the watch lags
    (name,) = bed.created_names()
    bed.drain()
    assert bed.ctl.reconcile(KEY) is None
    assert not bed.ready_within(defaults.EXPECTATIONS_DEADLINE - 1), "no busy polling before the deadline"
    assert bed.ready_within(1.1), "requeued at the deadline, not left for a resync"
    bed.drain()
    bed.control.reset()
    assert bed.ctl.reconcile(KEY) is None
    assert bed.created_names() == [], "the API server holds the Job: creating it again would be acting twice"
    cond = reconciling(bed.last_status())
    assert cond["status"] == "True" and cond["reason"] == "WaitingForCache"
    assert f"waiting for the cache to show 1 created Job: {name}" in cond["message"]
    assert bed.ctl.metrics.registry.get_sample_value("daemonjob_expectations_pending_overdue") == 1
    assert bed.ctl.metrics.registry.get_sample_value("daemonjob_expectation_checks_total", {"outcome": "waiting"}) == 1
    assert bed.ready_within(defaults.EXPECTATIONS_RECHECK), "checked again, not left for the TTL"

    bed.control.deliver()  # the watch catches up
    bed.ctl.reconcile(KEY)
    assert reconciling(bed.last_status())["reason"] != "WaitingForCache"
    assert bed.ctl.metrics.registry.get_sample_value("daemonjob_expectations_pending_overdue") == 0


def test_an_overdue_create_the_api_server_does_not_hold_is_cleared_and_made_again(bed: ActBed) -> None:
    bed.ctl.reconcile(KEY)
    (name,) = bed.created_names()
    bed.control.objects.clear()  # deleted before the cache ever showed it, and that event lost too
    bed.control._pending.clear()
    bed.control.reset()
    bed.clock.step(defaults.EXPECTATIONS_DEADLINE)
    bed.ctl.reconcile(KEY)
    assert bed.created_names() == [name], "cache and API server agree it is absent: deciding on the cache is safe"
    assert bed.ctl.metrics.registry.get_sample_value("daemonjob_expectation_checks_total", {"outcome": "cleared"}) == 1


def test_a_watch_behind_a_burst_of_creates_costs_one_read_per_check(bed: ActBed) -> None:
    """The API server holds the first overdue Job and the cache does not: the cache is behind,
    and the other names wait with it unread (one watch brings them); a name the API server
    lost is read, and cleared, at a check once the cache has caught up with the rest."""
    for i in range(1, 50):
        bed.nodes.add(node(f"node-{i:02d}"))
    bed.ctl.reconcile(KEY)  # creates 50 Jobs; the watch lags
    names = bed.created_names()
    assert len(names) == 50
    lost = names[-1]
    del bed.control.objects[f"{NS}/{lost}"]  # gone before the cache showed it, its events lost
    bed.control._pending = [(op, job) for op, job in bed.control._pending if job["metadata"]["name"] != lost]
    bed.control.reset()
    bed.clock.step(defaults.EXPECTATIONS_DEADLINE)
    assert bed.ctl.reconcile(KEY) is None
    assert len(bed.control.of("get_job")) == 1, "one read says the cache is behind"
    assert bed.created_names() == []
    assert len(bed.ctl.expectations.waiting(UID).creates) == 50

    bed.control.deliver()  # the watch catches up, but for the lost Job
    bed.control.reset()
    bed.clock.step(defaults.EXPECTATIONS_RECHECK)
    bed.ctl.reconcile(KEY)
    assert [c.name for c in bed.control.of("get_job")] == [lost]
    assert bed.created_names() == [lost], "cache and API server agree it is absent: made again"


def test_an_overdue_delete_the_cache_shows_gone_is_cleared(bed: ActBed) -> None:
    name = rolled_out(bed)
    job = bed.control.objects.pop(f"{NS}/{name}")
    bed.ctl.expectations.expect_deletions(UID, [name])
    bed.jobs.store.delete(job)  # the cache shows it gone, but the event never reached the handler
    bed.clock.step(defaults.EXPECTATIONS_DEADLINE)
    bed.ctl.reconcile(KEY)
    assert bed.ctl.expectations.waiting(UID).deletes == ()
    assert bed.created_names() == [name], "cache and API server agree it is gone: the node runs again"


# -- the pieces -------------------------------------------------------------------------------
def test_expectations_keep_when_each_name_was_raised() -> None:
    clock = FakeClock()
    exp = Expectations(timer=clock.now, deadline=10)
    exp.expect_creations("u", ["a"])
    clock.step(4)
    exp.expect_deletions("u", ["b"])
    assert exp.next_deadline("u") == pytest.approx(clock.now() + 6)
    assert not exp.waiting("u", overdue_only=True) and exp.overdue() == 0
    clock.step(6)
    assert exp.waiting("u", overdue_only=True).creates == ("a",) and exp.overdue() == 1
    exp.creation_observed("u", "a")
    assert exp.waiting("u").deletes == ("b",) and exp.overdue() == 0
    clock.step(300)
    assert exp.satisfied("u"), "the TTL still ends any wait"


def test_the_waiting_condition_names_the_jobs_and_keeps_the_others() -> None:
    status = {
        "activeNodes": 1,
        "conditions": [
            {"type": "Complete", "status": "False"},
            {"type": "Reconciling", "status": "True", "reason": "RollingOut", "lastTransitionTime": "t0"},
        ],
    }
    wait = CacheWait(("j-1", "j-2", "j-3", "j-4"), ("j-9",), 31.4)
    out = with_cache_wait(status, wait, {c["type"]: c for c in status["conditions"]}, NOW, 1)
    cond = reconciling(out)
    assert cond["message"].startswith(
        "waiting for the cache to show 4 created Jobs: j-1, j-2, j-3 (+1 more) and 1 deleted Job: j-9 (for 31s)"
    )
    assert cond["lastTransitionTime"] == "t0" and cond["observedGeneration"] == 1
    assert out["conditions"][0] == status["conditions"][0] and out["activeNodes"] == 1
