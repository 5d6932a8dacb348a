"""Jobs that reboot their node (spec.nodeMaintenance.reboot: Expected) and the health check
after each node (spec.healthCheck), against the API server: the simulated kubelet reboots a
node when its Job's pod asks (a new boot ID, NotReady meanwhile, its pods killed).

Counts come from the API server: a Node watch (boot ID changes, the most nodes down at once,
cordons and uncordons and the node's state at each) and a Job watch (Jobs per node)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from harness import (
    EXTERNAL,
    GROUP_LABEL,
    IMAGE,
    SIM_DURATION,
    Cluster,
    JobWatcher,
    Nodes,
    condition,
    daemonjob,
    sleep,
    wait_for,
)

from daemonjob.domain.gates.health import NODE_NOT_BACK, NODE_UNHEALTHY, WAITING_FOR_NODE_HEALTH
from daemonjob.domain.shared.noderecord import ANNOTATION_MAINTENANCE
from daemonjob.machinery.client.kube import Kube, path_for
from daemonjob.testing.sim.nodewatch import NodeWatcher
from daemonjob.testing.sim.simpod import ANNOTATION_READY
from daemonjob.testing.sim.simreboot import ANNOTATION_REBOOT, ANNOTATION_STAY_DOWN_ON, ANNOTATION_UNREADY_AFTER_REBOOT

pytestmark = pytest.mark.skipif(EXTERNAL, reason="needs the simulated kubelet to reboot nodes")

RBAC = Path(__file__).resolve().parents[1] / "manifests" / "node-maintenance" / "rbac.yaml"


@pytest.fixture(scope="session")
def maintenance_rbac(kubectl: Callable[..., Any], sa_kubeconfig: Any) -> None:
    kubectl("apply", "-f", str(RBAC))


@pytest.fixture
def allowed_controller(spawn_controller: Callable[..., Any], namespace: str, maintenance_rbac: None) -> Any:
    return spawn_controller(extra_args=[f"--node-maintenance-namespaces={namespace}"])


@pytest.fixture
def watch(kube: Kube, group: str) -> Iterator[NodeWatcher]:
    with NodeWatcher(kube, f"{GROUP_LABEL}={group}") as watcher:
        yield watcher


def _rebooting(
    name: str,
    group: str,
    down: str = "6s",
    *,
    stay_down_on: str = "",
    health: dict[str, Any] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    """A DaemonJob whose Job reboots its node (down for `down`), one node at a time, cordoned and drained."""
    body = daemonjob(name, group, sleep(1), maxParallel=1, **spec)
    annotations = body["spec"]["jobTemplate"]["spec"]["template"]["metadata"]["annotations"]
    annotations[ANNOTATION_REBOOT] = down
    if stay_down_on:
        annotations[ANNOTATION_STAY_DOWN_ON] = stay_down_on
    body["spec"]["nodeMaintenance"] = {
        "cordon": True,
        "drain": {"timeout": "2m"},
        "reboot": "Expected",
        "rebootTimeout": "60s",
        **spec.pop("maintenance", {}),
    }
    body["spec"]["healthCheck"] = health or {"timeout": "1m", "settle": "2s"}
    return body


def _released(api: Cluster, node: str) -> bool:
    obj = api.node(node)
    return not obj["spec"].get("unschedulable") and ANNOTATION_MAINTENANCE not in (
        obj["metadata"].get("annotations") or {}
    )


def _pods_per_job(api: Cluster, name: str) -> dict[str, int]:
    return {j["metadata"]["name"]: len(api.pods(j["metadata"]["name"])) for j in api.jobs(name)}


def test_each_node_rebooted_once_one_at_a_time_and_uncordoned_only_when_back(
    api: Cluster, nodes: Nodes, group: str, allowed_controller: Any, watch: NodeWatcher
) -> None:
    names = nodes(4)
    jobs = JobWatcher(api.kube, api.namespace, "kernel").start()
    api.apply(_rebooting("kernel", group))
    dj = api.wait_complete("kernel", 4, timeout=300)
    assert dj["status"]["succeededNodes"] == 4 and dj["status"]["failedNodes"] == 0
    wait_for(lambda: all(_released(api, n) for n in names), what="every node released")
    jobs.stop()
    assert dict(watch.boots) == {n: 1 for n in names}, watch.summary()  # each rebooted exactly once
    assert watch.max_down == 1, watch.summary()  # never two nodes down at once
    assert watch.uncordoned_not_ready == [] and watch.uncordoned_not_rebooted == [], watch.summary()
    assert all(watch.cordons[n] == 1 and watch.uncordons[n] == 1 for n in names), watch.summary()
    assert all(len(uids) == 1 for uids in jobs.uids_per_node_revision().values()), jobs.summary()
    assert set(_pods_per_job(api, "kernel").values()) == {1}  # no pod re-created after a reboot
    spec = api.jobs("kernel")[0]["spec"]  # as the API server keeps it (1.20 drops podFailurePolicy)
    assert spec["backoffLimit"] == 0
    stay = {(t["key"], t.get("effect")) for t in spec["template"]["spec"]["tolerations"]}
    assert ("node.kubernetes.io/unreachable", "NoExecute") in stay and (
        "node.kubernetes.io/not-ready",
        "NoExecute",
    ) in stay


def test_a_node_that_never_comes_back_fails_named_and_the_rollout_stops(
    api: Cluster, nodes: Nodes, group: str, allowed_controller: Any, watch: NodeWatcher
) -> None:
    names = nodes(3)
    first = names[0]
    body = _rebooting("kernel", group, stay_down_on=first, maxFailedNodes=0, maintenance={"keepFailedCordoned": True})
    body["spec"]["nodeMaintenance"]["rebootTimeout"] = "20s"
    api.apply(body)

    def waiting_for_the_reboot(dj: dict[str, Any]) -> bool:
        cond = condition(dj, "Reconciling")
        return cond.get("reason") == WAITING_FOR_NODE_HEALTH and f"node {first} to reboot" in cond.get("message", "")

    api.wait_status("kernel", waiting_for_the_reboot, "Reconciling naming the node's reboot", timeout=120)
    assert api.job_nodes("kernel") == [first]
    event = api.wait_event("kernel", lambda e: e.get("reason") == NODE_NOT_BACK, "NodeNotBackAfterReboot", 120)
    assert f"node {first} did not come back" in event["message"]
    dj = api.wait_status("kernel", lambda d: (d.get("status") or {}).get("failedNodes") == 1, "the node failed")
    assert dj["status"]["failedNodeNames"] == [first]
    failed = api.wait_status("kernel", lambda d: condition(d, "Failed").get("status") == "True", "Failed")
    assert first in condition(failed, "Failed")["message"]
    # the failure budget holds: no other node starts, the failed node stays cordoned as asked
    assert api.job_nodes("kernel") == [first]
    node = api.node(first)
    assert node["spec"].get("unschedulable") and ANNOTATION_MAINTENANCE in node["metadata"]["annotations"]
    assert watch.cordons[first] == 1 and not watch.uncordons[first]
    assert not any(watch.cordons[n] for n in names[1:])


def _daemon_set(api: Cluster, name: str, group: str, annotation: str = ANNOTATION_UNREADY_AFTER_REBOOT) -> None:
    """A DaemonSet on the group's nodes whose pod is not Ready again after a reboot (or, with
    ANNOTATION_READY, never)."""
    labels = {"app": name}
    api.kube.create(
        path_for("apps/v1", "daemonsets", api.namespace),
        {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": {"name": name},
            "spec": {
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {
                        "labels": labels,
                        "annotations": {
                            SIM_DURATION: "36000",
                            annotation: "false" if annotation == ANNOTATION_READY else "true",
                        },
                    },
                    "spec": {
                        "nodeSelector": {GROUP_LABEL: group},
                        "containers": [{"name": "agent", "image": IMAGE, "command": ["sleep", "36000"]}],
                        "terminationGracePeriodSeconds": 1,
                    },
                },
            },
        },
    )


def test_a_daemonset_pod_not_ready_after_the_reboot_holds_the_next_node_then_fails_the_node(
    api: Cluster, nodes: Nodes, group: str, allowed_controller: Any, watch: NodeWatcher
) -> None:
    names = nodes(2)
    first = names[0]
    _daemon_set(api, "agent", group)

    def agents_ready() -> bool:
        pods = api.kube.get(path_for("v1", "pods", api.namespace), labelSelector="app=agent")["items"]
        ready = [
            p
            for p in pods
            if any(c["type"] == "Ready" and c["status"] == "True" for c in p["status"].get("conditions") or ())
        ]
        return len(ready) == 2

    wait_for(agents_ready, what="the DaemonSet's pods Ready")
    health = {"timeout": "25s", "settle": "2s", "daemonSets": [f"{api.namespace}/agent"]}
    api.apply(_rebooting("kernel", group, health=health, maxFailedNodes=0))

    def waiting_on_the_agent(dj: dict[str, Any]) -> dict[str, Any] | None:
        cond = condition(dj, "Reconciling")
        if cond and cond.get("reason") == WAITING_FOR_NODE_HEALTH and "not Ready" in (cond.get("message") or ""):
            return cond
        return None

    dj = api.wait_status("kernel", waiting_on_the_agent, "the next node waiting for the agent", timeout=120)
    cond = condition(dj, "Reconciling")
    assert f"node {first}" in cond["message"] and f"DaemonSet {api.namespace}/agent" in cond["message"]
    assert watch.boots[first] == 1 and api.job_nodes("kernel") == [first]  # the next node waits
    assert api.node(first)["spec"].get("unschedulable")  # not released while unhealthy
    event = api.wait_event("kernel", lambda e: e.get("reason") == NODE_UNHEALTHY, "NodeUnhealthyAfterJob", 90)
    assert f"node {first} not healthy" in event["message"] and "agent" in event["message"]
    dj = api.wait_status("kernel", lambda d: (d.get("status") or {}).get("failedNodes") == 1, "the node failed")
    assert dj["status"]["failedNodeNames"] == [first]
    assert api.job_nodes("kernel") == [first]  # maxFailedNodes 0: the rollout stops there
    wait_for(lambda: _released(api, first), what="the failed node uncordoned (keepFailedCordoned false)")


def test_a_controller_killed_while_a_node_is_down_neither_reruns_its_job_nor_releases_it_early(
    api: Cluster, nodes: Nodes, group: str, allowed_controller: Any, watch: NodeWatcher
) -> None:
    names = nodes(2)
    first = names[0]
    jobs = JobWatcher(api.kube, api.namespace, "kernel").start()
    # down longer than the successor takes to lead (the harness's 8 s lease, start-up, a margin)
    api.apply(_rebooting("kernel", group, down="22s"))

    def down() -> bool:
        ready = [c for c in api.node(first)["status"]["conditions"] if c["type"] == "Ready"]
        return bool(ready) and ready[0]["status"] != "True"

    wait_for(down, timeout=120, what="the first node down")
    allowed_controller.kill()
    allowed_controller.start()
    api.wait_complete("kernel", 2, timeout=300)
    wait_for(lambda: all(_released(api, n) for n in names), what="every node released")
    jobs.stop()
    assert dict(watch.boots) == {n: 1 for n in names}, watch.summary()
    assert watch.uncordoned_not_ready == [] and watch.uncordoned_not_rebooted == [], watch.summary()
    assert watch.uncordons[first] == 1, watch.summary()
    assert all(len(uids) == 1 for uids in jobs.uids_per_node_revision().values()), jobs.summary()
    assert set(_pods_per_job(api, "kernel").values()) == {1}


def test_the_health_check_holds_a_daemonjob_without_node_maintenance(
    api: Cluster, nodes: Nodes, group: str, allowed_controller: Any
) -> None:
    """No cordon, no reboot: a node whose Job succeeded but whose agent is not Ready holds the
    next node back, then fails at the timeout (pods read without a cluster-wide pod watch)."""
    first, second = nodes(2)
    _daemon_set(api, "agent", group, ANNOTATION_READY)  # its pods run, never Ready
    body = daemonjob("config", group, sleep(1), maxParallel=1, maxFailedNodes=0)
    body["spec"]["healthCheck"] = {"timeout": "20s", "settle": "2s", "daemonSets": [f"{api.namespace}/agent"]}
    api.apply(body)

    def waiting(dj: dict[str, Any]) -> bool:
        cond = condition(dj, "Reconciling")
        return cond.get("reason") == WAITING_FOR_NODE_HEALTH and f"node {first}" in cond.get("message", "")

    api.wait_status("config", waiting, "the next node waiting for the first node's agent", timeout=120)
    assert api.job_nodes("config") == [first]
    event = api.wait_event("config", lambda e: e.get("reason") == NODE_UNHEALTHY, "NodeUnhealthyAfterJob", 90)
    assert f"node {first} not healthy" in event["message"] and "agent" in event["message"]
    dj = api.wait_status("config", lambda d: (d.get("status") or {}).get("failedNodes") == 1, "the node failed")
    assert dj["status"]["failedNodeNames"] == [first] and api.job_nodes("config") == [first]
    assert second not in api.job_nodes("config")
