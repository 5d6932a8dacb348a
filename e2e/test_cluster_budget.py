"""The cluster-wide limit on nodes out of service (--max-unavailable-nodes, --protected-node-selector)
against the API server: nodes cordoned by someone else and NotReady nodes counted, a waiting
DaemonJob woken by a node coming back, two DaemonJobs of two namespaces never past the limit
together, the last Ready protected node never cordoned.

What is counted comes from the API server (a Node watch), never from the controller under
test. The limit is a count above the nodes the cluster has out of service when the test
starts, so what other nodes it holds does not change the verdict."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from harness import (
    EXTERNAL,
    GROUP_LABEL,
    Cluster,
    Nodes,
    condition,
    daemonjob,
    metric_value,
    sleep,
    wait_for,
)

from daemonjob.domain.nodework.disruption import out_of_service
from daemonjob.machinery.client.kube import ApiError, Kube, path_for
from daemonjob.testing.sim.kubelet import SimKubelet
from daemonjob.testing.sim.nodewatch import NodeWatcher

pytestmark = pytest.mark.skipif(EXTERNAL, reason="sets the flags of a controller of its own")

RBAC = Path(__file__).resolve().parents[1] / "manifests" / "node-maintenance" / "rbac.yaml"
BUDGET = "ClusterDisruptionBudget"
UNREACHABLE = "node.kubernetes.io/unreachable"


@pytest.fixture(scope="session")
def maintenance_rbac(kubectl: Callable[..., Any], sa_kubeconfig: Any) -> None:
    kubectl("apply", "-f", str(RBAC))


@pytest.fixture
def watch(kube: Kube, group: str) -> Iterator[NodeWatcher]:
    with NodeWatcher(kube, f"{GROUP_LABEL}={group}") as watcher:
        yield watcher


def _out_of_service_now(kube: Kube) -> int:
    """Nodes of the whole cluster unschedulable or NotReady, as the API server has them."""
    return sum(1 for n in kube.get(path_for("v1", "nodes"))["items"] if out_of_service(n))


def _maintained(name: str, group: str, seconds: int = 3, **spec: Any) -> dict[str, Any]:
    body = daemonjob(name, group, sleep(seconds), **spec)
    body["spec"]["nodeMaintenance"] = {"cordon": True}
    return body


def _budget_wait(dj: dict[str, Any]) -> str | None:
    cond = condition(dj, "Reconciling")
    return cond.get("message") if cond.get("reason") == BUDGET else None


def test_nodes_cordoned_by_someone_else_and_notready_nodes_hold_the_rollout_until_one_is_uncordoned(
    api: Cluster,
    nodes: Nodes,
    make_nodes: Callable[..., list[str]],
    group: str,
    kubelet: SimKubelet,
    spawn_controller: Callable[..., Any],
    maintenance_rbac: None,
    watch: NodeWatcher,
) -> None:
    (elsewhere,) = make_nodes(1)  # not one the DaemonJob selects: only the limit ties them
    lost, first, second = nodes(3)
    api.patch_node(elsewhere, {"spec": {"unschedulable": True}})  # kubectl cordon, by a person
    kubelet.stop_heartbeat(lost)  # the node lifecycle controller marks it NotReady
    wait_for(
        lambda: any(t.get("key") == UNREACHABLE for t in api.node(lost)["spec"].get("taints") or []),
        90,
        f"{lost} marked unreachable",
    )
    out = _out_of_service_now(api.kube)  # these two, and whatever else the cluster has out now
    total = len(api.kube.get(path_for("v1", "nodes"))["items"])
    controller = spawn_controller(
        extra_args=[f"--node-maintenance-namespaces={api.namespace}", f"--max-unavailable-nodes={out}"]
    )
    api.apply(_maintained("held", group, maxParallel=2))
    dj = api.wait_status("held", _budget_wait, "Reconciling ClusterDisruptionBudget")
    assert f"{out} of {total} nodes unavailable, limit {out}" in _budget_wait(dj), _budget_wait(dj)
    assert dj["status"].get("desiredNodes") == 2, dj["status"]
    text = controller.metrics()
    assert metric_value(text, "daemonjob_cluster_unavailable_nodes") == out
    assert metric_value(text, "daemonjob_cluster_unavailable_nodes_limit") == out
    assert metric_value(text, "daemonjob_rollout_gate", {"name": "held", "gate": "clusterDisruptionBudget"}) == 1
    assert api.jobs("held") == [] and sum(watch.cordons.values()) == 0, watch.summary()

    # Someone uncordons their node, one the DaemonJob does not select: the Node event wakes it
    # (no resync in the test's time), one node goes at a time (the NotReady one still counts).
    api.patch_node(elsewhere, {"spec": {"unschedulable": None}})
    api.wait_complete("held", 2, timeout=120)
    assert watch.max_held == 1, watch.summary()
    assert watch.cordons[first] == watch.cordons[second] == 1 and watch.cordons[lost] == 0, watch.summary()
    wait_for(lambda: not any(api.node(n)["spec"].get("unschedulable") for n in (first, second)), 30)
    kubelet.resume_heartbeat(lost)


def test_two_daemonjobs_in_two_namespaces_together_never_exceed_the_limit(
    api: Cluster,
    kube: Kube,
    nodes: Nodes,
    group: str,
    spawn_controller: Callable[..., Any],
    maintenance_rbac: None,
    watch: NodeWatcher,
) -> None:
    other = Cluster(kube, f"t-{uuid.uuid4().hex[:8]}")
    kube.create(
        path_for("v1", "namespaces"), {"metadata": {"name": other.namespace, "labels": {"daemonjob.io/test": "true"}}}
    )
    try:
        nodes(4, labels={"budget": "one"})
        nodes(4, labels={"budget": "two"})
        limit = _out_of_service_now(kube) + 2
        spawn_controller(
            extra_args=[
                "--namespace=",  # every namespace: one controller for both DaemonJobs
                f"--node-maintenance-namespaces={api.namespace},{other.namespace}",
                f"--max-unavailable-nodes={limit}",
                "--workers=4",
            ]
        )
        for cluster, sub in ((api, "one"), (other, "two")):
            selector = {"matchLabels": {GROUP_LABEL: group, "budget": sub}}
            cluster.apply(_maintained(f"dj-{sub}", group, 2, maxParallel=4, node_selector=selector))
        api.wait_complete("dj-one", 4, timeout=180)
        other.wait_complete("dj-two", 4, timeout=180)
        assert watch.max_held == 2, watch.summary()  # the limit, used and never passed
        assert sum(watch.cordons.values()) == 8, watch.summary()
    finally:
        try:
            kube.delete(path_for("v1", "namespaces", name=other.namespace))
        except ApiError as exc:
            if not exc.not_found:
                raise


def test_the_last_ready_schedulable_protected_node_is_never_cordoned(
    api: Cluster,
    kube: Kube,
    nodes: Nodes,
    group: str,
    spawn_controller: Callable[..., Any],
    maintenance_rbac: None,
    watch: NodeWatcher,
) -> None:
    role = f"role.e2e.daemonjob.io/control-plane={group}"
    key, value = role.split("=")
    planes = nodes(2, labels={key: value})
    nodes(1)
    spawn_controller(
        extra_args=[
            f"--node-maintenance-namespaces={api.namespace}",
            "--max-unavailable-nodes=100%",
            f"--protected-node-selector={role}",
        ]
    )
    with NodeWatcher(kube, role) as protected:
        api.apply(_maintained("planes", group, 4, maxParallel=3))
        dj = api.wait_status(
            "planes", lambda d: (m := _budget_wait(d)) is not None and "never cordoned" in m, "a protected node held"
        )
        held = _budget_wait(dj)
        assert any(p in held for p in planes) and role in held, held
        api.wait_complete("planes", 3, timeout=180)
        assert protected.max_held == 1, protected.summary()  # one of the two stayed in service every moment
        assert all(protected.cordons[p] == 1 for p in planes), protected.summary()
    assert watch.max_held == 2, watch.summary()  # the worker and one control-plane node together
