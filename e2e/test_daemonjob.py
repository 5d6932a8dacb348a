"""A DaemonJob end to end: Jobs on real (simulated) nodes, run by the real Job controller.

Each test has its own namespace, its own controller process and its own nodes, which its
DaemonJobs select by a label unique to the test.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from harness import (
    ANNOTATION_NODE,
    FAIL,
    GROUP_LABEL,
    GROUP_VERSION,
    LABEL_NAME,
    LABEL_REVISION,
    OK,
    Cluster,
    Nodes,
    condition,
    daemonjob,
    holds,
    is_true,
    job_finished,
    job_node,
    job_revision,
    wait_for,
    with_workload,
)

from daemonjob.testing.sim.kubelet import NodeSpec, SimKubelet


def table_row(header: str, line: str) -> dict[str, str]:
    """One row of kubectl's table output, cut at the header's column starts."""
    starts = [i for i, ch in enumerate(header) if ch != " " and (i == 0 or header[i - 1] == " ")]
    return {header[a:b].strip(): line[a:b].strip() for a, b in zip(starts, [*starts[1:], None], strict=True)}


@pytest.fixture
def long_named_node(kubelet: SimKubelet, group: str) -> Iterator[str]:
    """A long dotted node name (an FQDN, as on many clouds): with the DaemonJob's name it is
    far over the 63 characters a Job name may have. (Its hostname label caps it at 63 here.)"""
    name = f"{group}.pool-7.rack-12.eu-west-3b.compute.example.internal"[:63].rstrip(".-")
    assert len(name) > 55
    kubelet.add_nodes([NodeSpec(name, labels={GROUP_LABEL: group})])
    try:
        kubelet.wait_ready([name], timeout=60)
        yield name
    finally:
        kubelet.delete_node(name)


def test_rollout_completes_and_jobs_follow_the_contract(
    api: Cluster, nodes: Nodes, group: str, controller: Any, kubectl: Callable[..., Any], long_named_node: str
) -> None:
    """Every selected node runs one Job that the status, the Jobs themselves and kubectl agree on."""
    names = [*nodes(2), long_named_node]
    # A long name: the Job name must still fit in 63 characters.
    name = "nightly-node-inventory-and-audit-of-kernel-params"
    dj = api.apply(daemonjob(name, group, OK))

    done = api.wait_complete(name, desired=3)
    status = done["status"]
    revision = status["currentRevision"]
    assert revision
    assert {k: status[k] for k in ("desiredNodes", "succeededNodes", "activeNodes", "failedNodes", "pendingNodes")} == {
        "desiredNodes": 3,
        "succeededNodes": 3,
        "activeNodes": 0,
        "failedNodes": 0,
        "pendingNodes": 0,
    }
    assert status["observedGeneration"] == done["metadata"]["generation"]
    assert status.get("failedNodeNames", []) == []
    assert status["startTime"] and status["completionTime"] and status["completionTime"] >= status["startTime"]
    assert {c["type"]: c["status"] for c in status["conditions"]} == {
        "Complete": "True",
        "Failed": "False",
        "Reconciling": "False",
        "Stalled": "False",
    }
    assert all(
        c.get("observedGeneration", done["metadata"]["generation"]) == done["metadata"]["generation"]
        for c in status["conditions"]
    )

    jobs = api.jobs(name)
    assert sorted(job_node(j) for j in jobs) == sorted(names), "one Job per node"
    for job in jobs:
        meta, node = job["metadata"], job_node(job)
        assert len(meta["name"]) <= 63, meta["name"]
        assert meta["labels"][LABEL_NAME] == name
        assert meta["labels"][LABEL_REVISION] == revision
        assert meta["annotations"][ANNOTATION_NODE] == node
        owners = [o for o in meta.get("ownerReferences") or [] if o.get("controller")]
        assert owners == [
            {
                "apiVersion": GROUP_VERSION,
                "kind": "DaemonJob",
                "name": name,
                "uid": dj["metadata"]["uid"],
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
        spec = job["spec"]
        assert (spec["completions"], spec["parallelism"]) == (1, 1)
        affinity = spec["template"]["spec"]["affinity"]["nodeAffinity"]
        assert affinity["requiredDuringSchedulingIgnoredDuringExecution"] == {
            "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]
        }
        assert job_finished(job) == "Complete"
        pods = api.pods(meta["name"])
        assert [p["spec"]["nodeName"] for p in pods] == [node], "the pod ran on its node"
        assert pods[0]["spec"]["containers"][0]["command"] == ["sh", "-c", "echo ok"]
    # Deterministic names: the same (DaemonJob, node, revision) always maps to one name.
    assert len({j["metadata"]["name"] for j in jobs}) == 3

    lines = kubectl("get", "dj", "-n", api.namespace).stdout.splitlines()
    assert lines[0].split() == ["NAME", "DESIRED", "ACTIVE", "SUCCEEDED", "FAILED", "COMPLETE", "AGE"]
    row = table_row(lines[0], lines[1])
    assert {k: row[k] for k in ("NAME", "DESIRED", "ACTIVE", "SUCCEEDED", "FAILED", "COMPLETE")} == {
        "NAME": name,
        "DESIRED": "3",
        "ACTIVE": "0",
        "SUCCEEDED": "3",
        "FAILED": "0",
        "COMPLETE": "True",
    }
    assert row["AGE"]


def test_failing_nodes_are_listed_and_the_daemonjob_fails(
    api: Cluster, nodes: Nodes, group: str, controller: Any, kubectl: Callable[..., Any]
) -> None:
    """A node whose pod exits non-zero is a failed node, named in the status and an Event."""
    names = nodes(2)
    api.apply(daemonjob("exits-3", group, FAIL))

    dj = api.wait_status(
        "exits-3",
        lambda d: is_true(d, "Failed") and d["status"].get("failedNodes") == 2,
        "Failed=True with 2 failed nodes",
    )
    status = dj["status"]
    assert (status["desiredNodes"], status["succeededNodes"], status["activeNodes"], status["pendingNodes"]) == (
        2,
        0,
        0,
        0,
    )
    assert status["failedNodeNames"] == sorted(names)
    failed = condition(dj, "Failed")
    assert all(n in failed["message"] for n in names), failed
    assert condition(dj, "Complete")["status"] == "False"
    assert "completionTime" not in status

    for job in api.jobs("exits-3"):
        assert job_finished(job) == "Failed"
        pods = api.pods(job["metadata"]["name"])
        assert len(pods) == 1, "backoffLimit 0: one attempt"
        assert pods[0]["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 3
    api.wait_event(
        "exits-3",
        lambda e: e["type"] == "Warning" and all(n in e["message"] for n in names),
        "a Warning naming the failed nodes",
    )
    lines = kubectl("get", "dj", "exits-3", "-n", api.namespace).stdout.splitlines()
    row = table_row(lines[0], lines[1])
    assert {k: row[k] for k in ("DESIRED", "ACTIVE", "SUCCEEDED", "FAILED", "COMPLETE")} == {
        "DESIRED": "2",
        "ACTIVE": "0",
        "SUCCEEDED": "0",
        "FAILED": "2",
        "COMPLETE": "False",
    }


def test_max_failed_nodes_stops_the_rollout(api: Cluster, nodes: Nodes, group: str, controller: Any) -> None:
    """With maxFailedNodes 0 and one node at a time, the first failure stops the rollout."""
    names = nodes(3)
    api.apply(daemonjob("guarded", group, FAIL, maxParallel=1, maxFailedNodes=0))

    dj = api.wait_status(
        "guarded",
        lambda d: is_true(d, "Failed") and d["status"].get("failedNodes") == 1,
        "Failed=True after the first failure",
    )
    # The first node in name order ran; no other node starts, however long we wait.
    holds(
        lambda: api.job_nodes("guarded") == [names[0]],
        5,
        "only the first node has a Job",
        describe=lambda: api.job_nodes("guarded"),
    )
    dj = api.get("guarded")
    status = dj["status"]
    assert (status["failedNodes"], status["pendingNodes"], status["succeededNodes"], status["activeNodes"]) == (
        1,
        2,
        0,
        0,
    )
    assert status["failedNodeNames"] == [names[0]]
    failed = condition(dj, "Failed")
    assert failed["status"] == "True"
    assert "maxFailedNodes 0" in failed["message"] and names[0] in failed["message"], failed
    assert condition(dj, "Complete")["status"] == "False"
    api.wait_event(
        "guarded",
        lambda e: e["type"] == "Warning" and "maxFailedNodes 0" in e["message"],
        "a Warning naming the threshold",
    )

    # The threshold counts failures of the current revision: a fixed template starts over.
    api.apply(with_workload(api.get("guarded"), OK))
    dj = api.wait_complete("guarded", 3)
    assert condition(dj, "Failed")["status"] == "False"
    assert dj["status"]["failedNodes"] == 0 and dj["status"].get("failedNodeNames", []) == []


def test_deleting_a_nodes_job_reruns_that_node(api: Cluster, nodes: Nodes, group: str, controller: Any) -> None:
    """A user deletes one node's Job to run it there again; the other nodes are left alone."""
    names = nodes(3)
    api.apply(daemonjob("again", group, OK))
    api.wait_complete("again", 3)
    before = {job_node(j): j for j in api.jobs("again")}
    victim = before[names[1]]

    api.delete_job(victim["metadata"]["name"])

    def rerun() -> dict[str, Any] | None:
        jobs = api.jobs_by_node("again").get(names[1], [])
        fresh = [j for j in jobs if j["metadata"]["uid"] != victim["metadata"]["uid"]]
        return fresh[0] if len(jobs) == 1 and fresh and job_finished(fresh[0]) == "Complete" else None

    fresh = wait_for(rerun, 60, f"a new Job on {names[1]} to complete")
    assert fresh["metadata"]["name"] != victim["metadata"]["name"], "a deleted Job's name is never reused"
    assert fresh["metadata"]["labels"]["daemonjob.io/attempt"] == "1"
    assert job_revision(fresh) == job_revision(victim)
    api.wait_complete("again", 3)
    after = {job_node(j): j["metadata"]["uid"] for j in api.jobs("again")}
    assert after[names[0]] == before[names[0]]["metadata"]["uid"]
    assert after[names[2]] == before[names[2]]["metadata"]["uid"]


