"""Every rollout either progresses or says why, and kstatus-aware tools read the right verdict."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import pytest
from harness import (
    ANNOTATION_NODE,
    EXTERNAL,
    FAIL,
    LABEL_NAME,
    OK,
    Cluster,
    Nodes,
    condition,
    daemonjob,
    job_finished,
    job_node,
    metric_value,
    sleep,
    wait_for,
)

from daemonjob.machinery.client.kube import path_for
from daemonjob.testing.kstatus import CURRENT, FAILED, IN_PROGRESS
from daemonjob.testing.kstatus import verdict as kstatus_verdict
from daemonjob.testing.webhook import ValidatingWebhook


def verdict(api: Cluster, name: str) -> str:
    return kstatus_verdict(api.get(name)).status


def test_a_job_stuck_on_a_cordoned_node_holds_its_slot_and_is_named(
    api: Cluster, nodes: Nodes, group: str, controller: Any
) -> None:
    """maxParallel 1: the first node's pod cannot be scheduled, then a drain cordons the node."""
    names = sorted(nodes(3))
    first = names[0]
    api.kube.patch(f"/api/v1/nodes/{first}/status", {"status": {"capacity": {"cpu": "1"}, "allocatable": {"cpu": "1"}}})
    body = daemonjob("drained", group, sleep(1), maxParallel=1, container={"resources": {"requests": {"cpu": "2"}}})
    api.apply(body)
    stuck = wait_for(
        lambda: next((j for j in api.jobs("drained") if job_node(j) == first), None), 60, "the first node's Job"
    )
    api.patch_node(first, {"spec": {"unschedulable": True}})  # kubectl drain's cordon

    def named(dj: dict[str, Any]) -> bool:
        message = condition(dj, "Reconciling").get("message", "")
        return stuck["metadata"]["name"] in message and first in message and "cordoned" in message

    held = api.wait_status("drained", named, "Reconciling to name the Job on the cordoned node")
    status = held["status"]
    assert status["activeNodes"] == 1 and status["desiredNodes"] == 3, "the slot holder is counted, not hidden"
    assert verdict(api, "drained") == IN_PROGRESS

    api.delete_job(stuck["metadata"]["name"])  # the user acts on what the condition said
    done = api.wait_complete("drained", desired=2, timeout=90)
    assert sorted(job_node(j) for j in api.jobs("drained")) == names[1:]
    assert done["status"]["succeededNodes"] == 2
    assert verdict(api, "drained") == CURRENT


def test_a_failed_rollout_reads_as_stalled(api: Cluster, nodes: Nodes, group: str, controller: Any) -> None:
    nodes(2)
    api.apply(daemonjob("broken", group, FAIL, maxFailedNodes=0))
    failed = api.wait_status(
        "broken", lambda d: condition(d, "Stalled").get("status") == "True", "Stalled=True", timeout=90
    )
    assert condition(failed, "Stalled")["reason"] in ("FailureThresholdExceeded", "NodesFailed")
    assert condition(failed, "Reconciling")["status"] == "False"
    assert verdict(api, "broken") == FAILED


def test_a_template_node_name_does_not_pin_every_nodes_job_to_one_node(
    api: Cluster, nodes: Nodes, group: str, controller: Any
) -> None:
    names = nodes(3)
    api.apply(daemonjob("pinned", group, OK, pod_spec={"nodeName": names[1]}))
    done = api.wait_complete("pinned", desired=1)
    assert [job_node(j) for j in api.jobs("pinned")] == [names[1]]
    assert done["status"]["desiredNodes"] == 1
    pods = api.pods(api.jobs("pinned")[0]["metadata"]["name"])
    assert [p["spec"]["nodeName"] for p in pods] == [names[1]]


