"""Adoption, as the DaemonSet controller's ControllerRefManager does it: orphans come back,
Jobs of others are never touched and a name clash is reported, not waited on in silence."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from harness import (
    GROUP_VERSION,
    OK,
    Cluster,
    Nodes,
    condition,
    daemonjob,
    job_node,
    sleep,
    wait_for,
)


def owner_uids(job: dict[str, Any]) -> list[str]:
    return [o["uid"] for o in job["metadata"].get("ownerReferences") or [] if o.get("controller")]


def test_orphan_delete_and_reapply_adopts_the_jobs_and_converges(
    api: Cluster, nodes: Nodes, group: str, controller: Any, kubectl: Callable[..., Any]
) -> None:
    """`kubectl delete --cascade=orphan`, then the same DaemonJob again (a GitOps recreate)."""
    names = nodes(3)
    body = daemonjob("recreated", group, sleep(2), maxParallel=1)
    api.apply(body)
    # Started: kube-controller-manager has seen the Job. Its garbage collector orphans only the
    # dependents it knows of; one it learns of after the owner is gone has a dangling owner
    # reference and is deleted, so an orphaning delete right after the create can lose the Job.
    wait_for(
        lambda: any((j.get("status") or {}).get("startTime") for j in api.jobs("recreated")),
        60,
        "the first Job to start",
    )
    kubectl("-n", api.namespace, "delete", "dj", "recreated", "--cascade=orphan", "--wait=true")
    orphans = wait_for(
        lambda: (jobs := api.jobs("recreated")) and all(not owner_uids(j) for j in jobs) and jobs,
        60,
        "the Jobs to lose their owner",
    )
    assert orphans

    dj = api.apply(body)
    uid = dj["metadata"]["uid"]
    done = api.wait_complete("recreated", desired=3, timeout=120)
    assert done["status"]["succeededNodes"] == 3
    jobs = api.jobs("recreated")
    assert sorted(job_node(j) for j in jobs) == sorted(names), "one Job per node, none duplicated"
    assert all(owner_uids(j) == [uid] for j in jobs), "every Job adopted by the new DaemonJob"
    for orphan in orphans:  # the orphans were adopted in place, not replaced
        assert orphan["metadata"]["uid"] in {j["metadata"]["uid"] for j in jobs}


def test_adoption_keeps_the_other_owners_of_a_job(
    api: Cluster, nodes: Nodes, group: str, controller: Any, kubectl: Callable[..., Any]
) -> None:
    """An orphan that also belongs to a ConfigMap (not as controller) keeps that owner when adopted."""
    nodes(2)
    body = daemonjob("shared", group, OK)
    api.apply(body)
    api.wait_complete("shared", desired=2, timeout=120)
    kubectl("-n", api.namespace, "delete", "dj", "shared", "--cascade=orphan", "--wait=true")
    orphans = wait_for(
        lambda: (jobs := api.jobs("shared")) and all(not owner_uids(j) for j in jobs) and jobs,
        60,
        "the Jobs to lose their owner",
    )
    keeper = api.kube.create(f"/api/v1/namespaces/{api.namespace}/configmaps", {"metadata": {"name": "keeper"}})
    other = {"apiVersion": "v1", "kind": "ConfigMap", "name": "keeper", "uid": keeper["metadata"]["uid"]}
    job_path = f"/apis/batch/v1/namespaces/{api.namespace}/jobs/{orphans[0]['metadata']['name']}"
    api.kube.patch(job_path, {"metadata": {"ownerReferences": [other]}})

    dj = api.apply(body)
    wait_for(
        lambda: all(owner_uids(j) == [dj["metadata"]["uid"]] for j in api.jobs("shared")),
        60,
        "the orphans to be adopted",
    )
    refs = api.kube.get(job_path)["metadata"]["ownerReferences"]
    assert sorted((r["kind"], r["uid"], bool(r.get("controller"))) for r in refs) == sorted(
        [("ConfigMap", other["uid"], False), ("DaemonJob", dj["metadata"]["uid"], True)]
    )
    assert api.wait_complete("shared", desired=2, timeout=60)["status"]["succeededNodes"] == 2


def test_a_job_that_lost_its_name_label_is_claimed_back(
    api: Cluster, nodes: Nodes, group: str, controller: Any
) -> None:
    """The Job cache selects on daemonjob.io/name: a Job of ours without it must not stall the DaemonJob."""
    nodes(3)
    api.apply(daemonjob("unlabelled", group, OK, maxParallel=1))
    api.wait_complete("unlabelled", desired=3, timeout=120)
    job = api.jobs("unlabelled")[0]
    name = job["metadata"]["name"]
    api.kube.patch(
        f"/apis/batch/v1/namespaces/{api.namespace}/jobs/{name}", {"metadata": {"labels": {"daemonjob.io/name": None}}}
    )
    event = api.wait_event("unlabelled", lambda e: e.get("reason") == "JobRelabelled", "the JobRelabelled Event")
    assert name in event["message"]

    def relabelled() -> dict[str, Any] | None:
        j = api.kube.get(f"/apis/batch/v1/namespaces/{api.namespace}/jobs/{name}")
        return j if j["metadata"]["labels"].get("daemonjob.io/name") == "unlabelled" else None

    back = wait_for(relabelled, 30, "the label back")
    assert back["metadata"]["uid"] == job["metadata"]["uid"]  # the same Job: the node did not run again
    done = api.wait_complete("unlabelled", desired=3, timeout=60)
    assert done["status"]["succeededNodes"] == 3 and len(api.jobs("unlabelled")) == 3


def test_a_job_name_held_by_another_owner_is_reported_and_other_nodes_go_on(
    api: Cluster, nodes: Nodes, group: str, controller: Any
) -> None:
    names = nodes(2)
    body = daemonjob("clash", group, OK)
    dj = api.apply(body)
    # Learn the deterministic name of the first node's Job, then take that name first.
    first = wait_for(
        lambda: next((j for j in api.jobs("clash") if job_node(j) == names[0]), None), 60, "the Job of the first node"
    )
    api.delete("clash")
    wait_for(lambda: not api.jobs("clash"), 60, "the garbage collector to remove the Jobs")
    holder = api.kube.create(f"/api/v1/namespaces/{api.namespace}/configmaps", {"metadata": {"name": "holder"}})
    taken = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": first["metadata"]["name"],
            "ownerReferences": [
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "name": "holder",
                    "uid": holder["metadata"]["uid"],
                    "controller": True,
                }
            ],
        },
        "spec": first["spec"]
        | {
            "selector": None,
            "manualSelector": None,
            "template": {
                **first["spec"]["template"],
                "metadata": {"annotations": first["spec"]["template"]["metadata"].get("annotations", {})},
            },
        },
    }
    api.kube.create(f"/apis/batch/v1/namespaces/{api.namespace}/jobs", taken)

    dj = api.apply(body)
    stalled = api.wait_status(
        "clash", lambda d: condition(d, "Stalled").get("reason") == "JobConflict", "Stalled=JobConflict"
    )
    message = condition(stalled, "Stalled")["message"]
    assert first["metadata"]["name"] in message and "ConfigMap/holder" in message
    wait_for(lambda: any(job_node(j) == names[1] for j in api.jobs("clash")), 60, "the other node's Job")
    event = api.wait_event("clash", lambda e: e["reason"] == "JobConflict", "a JobConflict Event")
    assert first["metadata"]["name"] in event["message"]
    kept = api.kube.get(f"/apis/batch/v1/namespaces/{api.namespace}/jobs/{first['metadata']['name']}")
    assert [o["kind"] for o in kept["metadata"]["ownerReferences"]] == ["ConfigMap"], "never touched"
    assert dj["apiVersion"] == GROUP_VERSION
