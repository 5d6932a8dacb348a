"""The rollout's gates (spec.rollout) as decisions: what each holds back, what the status says
of it, and when the pass looks again."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from daemonjob.domain.decision.decide import Decision
from daemonjob.domain.shared.timestamps import format_time
from daemonjob.domain.spec.validate import parse_duration, validate
from daemonjob.testing.doubles.builders import daemonjob, job, nodes
from daemonjob.testing.doubles.decisions import Given, decide_over

NOW = datetime(2024, 3, 6, 12, 0, 0, tzinfo=timezone.utc)  # a Wednesday


def reconciling(decision: Decision) -> dict[str, Any]:
    (found,) = [c for c in decision.status["conditions"] if c["type"] == "Reconciling"]
    return found


def created(decision: Decision) -> list[str]:
    return [c.node for c in decision.creates]


def ago(**delta: float) -> str:
    return format_time(NOW - timedelta(**delta))


# ---------------------------------------------------------------- pauseBetweenNodes


def test_pause_holds_the_slot_of_a_node_that_just_succeeded() -> None:
    dj = daemonjob(maxParallel=1, rollout={"pauseBetweenNodes": "5m"})
    jobs = [job(dj, "n1", "succeeded", finished=ago(minutes=2))]
    decision = decide_over(Given(dj, jobs, nodes("n1", "n2", "n3"), NOW))
    assert created(decision) == []
    cond = reconciling(decision)
    assert (cond["status"], cond["reason"]) == ("True", "PausingBetweenNodes")
    until = format_time(NOW + timedelta(minutes=3))
    assert until in cond["message"] and "after node n1" in cond["message"]
    assert decision.requeue_at == NOW + timedelta(minutes=3)
    assert decision.gate == "pauseBetweenNodes"


def test_pause_over_the_slot_starts_the_next_node() -> None:
    dj = daemonjob(maxParallel=1, rollout={"pauseBetweenNodes": "5m"})
    jobs = [job(dj, "n1", "succeeded", finished=ago(minutes=5))]
    decision = decide_over(Given(dj, jobs, nodes("n1", "n2", "n3"), NOW))
    assert created(decision) == ["n2"]
    assert reconciling(decision)["reason"] == "RollingOut"
    assert decision.gate is None and decision.requeue_at is None


def test_pause_holds_only_the_slots_of_recent_successes() -> None:
    dj = daemonjob(maxParallel=3, rollout={"pauseBetweenNodes": "10m"})
    jobs = [
        job(dj, "n1", "succeeded", finished=ago(minutes=1)),
        job(dj, "n2", "succeeded", finished=ago(minutes=20)),
        job(dj, "n3", "active"),
    ]
    decision = decide_over(Given(dj, jobs, nodes("n1", "n2", "n3", "n4", "n5"), NOW))
    assert created(decision) == ["n4"]  # 3 slots: n3 runs, n1's success pauses one, one is free


def test_a_failed_node_does_not_pause_its_slot() -> None:
    dj = daemonjob(maxParallel=1, rollout={"pauseBetweenNodes": "5m"})
    jobs = [job(dj, "n1", "failed", finished=ago(minutes=1))]
    assert created(decide_over(Given(dj, jobs, nodes("n1", "n2"), NOW))) == ["n2"]


def test_pause_is_not_said_when_no_node_waits() -> None:
    dj = daemonjob(maxParallel=1, rollout={"pauseBetweenNodes": "5m"})
    jobs = [job(dj, "n1", "succeeded", finished=ago(minutes=1)), job(dj, "n2", "succeeded", finished=ago(minutes=1))]
    decision = decide_over(Given(dj, jobs, nodes("n1", "n2"), NOW))
    assert reconciling(decision)["reason"] == "RolloutFinished"
    assert decision.requeue_at is None


def test_pause_waits_for_the_earliest_slot_to_free() -> None:
    dj = daemonjob(maxParallel=2, rollout={"pauseBetweenNodes": "5m"})
    jobs = [job(dj, "n1", "succeeded", finished=ago(minutes=4)), job(dj, "n2", "succeeded", finished=ago(minutes=1))]
    decision = decide_over(Given(dj, jobs, nodes("n1", "n2", "n3", "n4"), NOW))
    assert created(decision) == []
    assert decision.requeue_at == NOW + timedelta(minutes=1)
    assert "2 maxParallel slots" in reconciling(decision)["message"]


def test_pause_without_max_parallel_holds_nothing() -> None:
    dj = daemonjob(rollout={"pauseBetweenNodes": "5m"})
    jobs = [job(dj, "n1", "succeeded", finished=ago(minutes=1))]
    assert created(decide_over(Given(dj, jobs, nodes("n1", "n2", "n3"), NOW))) == ["n2", "n3"]


def test_pause_does_not_hold_back_a_running_job() -> None:
    """A gate never deletes or stops: the running Job of n2 is left as it is."""
    dj = daemonjob(maxParallel=1, rollout={"pauseBetweenNodes": "5m"})
    jobs = [job(dj, "n1", "succeeded", finished=ago(minutes=1)), job(dj, "n2", "active")]
    decision = decide_over(Given(dj, jobs, nodes("n1", "n2", "n3"), NOW))
    assert created(decision) == [] and decision.deletes == []


# ---------------------------------------------------------------- window

WINDOW = {"schedule": "0 22 * * *", "duration": "4h", "timeZone": "Europe/Berlin"}


def test_outside_the_window_nothing_starts_and_the_status_says_when_it_opens() -> None:
    dj = daemonjob(rollout={"window": WINDOW})
    decision = decide_over(Given(dj, [], nodes("n1", "n2"), NOW))  # 13:00 in Berlin
    assert created(decision) == []
    cond = reconciling(decision)
    opens = datetime(2024, 3, 6, 21, 0, tzinfo=timezone.utc)  # 22:00 CET
    assert (cond["status"], cond["reason"]) == ("True", "WaitingForWindow")
    assert format_time(opens) in cond["message"]
    assert decision.requeue_at == opens and decision.gate == "window"


def test_inside_the_window_nodes_start() -> None:
    dj = daemonjob(rollout={"window": WINDOW})
    at = datetime(2024, 3, 6, 23, 30, tzinfo=timezone.utc)  # 00:30 in Berlin, 2.5h into the window
    assert created(decide_over(Given(dj, [], nodes("n1", "n2"), at))) == ["n1", "n2"]


def test_the_window_closes_after_its_duration_and_running_jobs_finish() -> None:
    dj = daemonjob(maxParallel=1, rollout={"window": WINDOW})
    at = datetime(2024, 3, 7, 1, 0, tzinfo=timezone.utc)  # 02:00 in Berlin: closed
    jobs = [job(dj, "n1", "active")]
    decision = decide_over(Given(dj, jobs, nodes("n1", "n2"), at))
    assert created(decision) == [] and decision.deletes == []
    assert reconciling(decision)["reason"] == "WaitingForWindow"
    assert decision.requeue_at == datetime(2024, 3, 7, 21, 0, tzinfo=timezone.utc)


def test_an_unfinished_rollout_goes_on_in_the_next_window() -> None:
    dj = daemonjob(maxParallel=1, rollout={"window": WINDOW})
    jobs = [job(dj, "n1", "succeeded")]
    at = datetime(2024, 3, 7, 21, 5, tzinfo=timezone.utc)
    assert created(decide_over(Given(dj, jobs, nodes("n1", "n2"), at))) == ["n2"]


def test_the_window_does_not_tear_down_an_older_revision_outside_it() -> None:
    dj = daemonjob(rollout={"window": WINDOW})
    old = job(dj, "n1", "active", revision="old")
    decision = decide_over(Given(dj, [old], nodes("n1"), NOW))
    assert decision.deletes == [] and decision.creates == []


def test_the_window_comes_before_the_pause() -> None:
    dj = daemonjob(maxParallel=1, rollout={"window": WINDOW, "pauseBetweenNodes": "5m"})
    jobs = [job(dj, "n1", "succeeded", finished=ago(minutes=1))]
    assert reconciling(decide_over(Given(dj, jobs, nodes("n1", "n2"), NOW)))["reason"] == "WaitingForWindow"


def test_a_schedule_tick_earlier_than_the_window_is_looked_at_first() -> None:
    dj = daemonjob(rollout={"window": WINDOW}, schedule="0 14 * * *")
    decision = decide_over(Given(dj, [], nodes("n1"), NOW))
    assert decision.requeue_at is not None and decision.requeue_at <= datetime(2024, 3, 6, 14, 0, tzinfo=timezone.utc)


# ---------------------------------------------------------------- the rule book


@pytest.mark.parametrize(("text", "seconds"), [("5m", 300), ("1h30m", 5400), ("90s", 90), ("0s", 0)])
def test_durations(text: str, seconds: int) -> None:
    assert parse_duration(text) == timedelta(seconds=seconds)


@pytest.mark.parametrize("value", ["5", "5 m", "1d", "-5m", 5, "", "m"])
def test_not_durations(value: Any) -> None:
    assert parse_duration(value) is None


@pytest.mark.parametrize(
    ("rollout", "path"),
    [
        ({"pauseBetweenNodes": "soon"}, "spec.rollout.pauseBetweenNodes: Invalid value"),
        ({"window": {"schedule": "0 22 * * *"}}, "spec.rollout.window.duration: Required value"),
        ({"window": {"schedule": "0 22 * * *", "duration": "0s"}}, "spec.rollout.window.duration: Invalid value"),
        ({"window": {"schedule": "every night", "duration": "4h"}}, "spec.rollout.window.schedule: Invalid value"),
        (
            {"window": {"schedule": "0 22 * * *", "duration": "4h", "timeZone": "Mars/Base"}},
            "spec.rollout.window.timeZone: Invalid value",
        ),
        ("fast", "spec.rollout: Invalid value"),
    ],
)
def test_invalid_gates_are_problems_with_their_field_path(rollout: Any, path: str) -> None:
    problems = validate(daemonjob(rollout=rollout)).problems
    assert [p.message for p in problems if p.message.startswith(path)], problems


def test_an_invalid_gate_stalls_and_starts_nothing() -> None:
    dj = daemonjob(rollout={"window": {"schedule": "0 22 * * *", "duration": "forever"}})
    decision = decide_over(Given(dj, [], nodes("n1"), NOW))
    assert created(decision) == []
    (stalled,) = [c for c in decision.status["conditions"] if c["type"] == "Stalled"]
    assert stalled["status"] == "True" and "spec.rollout.window.duration" in stalled["message"]


# ---------------------------------------------------------------- canary


def promoted(dj: dict[str, Any], value: str) -> dict[str, Any]:
    dj["metadata"]["annotations"] = {"daemonjob.io/promote": value}
    return dj


def failed_condition(decision: Decision) -> dict[str, Any]:
    (found,) = [c for c in decision.status["conditions"] if c["type"] == "Failed"]
    return found


def test_a_new_revision_starts_on_the_canary_nodes_first() -> None:
    dj = daemonjob(rollout={"canary": 2})
    decision = decide_over(Given(dj, [], nodes("n1", "n2", "n3", "n4"), NOW))
    assert created(decision) == ["n1", "n2"]
    assert reconciling(decision)["reason"] == "WaitingForCanary"
    assert decision.gate == "canary"


def test_the_others_wait_while_a_canary_runs() -> None:
    dj = daemonjob(rollout={"canary": 2})
    jobs = [job(dj, "n1", "succeeded"), job(dj, "n3", "active")]
    decision = decide_over(Given(dj, jobs, nodes("n1", "n2", "n3", "n4"), NOW))
    assert created(decision) == []
    cond = reconciling(decision)
    assert cond["reason"] == "WaitingForCanary" and "n1, n3" in cond["message"]


def test_succeeded_canaries_pause_the_rollout_naming_them_and_how_to_promote() -> None:
    dj = daemonjob(rollout={"canary": "50%"})
    jobs = [job(dj, "n1", "succeeded"), job(dj, "n2", "succeeded")]
    decision = decide_over(Given(dj, jobs, nodes("n1", "n2", "n3", "n4"), NOW))
    assert created(decision) == []
    cond = reconciling(decision)
    revision = decision.status["currentRevision"]
    assert (cond["status"], cond["reason"]) == ("True", "CanaryPaused")
    assert "n1, n2" in cond["message"] and "kubectl daemonjob promote audit" in cond["message"]
    assert f"daemonjob.io/promote={revision}" in cond["message"]
    assert decision.requeue_at is None  # the annotation's update wakes the DaemonJob


def test_a_promote_naming_the_revision_lets_the_rest_go_on() -> None:
    dj = daemonjob(rollout={"canary": 1}, maxParallel=2)
    jobs = [job(dj, "n1", "succeeded")]
    revision = decide_over(Given(dj, jobs, nodes("n1"), NOW)).status["currentRevision"]
    decision = decide_over(Given(promoted(dj, revision), jobs, nodes("n1", "n2", "n3", "n4"), NOW))
    assert created(decision) == ["n2", "n3"]
    assert reconciling(decision)["reason"] == "RollingOut"


def test_a_promote_of_another_revision_does_not() -> None:
    dj = promoted(daemonjob(rollout={"canary": 1}), "an-older-revision")
    jobs = [job(dj, "n1", "succeeded")]
    assert created(decide_over(Given(dj, jobs, nodes("n1", "n2"), NOW))) == []


def test_a_canary_failure_stops_the_rollout() -> None:
    dj = daemonjob(rollout={"canary": 2})
    jobs = [job(dj, "n1", "failed"), job(dj, "n2", "succeeded")]
    decision = decide_over(Given(dj, jobs, nodes("n1", "n2", "n3"), NOW))
    assert created(decision) == []
    failed = failed_condition(decision)
    assert (failed["status"], failed["reason"]) == ("True", "CanaryFailed") and "n1" in failed["message"]
    assert "FailureThresholdReached" in [e.reason for e in decision.events]


def test_a_canary_with_runs_names_the_run() -> None:
    dj = daemonjob(rollout={"canary": 1})
    dj["metadata"]["annotations"] = {"daemonjob.io/run-now": "go"}
    decision = decide_over(Given(dj, [], nodes("n1", "n2"), NOW))
    assert created(decision) == ["n1"]
    run = decision.status["currentRun"]
    assert run and f"canary of {run}" in reconciling(decision)["message"]


def test_a_canary_as_large_as_the_cluster_completes_without_a_pause() -> None:
    dj = daemonjob(rollout={"canary": 5})
    jobs = [job(dj, "n1", "succeeded"), job(dj, "n2", "succeeded")]
    decision = decide_over(Given(dj, jobs, nodes("n1", "n2"), NOW))
    assert reconciling(decision)["reason"] == "RolloutFinished"


def test_a_canary_does_not_tear_down_more_old_jobs_than_its_count() -> None:
    """Replacing a running older Job takes two decisions; the node making way is a canary node."""
    dj = daemonjob(rollout={"canary": 1})
    jobs = [job(dj, n, "active", revision="old") for n in ("n1", "n2", "n3")]
    first = decide_over(Given(dj, jobs, nodes("n1", "n2", "n3"), NOW))
    assert [d.node for d in first.deletes] == ["n1"]
    jobs[0]["metadata"]["deletionTimestamp"] = format_time(NOW)  # n1's old Job terminating
    second = decide_over(Given(dj, jobs, nodes("n1", "n2", "n3"), NOW))
    assert second.deletes == [] and second.creates == []


@pytest.mark.parametrize("value", [0, "0%", "101%", "half", -1])
def test_invalid_canary(value: Any) -> None:
    problems = validate(daemonjob(rollout={"canary": value})).problems
    assert [p for p in problems if p.message.startswith("spec.rollout.canary: Invalid value")], problems