def test_a_blocking_quota_backs_off_names_the_quota_and_recovers(
    api: Cluster, nodes: Nodes, group: str, controller: Any
) -> None:
    """Creates refused by a ResourceQuota: a handful of probes, a condition naming the quota, and
    the rollout goes on once the quota allows it. Create calls are read from the controller's
    request counter (every answer, refusals included), so this runs against any cluster."""

    def creates() -> float:
        return (
            metric_value(controller.metrics(), "daemonjob_api_requests_total", {"verb": "create", "resource": "jobs"})
            or 0.0
        )

    nodes(4)
    quota_path = f"/api/v1/namespaces/{api.namespace}/resourcequotas"
    api.kube.create(quota_path, {"metadata": {"name": "one-job"}, "spec": {"hard": {"count/jobs.batch": "1"}}})
    wait_for(
        lambda: (api.kube.get(f"{quota_path}/one-job").get("status") or {}).get("hard"), 30, "the quota to be counted"
    )
    before = creates()
    api.apply(daemonjob("quota", group, sleep(1)))
    stalled = api.wait_status(
        "quota",
        lambda d: "exceeded quota" in condition(d, "Stalled").get("message", ""),
        "Stalled to name the quota",
        timeout=60,
    )
    assert "one-job" in condition(stalled, "Stalled")["message"]
    time.sleep(10)
    early = creates() - before
    assert 2 <= early <= 20, f"{early} create calls in the first seconds: no backoff"
    mark = creates()
    time.sleep(20)
    assert creates() - mark <= 4, "creates keep hammering a full quota"

    api.kube.delete(f"{quota_path}/one-job")
    api.kube.patch(api.dj_path("quota"), {"metadata": {"annotations": {"example.com/poke": "1"}}})
    api.wait_complete("quota", desired=4, timeout=120)


@pytest.mark.skipif(EXTERNAL, reason="the webhook listens on loopback, which only a local API server reaches")
def test_a_node_refused_by_admission_is_named_and_the_others_go_on(
    api: Cluster, nodes: Nodes, group: str, controller: Any
) -> None:
    """A validating webhook denies the Jobs of the first node in name order (the one a probe
    used to pick every time): every other node runs, Stalled and a FailedCreate Event name the
    refused node with the webhook's message, and the node runs once the webhook is removed
    (the controller retries the refused create with backoff; the test does not poke it)."""
    names = sorted(nodes(4))
    refused = names[0]
    reason = f"node {refused} is under maintenance (e2e policy)"

    def decide(request: Mapping[str, Any]) -> str | None:
        obj = request.get("object") or {}
        node = ((obj.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION_NODE)
        return reason if request.get("namespace") == api.namespace and node == refused else None

    jobs_path = path_for("batch/v1", "jobs", api.namespace)
    with ValidatingWebhook(
        api.kube, f"deny-{api.namespace}", decide, object_selector={"matchLabels": {LABEL_NAME: "refused"}}
    ) as webhook:
        webhook.wait_denies(jobs_path, probe_job("refused", refused))
        api.apply(daemonjob("refused", group, OK))
        wait_for(
            lambda: {job_node(j) for j in api.jobs("refused") if job_finished(j) == "Complete"} == set(names[1:]),
            60,
            "every other node's Job to succeed",
            describe=lambda: [(job_node(j), job_finished(j)) for j in api.jobs("refused")],
        )

        def named(dj: dict[str, Any]) -> bool:
            stalled = condition(dj, "Stalled")
            counts = (dj["status"].get("succeededNodes"), dj["status"].get("pendingNodes"))
            return (
                stalled.get("status") == "True"
                and stalled.get("reason") == "JobRejected"
                and refused in stalled.get("message", "")
                and reason in stalled.get("message", "")
                and counts == (3, 1)
            )

        api.wait_status(
            "refused", named, "Stalled JobRejected naming the refused node, the others succeeded", timeout=30
        )
        event = api.wait_event(
            "refused",
            lambda e: e.get("reason") == "FailedCreate" and refused in e.get("message", ""),
            "FailedCreate naming the node",
        )
        assert event["type"] == "Warning" and reason in event["message"]
        assert refused not in api.job_nodes("refused")
        assert {job_node(r.obj) for r in webhook.denied()} == {refused}

        webhook.unregister()
        done = api.wait_complete("refused", 4, timeout=60)
    assert sorted(api.job_nodes("refused")) == names
    assert condition(done, "Stalled").get("status") != "True", done["status"]


def probe_job(name: str, node: str) -> dict[str, Any]:
    """A valid Job that looks like one of DaemonJob `name` for `node` (created only as a dry run)."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"generateName": "probe-", "labels": {LABEL_NAME: name}, "annotations": {ANNOTATION_NODE: node}},
        "spec": {
            "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox:1.36"}]}}
        },
    }