def test_deleting_the_daemonjob_garbage_collects_its_jobs(
    api: Cluster, nodes: Nodes, group: str, controller: Any
) -> None:
    """The Jobs are owned by their DaemonJob: deleting it deletes them, and nothing recreates them."""
    nodes(2)
    api.apply(daemonjob("gone", group, OK))
    api.wait_complete("gone", 2)
    job_names = [j["metadata"]["name"] for j in api.jobs("gone")]
    assert len(job_names) == 2

    api.delete("gone")
    wait_for(
        lambda: not api.jobs("gone"),
        60,
        "the Jobs to be garbage collected",
        describe=lambda: [j["metadata"]["name"] for j in api.jobs("gone")],
    )
    wait_for(lambda: all(not api.pods(n) for n in job_names), 60, "their pods to be garbage collected")
    holds(lambda: not api.jobs("gone"), 2, "no Job reappears")
    assert controller.alive()


def test_max_failed_nodes_percentage_rounds_down(api: Cluster, nodes: Nodes, group: str, controller: Any) -> None:
    """ "40%" of 3 nodes tolerates one failure (rounded down): the second failure stops the rollout."""
    names = nodes(3)
    api.apply(daemonjob("percent", group, FAIL, maxParallel=1, maxFailedNodes="40%"))

    dj = api.wait_status(
        "percent",
        lambda d: is_true(d, "Failed") and d["status"].get("failedNodes") == 2,
        "Failed=True after the second failure",
    )
    holds(
        lambda: api.job_nodes("percent") == names[:2],
        4,
        "the third node never starts",
        describe=lambda: api.job_nodes("percent"),
    )
    status = api.get("percent")["status"]
    assert (status["failedNodes"], status["pendingNodes"]) == (2, 1)
    assert status["failedNodeNames"] == names[:2]
    assert "maxFailedNodes" in condition(dj, "Failed")["message"] and "40%" in condition(dj, "Failed")["message"]
