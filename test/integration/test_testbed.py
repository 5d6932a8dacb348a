"""The test bed itself, against the real control plane and the simulated kubelet."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from daemonjob.machinery.cache.informer import Handlers, Informer
from daemonjob.machinery.client.kube import ApiError, Kube, path_for
from daemonjob.testing.sim.jobcontroller import SimJobController
from daemonjob.testing.sim.kubelet import (
    ANNOTATION_DURATION,
    ANNOTATION_EXIT_CODE,
    SimKubelet,
)
from daemonjob.testing.waiting import wait_for


def pin(node: str) -> dict[str, Any]:
    """Required node affinity naming one node, as the DaemonSet and DaemonJob controllers write it."""
    term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}


def pinned_job(name: str, node: str, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "backoffLimit": 0,
            "template": {
                "metadata": {"annotations": annotations or {}},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "main", "image": "busybox"}],
                    "affinity": pin(node),
                },
            },
        },
    }


def phase(pod: Mapping[str, Any]) -> str:
    return (pod.get("status") or {}).get("phase") or ""


def job_condition(kube: Kube, ns: str, name: str) -> str | None:
    job = kube.get(path_for("batch/v1", "jobs", ns, name))
    for cond in job.get("status", {}).get("conditions") or []:
        if cond["status"] == "True" and cond["type"] in ("Complete", "Failed"):
            return cond["type"]
    return None


def test_pinned_job_completes_on_its_node(kube: Kube, namespace: str, make_nodes) -> None:
    nodes = make_nodes(2)
    kube.create(path_for("batch/v1", "jobs", namespace), pinned_job("pinned", nodes[1]))
    assert wait_for(lambda: job_condition(kube, namespace, "pinned"), what="Job finished") == "Complete"
    pods = kube.get(path_for("v1", "pods", namespace), labelSelector="job-name=pinned")["items"]
    assert [p["spec"]["nodeName"] for p in pods] == [nodes[1]]
    status = pods[0]["status"]
    assert status["phase"] == "Succeeded"
    assert status["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 0


def test_exit_code_annotation_fails_the_job(kube: Kube, namespace: str, make_nodes) -> None:
    node = make_nodes(1)[0]
    kube.create(path_for("batch/v1", "jobs", namespace), pinned_job("fails", node, {ANNOTATION_EXIT_CODE: "3"}))
    assert wait_for(lambda: job_condition(kube, namespace, "fails"), what="Job finished") == "Failed"
    pod = kube.get(path_for("v1", "pods", namespace), labelSelector="job-name=fails")["items"][0]
    assert pod["status"]["phase"] == "Failed"
    assert pod["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 3


def test_daemonset_gets_a_pod_on_each_simulated_node(kube: Kube, namespace: str, make_nodes) -> None:
    label = f"ds-{namespace}"
    nodes = make_nodes(4, labels={"testbed": label})
    ds = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "every"},
        "spec": {
            "selector": {"matchLabels": {"app": "every"}},
            "template": {
                "metadata": {"labels": {"app": "every"}, "annotations": {"sim.daemonjob.io/duration": "3600"}},
                "spec": {"nodeSelector": {"testbed": label}, "containers": [{"name": "main", "image": "busybox"}]},
            },
        },
    }
    kube.create(path_for("apps/v1", "daemonsets", namespace), ds)

    def placed() -> list[str]:
        pods = kube.get(path_for("v1", "pods", namespace), labelSelector="app=every")["items"]
        return sorted(p["spec"].get("nodeName") or "" for p in pods if p.get("status", {}).get("phase") == "Running")

    assert wait_for(lambda: placed() == sorted(nodes) and placed(), what="a running pod per node") == sorted(nodes)


def test_silent_node_turns_not_ready_and_gets_tainted(kube: Kube, kubelet: SimKubelet, make_nodes) -> None:
    node = make_nodes(1)[0]
    kubelet.stop_heartbeat(node)

    def unhealthy() -> bool:
        obj = kube.get(path_for("v1", "nodes", name=node))
        ready = [c for c in obj["status"]["conditions"] if c["type"] == "Ready"][0]
        keys = {t["key"] for t in obj["spec"].get("taints") or []}
        return ready["status"] != "True" and bool(
            keys & {"node.kubernetes.io/unreachable", "node.kubernetes.io/not-ready"}
        )

    wait_for(unhealthy, timeout=60, what="NotReady + taint")
    kubelet.resume_heartbeat(node)
    kubelet.wait_ready([node], timeout=60)


def test_owner_deletion_cascades(kube: Kube, namespace: str) -> None:
    owner = kube.create(path_for("v1", "configmaps", namespace), {"metadata": {"name": "owner"}})
    ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner["metadata"]["uid"]}
    kube.create(path_for("v1", "configmaps", namespace), {"metadata": {"name": "child", "ownerReferences": [ref]}})
    kube.delete(path_for("v1", "configmaps", namespace, "owner"))

    def child_gone() -> bool:
        try:
            kube.get(path_for("v1", "configmaps", namespace, "child"))
        except ApiError as exc:
            return exc.not_found
        return False

    wait_for(child_gone, timeout=30, what="garbage collection of the child")


def test_apiserver_restarts_in_place(cluster, kube: Kube) -> None:
    cluster.stop_apiserver()
    try:
        kube.get("/version")
        raise AssertionError("apiserver answered while stopped")
    except Exception as exc:  # connection refused
        assert not isinstance(exc, AssertionError)
    cluster.start_apiserver()
    assert kube.get("/version")["gitVersion"] == "v1.20.2"


def test_a_beating_node_reports_ready_again(kube: Kube, make_nodes) -> None:
    """After a late beat marks it Unknown, the simulated kubelet's status report restores Ready."""
    from daemonjob.testing.sim.kubelet import node_is_ready

    node = make_nodes(1)[0]
    unknown = [{"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown", "message": "late"}]
    kube.patch(
        path_for("v1", "nodes", name=node, subresource="status"),
        {"status": {"conditions": unknown}},
        content_type="application/strategic-merge-patch+json",
    )
    assert not node_is_ready(kube.get(path_for("v1", "nodes", name=node)))
    wait_for(lambda: node_is_ready(kube.get(path_for("v1", "nodes", name=node))), timeout=40, what="Ready again")


