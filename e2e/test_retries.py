"""Automatic retries (spec.retry) and stuck starts (spec.startTimeout), against the real API
server and Job controller (kube-controller-manager) with the simulated kubelet.

A failed node runs again as a new Job, its next attempt under a name of its own (never the
failed Job's: the Job controller keys its expectations by name, kubernetes/kubernetes#131917),
after a backoff, before it counts against maxFailedNodes. The count is read from the
cluster's Jobs, so a SIGKILLed controller's successor keeps it. A pod that never runs fails
its node at the start timeout, with the pod's reason.
"""

from __future__ import annotations

from typing import Any

from harness import (
    FAIL,
    Cluster,
    ControllerProcess,
    Nodes,
    daemonjob,
    holds,
    job_finished,
    wait_for,
)

from daemonjob.domain.shared.timestamps import parse_time

LABEL_ATTEMPT = "daemonjob.io/attempt"
FAIL_ATTEMPTS = "sim.daemonjob.io/fail-attempts"
IMAGE_PULL = "sim.daemonjob.io/image-pull"


def failing_attempts(name: str, group: str, attempts: str, **spec: Any) -> dict[str, Any]:
    """A DaemonJob whose pods exit 3 on the listed attempts and 0 on the others."""
    body = daemonjob(name, group, FAIL, **spec)
    body["spec"]["jobTemplate"]["spec"]["template"]["metadata"]["annotations"][FAIL_ATTEMPTS] = attempts
    return body


def attempt(job: dict[str, Any]) -> int:
    return int(job["metadata"].get("labels", {}).get(LABEL_ATTEMPT, "0"))


def by_attempt(api: Cluster, name: str) -> list[dict[str, Any]]:
    return sorted(api.jobs(name), key=attempt)


def test_a_node_failing_twice_then_passing_is_retried_under_new_names_without_spending_max_failed_nodes(
    api: Cluster, nodes: Nodes, group: str, controller: Any
) -> None:
    (node,) = nodes(1)
    api.apply(failing_attempts("flaky", group, "0,1", retry={"limit": 2, "backoff": "1s"}, maxFailedNodes=0))

    dj = api.wait_complete("flaky", 1, timeout=120)
    jobs = by_attempt(api, "flaky")
    assert [attempt(j) for j in jobs] == [0, 1, 2]
    assert len({j["metadata"]["name"] for j in jobs}) == 3, "a failed Job's name is never used again"
    assert [job_finished(j) for j in jobs] == ["Failed", "Failed", "Complete"], "failed attempts are kept"
    status = dj["status"]
    assert status["succeededNodes"] == 1 and status["failedNodes"] == 0 and not status.get("failedNodeNames")
    conditions = {c["type"]: c for c in status["conditions"]}
    assert conditions["Failed"]["status"] == "False", "maxFailedNodes 0 is not spent by a retried node"
    assert "retryingNodes" not in status


def test_the_retry_limit_survives_a_sigkill_between_attempts(
    api: Cluster, nodes: Nodes, group: str, controller_process: ControllerProcess
) -> None:
    (node,) = nodes(1)
    api.apply(failing_attempts("stubborn", group, "0,1,2,3", retry={"limit": 1, "backoff": "8s"}, maxFailedNodes=0))
    first = wait_for(
        lambda: next((j for j in api.jobs("stubborn") if job_finished(j) == "Failed"), None), 60, "attempt 0 to fail"
    )
    dj = api.wait_status("stubborn", lambda d: d["status"].get("retryingNodes"), "the node waiting to retry")
    (retrying,) = dj["status"]["retryingNodes"]
    assert retrying["node"] == node and retrying["failures"] == 1 and retrying["failedJob"] == first["metadata"]["name"]
    assert dj["status"]["failedNodes"] == 0
    assert {c["type"]: c for c in dj["status"]["conditions"]}["Reconciling"]["reason"] == "RetryBackoff"

    controller_process.kill()  # SIGKILL while the backoff runs: the count is in the cluster's Jobs
    controller_process.start(wait=True)

    dj = api.wait_status("stubborn", lambda d: d["status"].get("failedNodes") == 1, "the node failed", timeout=120)
    jobs = by_attempt(api, "stubborn")
    assert [attempt(j) for j in jobs] == [0, 1], "one retry (limit 1), not one more after the restart"
    assert [job_finished(j) for j in jobs] == ["Failed", "Failed"]
    assert dj["status"]["failedNodeNames"] == [node]
    assert {c["type"]: c for c in dj["status"]["conditions"]}["Failed"]["reason"] == "FailureThresholdExceeded"
    holds(lambda: len(api.jobs("stubborn")) == 2, 10, "no third attempt", describe=lambda: by_attempt(api, "stubborn"))


def test_a_pod_whose_image_is_never_pulled_fails_its_node_at_the_start_timeout_with_the_reason_then_retries(
    api: Cluster, nodes: Nodes, group: str, controller: Any
) -> None:
    (node,) = nodes(1)
    body = daemonjob("stuck", group, startTimeout="5s", maxParallel=1, retry={"limit": 1, "backoff": "1s"})
    body["spec"]["jobTemplate"]["spec"]["template"]["metadata"]["annotations"][IMAGE_PULL] = "Never"
    api.apply(body)
    job = wait_for(lambda: next(iter(api.jobs("stuck")), None), 60, "the node's Job")
    wait_for(lambda: api.pods(job["metadata"]["name"]), 30, "its pod")

    dj = api.wait_status("stuck", lambda d: d["status"].get("failedNodes") == 1, "the node failed", timeout=120)
    jobs = by_attempt(api, "stuck")
    assert [attempt(j) for j in jobs] == [0, 1], "the stuck start is retried once (limit 1) under a new name"
    for job in jobs:
        assert job_finished(job) == "Failed"
        failed_at = next(c for c in job["status"]["conditions"] if c["type"] == "Failed")["lastTransitionTime"]
        created = parse_time(job["metadata"]["creationTimestamp"])
        assert (parse_time(failed_at) - created).total_seconds() >= 5, "not before the start timeout"
        failure = job["metadata"]["annotations"]["daemonjob.io/start-failure"]
        assert failure.startswith("ImagePullBackOff: "), failure
    assert dj["status"]["failedNodeNames"] == [node] and dj["status"]["activeNodes"] == 0, "the slot is free"
    event = api.wait_event("stuck", lambda e: e.get("reason") == "StartTimeout", "the StartTimeout Event")
    assert "ImagePullBackOff" in event["message"]
