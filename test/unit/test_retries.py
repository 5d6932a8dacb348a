"""spec.retry and spec.startTimeout: the backoff schedule, a failed node pending again until
its retries are spent, attempts counted per rollout, stuck starts and suspended Jobs."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
import structlog

from daemonjob.controller.passes.observe import Observation
from daemonjob.controller.passes.startchecks import StartChecks, pod_verdict
from daemonjob.domain.decision.decide import Decision
from daemonjob.domain.jobs.jobbody import build_job
from daemonjob.domain.rollout.inputs import ConfigMapsRead
from daemonjob.domain.rollout.starts import StartCheck
from daemonjob.domain.shared.apinames import ANNOTATION_START_FAILURE, ANNOTATION_STARTED
from daemonjob.domain.shared.timestamps import format_time
from daemonjob.domain.spec.retryspec import Retry, backoff_delay
from daemonjob.domain.spec.revision import job_name
from daemonjob.domain.spec.validate import validate
from daemonjob.testing.doubles.builders import daemonjob, job_template, node, revision_of
from daemonjob.testing.doubles.decisions import Given, decide_over
from daemonjob.testing.doubles.fakes import FakeJobControl

NOW = datetime(2024, 3, 1, 12, 0, 0, tzinfo=timezone.utc)
RETRY = {"limit": 2, "backoff": "1m"}


def at(seconds: float) -> str:
    return format_time(NOW + timedelta(seconds=seconds))


def attempt_job(
    dj: dict[str, Any], on: str, state: str, attempt: int = 0, created: float = -600, finished: float = -30
) -> dict[str, Any]:
    body = build_job(dj, on, revision_of(dj), attempt=attempt)
    body["metadata"].update(creationTimestamp=at(created), uid=f"uid-{body['metadata']['name']}")
    conditions = []
    if state == "failed":
        conditions.append({"type": "Failed", "status": "True", "lastTransitionTime": at(finished)})
    elif state == "succeeded":
        conditions.append({"type": "Complete", "status": "True", "lastTransitionTime": at(finished)})
    body["status"] = {"startTime": at(created), "conditions": conditions}
    return body


def conditions(decision: Decision) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in decision.status["conditions"]}


# -- the spec ----------------------------------------------------------------------------------
def test_the_backoff_doubles_from_backoff_up_to_max_backoff() -> None:
    retry = Retry(5, timedelta(seconds=10), timedelta(seconds=60))
    assert [backoff_delay(retry, n).total_seconds() for n in range(1, 7)] == [10, 20, 40, 60, 60, 60]
    assert backoff_delay(Retry(3), 1) == timedelta(seconds=10), "the Job controller's pod backoff by default"
    assert backoff_delay(Retry(3), 9) == timedelta(minutes=6)


@pytest.mark.parametrize(
    ("retry", "message"),
    [
        ({"backoff": "1m"}, "spec.retry.limit: Required value"),
        ({"limit": -1}, "spec.retry.limit: Invalid value: -1: must be an integer from 0 to 10"),
        ({"limit": 11}, "spec.retry.limit: Invalid value: 11"),
        ({"limit": "2"}, 'spec.retry.limit: Invalid value: "2"'),
        ({"limit": 1, "backoff": "soon"}, 'spec.retry.backoff: Invalid value: "soon": must be a duration'),
        ({"limit": 1, "backoff": "0s"}, 'spec.retry.backoff: Invalid value: "0s": must be a duration longer than 0s'),
        ({"limit": 1, "backoff": "5m", "maxBackoff": "1m"}, 'spec.retry.maxBackoff: Invalid value: "1m": must not'),
        ("twice", 'spec.retry: Invalid value: "twice": must be an object'),
    ],
)
def test_an_invalid_retry_is_refused_naming_its_field(retry: Any, message: str) -> None:
    read = validate(daemonjob(retry=retry))
    assert any(p.message.startswith(message) for p in read.problems), read.problems
    assert read.spec.retry is None


def test_retry_and_start_timeout_are_read_with_their_defaults() -> None:
    spec = validate(daemonjob(retry={"limit": 2, "backoff": "1m"})).spec
    assert spec.retry == Retry(2, timedelta(minutes=1), timedelta(minutes=6))
    assert spec.start_timeout == timedelta(minutes=10)
    assert validate(daemonjob(retry={"limit": 1, "backoff": "10m"})).spec.retry == Retry(
        1, timedelta(minutes=10), timedelta(minutes=10)
    ), "maxBackoff is never below backoff"
    assert validate(daemonjob(startTimeout="90s")).spec.start_timeout == timedelta(seconds=90)
    bad = validate(daemonjob(startTimeout=30)).problems
    assert [p.message.split(":")[0] for p in bad] == ["spec.startTimeout"]


def test_a_job_template_managed_by_another_controller_is_refused() -> None:
    other = job_template()
    other["spec"]["managedBy"] = "kueue.x-k8s.io/multikueue"
    (problem,) = validate(daemonjob(template=other)).problems
    assert problem.message.startswith('spec.jobTemplate.spec.managedBy: Unsupported value: "kueue.x-k8s.io/multikueue"')
    own = job_template()
    own["spec"]["managedBy"] = "kubernetes.io/job-controller"
    assert validate(daemonjob(template=own)).problems == []


# -- retries in the decision -------------------------------------------------------------------
def test_a_failed_node_with_retries_left_is_pending_until_its_backoff_has_passed() -> None:
    dj = daemonjob(retry=RETRY, maxFailedNodes=0)
    jobs = [attempt_job(dj, "n1", "failed", finished=-30)]
    decision = decide_over(Given(dj, jobs, [node("n1")], NOW))
    assert decision.creates == []
    assert decision.requeue_at == NOW + timedelta(seconds=30), "woken when the backoff has passed"
    status = decision.status
    assert status["failedNodes"] == 0 and status["pendingNodes"] == 1 and status["failedNodeNames"] == []
    (entry,) = status["retryingNodes"]
    assert entry == {
        "node": "n1",
        "failedJob": jobs[0]["metadata"]["name"],
        "attempt": 0,
        "failures": 1,
        "retriesLeft": 2,
        "retryAt": at(30),
    }
    cond = conditions(decision)
    assert cond["Failed"]["status"] == "False", "maxFailedNodes 0 is not spent"
    assert cond["Reconciling"]["reason"] == "RetryBackoff" and "n1" in cond["Reconciling"]["message"]


def test_once_the_backoff_has_passed_the_node_runs_again_as_its_next_attempt() -> None:
    dj = daemonjob(retry=RETRY, maxFailedNodes=0)
    jobs = [attempt_job(dj, "n1", "failed", finished=-90)]
    first = decide_over(Given(dj, jobs, [node("n1")], NOW))
    assert first.creates == [], "the attempt is recorded in the status before its Job is created"
    assert first.status["nodeAttempts"]["nodes"] == [{"node": "n1", "attempt": 1}]
    recorded = daemonjob(retry=RETRY, maxFailedNodes=0, status=first.status)
    (create,) = decide_over(Given(recorded, jobs, [node("n1")], NOW)).creates
    assert create.attempt == 1 and create.name == job_name("audit", "n1", revision_of(dj), None, 1)
    assert create.name != jobs[0]["metadata"]["name"]
    assert create.body["spec"]["template"]["metadata"]["labels"]["daemonjob.io/attempt"] == "1"


def test_the_second_retry_waits_twice_as_long_after_the_second_failure() -> None:
    dj = daemonjob(retry=RETRY)
    jobs = [
        attempt_job(dj, "n1", "failed", 0, created=-600, finished=-500),
        attempt_job(dj, "n1", "failed", 1, created=-400, finished=-60),
    ]
    decision = decide_over(Given(dj, jobs, [node("n1")], NOW))
    assert decision.creates == [] and decision.requeue_at == NOW + timedelta(seconds=60)
    assert decision.status["retryingNodes"][0]["failures"] == 2
    assert decision.status["retryingNodes"][0]["attempt"] == 1


def test_a_node_whose_retries_are_spent_counts_against_max_failed_nodes() -> None:
    dj = daemonjob(retry={"limit": 1, "backoff": "1s"}, maxFailedNodes=0)
    jobs = [
        attempt_job(dj, "n1", "failed", 0, created=-600, finished=-500),
        attempt_job(dj, "n1", "failed", 1, created=-400, finished=-300),
    ]
    decision = decide_over(Given(dj, jobs, [node("n1"), node("n2")], NOW))
    assert decision.status["failedNodes"] == 1 and decision.status["failedNodeNames"] == ["n1"]
    assert "retryingNodes" not in decision.status
    assert conditions(decision)["Failed"]["reason"] == "FailureThresholdExceeded"
    assert decision.creates == [], "no new node starts, and n1 gets no third Job"


def test_a_new_revision_starts_every_node_again_at_attempt_zero() -> None:
    old = daemonjob(retry=RETRY)
    jobs = [attempt_job(old, "n1", "failed", 0), attempt_job(old, "n1", "failed", 1)]
    new_template = job_template()
    new_template["metadata"] = {"annotations": {"edited": "yes"}}
    dj = daemonjob(retry=RETRY, template=new_template)
    (create,) = decide_over(Given(dj, jobs, [node("n1")], NOW)).creates
    assert create.attempt == 0 and create.name == job_name("audit", "n1", revision_of(dj))
    assert "retryingNodes" not in decide_over(Given(dj, jobs, [node("n1")], NOW)).status


def test_without_retry_a_failed_node_waits_for_a_rerun() -> None:
    dj = daemonjob()
    decision = decide_over(Given(dj, [attempt_job(dj, "n1", "failed")], [node("n1")], NOW))
    assert decision.creates == [] and decision.status["failedNodes"] == 1 and decision.requeue_at is None


# -- stuck starts ------------------------------------------------------------------------------
def test_a_job_with_no_running_pod_is_checked_at_the_start_timeout_and_not_before() -> None:
    dj = daemonjob(startTimeout="10m")
    early = attempt_job(dj, "n1", "active", created=-300)
    decision = decide_over(Given(dj, [early], [node("n1")], NOW))
    assert decision.start_checks == [] and decision.requeue_at == NOW + timedelta(minutes=5)
    late = attempt_job(dj, "n1", "active", created=-601)
    (check,) = decide_over(Given(dj, [late], [node("n1")], NOW)).start_checks
    assert (check.node, check.job, check.uid) == ("n1", late["metadata"]["name"], late["metadata"]["uid"])


@pytest.mark.parametrize(
    "started", [{"status": {"ready": 1}}, {"status": {"succeeded": 1}}, {"annotations": {ANNOTATION_STARTED: "x"}}]
)
def test_a_job_whose_pod_ran_is_never_checked(started: dict[str, Any]) -> None:
    dj = daemonjob()
    job = attempt_job(dj, "n1", "active", created=-3600)
    job["status"].update(started.get("status", {}))
    job["metadata"]["annotations"].update(started.get("annotations", {}))
    decision = decide_over(Given(dj, [job], [node("n1")], NOW))
    assert decision.start_checks == [] and decision.requeue_at is None


def test_a_job_suspended_by_someone_else_is_named_and_keeps_its_slot() -> None:
    dj = daemonjob(maxParallel=1)
    job = attempt_job(dj, "n1", "active", created=-3600)
    job["spec"]["suspend"] = True
    decision = decide_over(Given(dj, [job], [node("n1"), node("n2")], NOW))
    reconciling = conditions(decision)["Reconciling"]
    assert reconciling["reason"] == "JobSuspendedExternally"
    assert f"{job['metadata']['name']} on n1" in reconciling["message"]
    assert decision.creates == [], "its slot is held: it may be resumed at any time"
    assert decision.start_checks == [], "a suspended Job is not failed for not starting"


def pod(phase: str, **status: Any) -> dict[str, Any]:
    return {"metadata": {"name": "p", "creationTimestamp": at(0)}, "status": {"phase": phase, **status}}


def test_the_pods_reason_says_why_the_job_never_ran() -> None:
    waiting = {"name": "main", "state": {"waiting": {"reason": "ImagePullBackOff", "message": 'Back-off "x"'}}}
    assert pod_verdict([pod("Pending", containerStatuses=[waiting])]) == 'ImagePullBackOff: Back-off "x"'
    unscheduled = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/3 nodes"}
    assert pod_verdict([pod("Pending", conditions=[unscheduled])]) == "Unschedulable: 0/3 nodes"
    assert (pod_verdict([]) or "").startswith("NoPod: ")
    assert pod_verdict([pod("Pending"), pod("Running")]) is None


def test_a_start_check_fails_a_stuck_job_through_its_deadline_once_and_marks_a_running_one() -> None:
    control = FakeJobControl()
    dj = daemonjob()
    stuck, fine = (attempt_job(dj, n, "active", created=-700) for n in ("n1", "n2"))
    for j in (stuck, fine):
        control.put_job(j)
    waiting = {"name": "main", "state": {"waiting": {"reason": "ErrImagePull", "message": "no such image"}}}
    control.pods = {
        f"controller-uid={stuck['metadata']['uid']}": [pod("Pending", containerStatuses=[waiting])],
        f"controller-uid={fine['metadata']['uid']}": [pod("Running")],
    }
    clock = [0.0]
    starts = StartChecks(control, ttl=60, timer=lambda: clock[0])
    seen = Observation("ns/audit", dj, dj, {}, ConfigMapsRead(), None, structlog.get_logger())
    checks = [
        StartCheck(
            j["metadata"]["annotations"]["daemonjob.io/node"],
            j["metadata"]["name"],
            j["metadata"]["uid"],
            NOW - timedelta(seconds=700),
        )
        for j in (stuck, fine)
    ]
    (event,) = starts.run(seen, checks, NOW)
    assert event.reason == "StartTimeout" and "ErrImagePull: no such image" in event.message
    patches = {c.name: c.body for c in control.of("patch_job")}
    assert patches[stuck["metadata"]["name"]] == {
        "metadata": {"annotations": {ANNOTATION_START_FAILURE: "ErrImagePull: no such image"}},
        "spec": {"activeDeadlineSeconds": 700},
    }
    assert patches[fine["metadata"]["name"]] == {"metadata": {"annotations": {ANNOTATION_STARTED: format_time(NOW)}}}
    assert starts.run(seen, checks, NOW) == [] and len(control.of("list_pods")) == 2, "read once"


# -- kubectl daemonjob status ------------------------------------------------------------------
def test_the_plugin_shows_each_nodes_attempt_a_retrying_node_as_pending_and_a_stuck_starts_reason() -> None:
    from daemonjob.kubectl.commands.status import HEADERS, table_row
    from daemonjob.kubectl.views.nodes import PENDING, build_view

    dj = daemonjob(retry=RETRY)
    retried = attempt_job(dj, "n1", "failed", 1, created=-100, finished=-10)
    stuck = attempt_job(dj, "n2", "failed", 0)
    stuck["metadata"]["annotations"][ANNOTATION_START_FAILURE] = 'ImagePullBackOff: Back-off pulling image "x"'
    stuck["status"]["conditions"][0]["reason"] = "DeadlineExceeded"
    dj["status"] = {"retryingNodes": [{"node": "n1", "attempt": 1, "failures": 2, "retryAt": at(50)}]}
    rows = {r.node: r for r in build_view(dj, [retried, stuck], [], [node("n1"), node("n2")]).rows}
    assert (rows["n1"].state, rows["n1"].reason, rows["n1"].attempt) == (PENDING, "RetryBackoff", 1)
    assert rows["n1"].message.startswith("attempt 1 failed") and at(50) in rows["n1"].message
    assert (rows["n2"].state, rows["n2"].reason) == ("failed", "ImagePullBackOff")
    assert rows["n2"].message == 'Back-off pulling image "x"'
    assert HEADERS[3] == "ATTEMPT" and table_row(rows["n1"], NOW, False)[3] == "1"


def test_start_checks_are_asked_for_a_few_at_a_time_the_rest_a_second_later() -> None:
    from daemonjob.domain.rollout.starts import START_CHECKS_PER_PASS, Unstarted, due_start_checks

    unstarted = [Unstarted(NOW - timedelta(hours=1), f"n{i:03}", f"j{i:03}", f"u{i}") for i in range(40)]
    unstarted.append(Unstarted(NOW - timedelta(minutes=1), "late", "j-late", "u-late"))
    due, wake = due_start_checks(unstarted, timedelta(minutes=10), NOW)
    assert len(due) == START_CHECKS_PER_PASS and wake == NOW + timedelta(seconds=1)
    due, wake = due_start_checks(unstarted[START_CHECKS_PER_PASS:], timedelta(minutes=10), NOW)
    assert len(due) == 40 - START_CHECKS_PER_PASS and wake == NOW + timedelta(minutes=9)


def test_a_job_resumed_after_a_suspension_has_its_full_start_timeout_from_its_start_time() -> None:
    dj = daemonjob(startTimeout="10m")
    job = attempt_job(dj, "n1", "active", created=-3600)
    job["status"]["startTime"] = at(-60)  # resumed a minute ago: the Job controller set it anew
    decision = decide_over(Given(dj, [job], [node("n1")], NOW))
    assert decision.start_checks == [] and decision.requeue_at == NOW + timedelta(minutes=9)