def test_zero_duration_pod_goes_straight_to_its_end(kube: Kube, namespace: str, make_nodes) -> None:
    """Duration 0: one status write from Pending to Succeeded, never Running; the Job counts it."""
    node = make_nodes(1)[0]
    phases: list[str] = []
    pods = Informer(kube, "v1", "pods", namespace=namespace, name="phases")
    pods.add_handlers(
        Handlers(on_add=lambda p: phases.append(phase(p)), on_update=lambda _o, p: phases.append(phase(p)))
    )
    pods.start()
    try:
        assert pods.wait_for_sync(30)
        kube.create(path_for("batch/v1", "jobs", namespace), pinned_job("instant", node, {ANNOTATION_DURATION: "0"}))
        assert wait_for(lambda: job_condition(kube, namespace, "instant"), what="Job finished") == "Complete"
    finally:
        pods.stop()
    assert "Succeeded" in phases and "Running" not in phases, phases
    assert kube.get(path_for("batch/v1", "jobs", namespace, "instant"))["status"].get("succeeded") == 1
    pod = kube.get(path_for("v1", "pods", namespace), labelSelector="job-name=instant")["items"][0]
    assert pod["status"]["startTime"]
    assert pod["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 0


def test_simulated_job_controller_ends_jobs_without_pods(kube: Kube, namespace: str) -> None:
    """Parallelism 0 keeps the real Job controller from making pods, so only the stand-in acts."""
    tag = namespace  # unique per test: the stand-in watches only these Jobs

    def job(name: str, annotations: dict[str, str]) -> dict[str, Any]:
        body = pinned_job(name, "nowhere", {ANNOTATION_DURATION: "0", **annotations})
        body["metadata"]["labels"] = {"sim-job": tag}
        body["spec"]["parallelism"] = 0
        return body

    with SimJobController(kube, label_selector=f"sim-job={tag}"):
        kube.create(path_for("batch/v1", "jobs", namespace), job("ok", {}))
        kube.create(path_for("batch/v1", "jobs", namespace), job("bad", {ANNOTATION_EXIT_CODE: "3"}))
        assert wait_for(lambda: job_condition(kube, namespace, "ok"), what="ok finished") == "Complete"
        assert wait_for(lambda: job_condition(kube, namespace, "bad"), what="bad finished") == "Failed"
    ok = kube.get(path_for("batch/v1", "jobs", namespace, "ok"))["status"]
    assert ok["succeeded"] == 1 and ok["completionTime"] and ok["startTime"]
    bad = kube.get(path_for("batch/v1", "jobs", namespace, "bad"))["status"]
    assert bad["failed"] == 1 and "completionTime" not in bad
    assert kube.get(path_for("v1", "pods", namespace))["items"] == []


def test_a_pod_reboots_its_node(kube: Kube, kubelet: SimKubelet, make_nodes, namespace: str) -> None:
    """sim.daemonjob.io/reboot: the node goes NotReady, its Never pod fails as a restarted
    kubelet fails it, and the node comes back Ready with a new boot ID, once."""
    from daemonjob.testing.sim.simreboot import ANNOTATION_REBOOT, LOST_REASON

    node = make_nodes(1)[0]
    boot_before = kube.get(path_for("v1", "nodes", name=node))["status"]["nodeInfo"]["bootID"]
    assert boot_before
    job = pinned_job("rebooter", node, {ANNOTATION_DURATION: "0.5", ANNOTATION_REBOOT: "6s"})
    kube.create(path_for("batch/v1", "jobs", namespace), job)

    def ready() -> str:
        obj = kube.get(path_for("v1", "nodes", name=node))
        return [c for c in obj["status"]["conditions"] if c["type"] == "Ready"][0]["status"]

    wait_for(lambda: ready() == "Unknown", timeout=30, what="the node down")
    assert kube.get(path_for("v1", "nodes", name=node))["status"]["nodeInfo"]["bootID"] == boot_before
    kubelet.wait_ready([node], timeout=60)
    assert kube.get(path_for("v1", "nodes", name=node))["status"]["nodeInfo"]["bootID"] != boot_before
    assert kubelet.reboots[node] == 1

    def lost() -> list[str]:
        pods = kube.get(path_for("v1", "pods", namespace), labelSelector="job-name=rebooter")["items"]
        return [
            p["status"]["containerStatuses"][0]["state"]["terminated"]["reason"]
            for p in pods
            if p["status"].get("phase") == "Failed"
        ]

    assert wait_for(lost, timeout=30, what="the pod failed by the restarted kubelet") == [LOST_REASON]
