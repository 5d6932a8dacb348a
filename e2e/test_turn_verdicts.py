"""A node's turn is judged by its verdict, and the verdict is the controller's alone, against the
API server: retries and maxFailedNodes count turns whose node never passed its health check;
a namespace editor without node powers who patches a Job's verdict or boot ID annotations does
not release the node (the annotations are sealed: an HMAC with a key only the controller reads).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from harness import (
    EXTERNAL,
    GROUP_LABEL,
    IMAGE,
    SIM_DURATION,
    Cluster,
    Nodes,
    condition,
    daemonjob,
    holds,
    job_finished,
    sleep,
    wait_for,
)

from daemonjob.controller.runtime.turnseal import ANNOTATION_NODE_CHECK_SEAL
from daemonjob.domain.gates.health import NODE_UNHEALTHY, WAITING_FOR_NODE_HEALTH
from daemonjob.domain.shared.apinames import ANNOTATION_BOOT_ID, ANNOTATION_NODE_CHECK
from daemonjob.domain.shared.noderecord import ANNOTATION_MAINTENANCE
from daemonjob.machinery.client.kube import PATCH_MERGE, Kube, path_for
from daemonjob.testing.controllerusers import CONTROLLER_NAMESPACE
from daemonjob.testing.sim.simpod import ANNOTATION_READY

pytestmark = pytest.mark.skipif(EXTERNAL, reason="needs the simulated kubelet's never-Ready pods")

LABEL_ATTEMPT = "daemonjob.io/attempt"


def _never_ready_agent(api: Cluster, group: str) -> None:
    """A DaemonSet on the group's nodes whose pods run but are never Ready: no node passes a
    health check naming it."""
    labels = {"app": "agent"}
    template = {
        "metadata": {"labels": labels, "annotations": {SIM_DURATION: "36000", ANNOTATION_READY: "false"}},
        "spec": {
            "nodeSelector": {GROUP_LABEL: group},
            "containers": [{"name": "agent", "image": IMAGE, "command": ["sleep", "36000"]}],
            "terminationGracePeriodSeconds": 1,
        },
    }
    body = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "agent"},
        "spec": {"selector": {"matchLabels": labels}, "template": template},
    }
    api.kube.create(path_for("apps/v1", "daemonsets", api.namespace), body)


def _attempts(api: Cluster, name: str) -> list[tuple[str, int]]:
    return sorted(
        (
            j["metadata"]["annotations"]["daemonjob.io/node"],
            int(j["metadata"].get("labels", {}).get(LABEL_ATTEMPT, "0")),
        )
        for j in api.jobs(name)
    )


def test_a_node_that_never_passes_its_health_check_gets_limit_plus_one_turns_and_stops_the_rollout(
    api: Cluster, nodes: Nodes, group: str, controller: Any
) -> None:
    first, second = nodes(2)
    _never_ready_agent(api, group)
    body = daemonjob("config", group, sleep(1), maxParallel=1, maxFailedNodes=0, retry={"limit": 1, "backoff": "1s"})
    body["spec"]["healthCheck"] = {"timeout": "6s", "settle": "1s", "daemonSets": [f"{api.namespace}/agent"]}
    api.apply(body)

    dj = api.wait_status("config", lambda d: d["status"].get("failedNodes") == 1, "the node failed", timeout=150)
    assert dj["status"]["failedNodeNames"] == [first]
    assert not dj["status"].get("retryingNodes")
    assert condition(dj, "Failed")["status"] == "True" and first in condition(dj, "Failed")["message"]
    assert _attempts(api, "config") == [(first, 0), (first, 1)], "two turns (retry.limit 1), each its own Job"
    unhealthy = [e for e in api.events("config") if e.get("reason") == NODE_UNHEALTHY]
    assert unhealthy and all(f"node {first} not healthy" in e["message"] for e in unhealthy)
    holds(
        lambda: _attempts(api, "config") == [(first, 0), (first, 1)],
        10,
        "no third turn on the failed node, no turn on the next",
        describe=lambda: _attempts(api, "config"),
    )
    assert second not in api.job_nodes("config")
    assert condition(api.get("config"), "Reconciling").get("reason") != WAITING_FOR_NODE_HEALTH


# -- item: the records a node's release is decided from are the controller's alone ---------
EDITOR = "ns-editor"
RBAC = Path(__file__).resolve().parents[1] / "manifests" / "node-maintenance" / "rbac.yaml"


class AsUser(Kube):
    """The admin's connection impersonating one user (the API server authorizes that user)."""

    user: str = EDITOR

    def _base_headers(self) -> dict[str, str]:
        return {**super()._base_headers(), "Impersonate-User": self.user}


@pytest.fixture
def editor(api: Cluster) -> Kube:
    """A namespace editor (the built-in ClusterRole edit, bound in the test's namespace), without node powers."""
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": "ns-editor"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": EDITOR}],
    }
    api.kube.create(path_for("rbac.authorization.k8s.io/v1", "rolebindings", api.namespace), binding)
    kube = AsUser(copy.copy(api.kube.configuration))

    def may(verb: str, resource: str, namespace: str | None = None) -> bool:
        attributes = {"verb": verb, "resource": resource, **({"namespace": namespace} if namespace else {})}
        if resource == "jobs":
            attributes["group"] = "batch"
        review = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": attributes},
        }
        return bool(kube.create("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", review)["status"]["allowed"])

    wait_for(lambda: may("patch", "jobs", api.namespace), 30, "the editor's binding in force")
    assert not may("patch", "nodes") and not may("get", "secrets", CONTROLLER_NAMESPACE), "no node powers, no key"
    return kube


def _forge(editor: Kube, api: Cluster, job: str, annotations: dict[str, str]) -> None:
    editor.patch(
        path_for("batch/v1", "jobs", api.namespace, job),
        {"metadata": {"annotations": annotations}},
        content_type=PATCH_MERGE,
    )


def _waiting_on(node: str) -> Callable[[dict[str, Any]], bool]:
    def check(dj: dict[str, Any]) -> bool:
        cond = condition(dj, "Reconciling")
        return cond.get("reason") == WAITING_FOR_NODE_HEALTH and f"node {node}" in cond.get("message", "")

    return check


FORGED_SEAL = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"


def test_an_editor_patching_the_verdict_does_not_release_a_node_held_by_its_health_check(
    api: Cluster, nodes: Nodes, group: str, controller: Any, editor: Kube
) -> None:
    """No node maintenance: the health check alone holds the next node."""
    first, second = nodes(2)
    _never_ready_agent(api, group)
    body = daemonjob("config", group, sleep(1), maxParallel=1)
    body["spec"]["healthCheck"] = {"timeout": "10m", "settle": "1s", "daemonSets": [f"{api.namespace}/agent"]}
    api.apply(body)
    api.wait_status("config", _waiting_on(first), "the next node waiting for the first node's health", timeout=120)
    (job,) = api.jobs("config")
    name = job["metadata"]["name"]

    for verdict in ({"verdict": "Passed"}, {"verdict": "Failed", "reason": "NodeUnhealthyAfterJob"}):
        _forge(editor, api, name, {ANNOTATION_NODE_CHECK: json.dumps(verdict), ANNOTATION_NODE_CHECK_SEAL: FORGED_SEAL})
        holds(
            lambda: api.job_nodes("config") == [first] and _waiting_on(first)(api.get("config")),
            8,
            f"the node still checked and held after a forged {verdict['verdict']}",
            describe=lambda: (api.job_nodes("config"), condition(api.get("config"), "Reconciling")),
        )
        status = api.get("config")["status"]
        assert status["succeededNodes"] == 0 and status["failedNodes"] == 0 and status["activeNodes"] == 1
    assert second not in api.job_nodes("config")


def test_an_editor_patching_the_boot_id_or_the_verdict_does_not_release_a_cordoned_node_awaiting_its_reboot(
    api: Cluster,
    nodes: Nodes,
    group: str,
    spawn_controller: Callable[..., Any],
    kubectl: Callable[..., Any],
    editor: Kube,
) -> None:
    """Node maintenance with reboot: Expected, and a Job that exits 0 without rebooting: its node
    stays cordoned until rebootTimeout, whatever the editor writes on the Job."""
    kubectl("apply", "-f", str(RBAC))
    spawn_controller(extra_args=[f"--node-maintenance-namespaces={api.namespace}"])
    first, second = nodes(2)
    body = daemonjob("kernel", group, sleep(1), maxParallel=1, maxFailedNodes=0)
    body["spec"]["nodeMaintenance"] = {"cordon": True, "reboot": "Expected", "rebootTimeout": "45s"}
    api.apply(body)
    api.wait_status("kernel", _waiting_on(first), "the next node waiting for the first node's reboot", timeout=120)
    (job,) = api.jobs("kernel")
    name = job["metadata"]["name"]
    wait_for(lambda: job_finished(api.jobs("kernel")[0]) == "Complete", 60, "the Job done without a reboot")
    assert api.node(first)["spec"].get("unschedulable")

    def held() -> bool:
        node = api.node(first)
        dj = api.get("kernel")
        return (
            bool(node["spec"].get("unschedulable"))
            and ANNOTATION_MAINTENANCE in (node["metadata"].get("annotations") or {})
            and api.job_nodes("kernel") == [first]
            and _waiting_on(first)(dj)
            and "boot ID unchanged" in condition(dj, "Reconciling")["message"]  # the sealed one, read
        )

    wait_for(held, 30, "the node held, its boot ID read from the sealed record")

    _forge(editor, api, name, {ANNOTATION_BOOT_ID: "a-boot-that-never-was"})
    holds(held, 6, "the node held after a forged boot ID", describe=lambda: condition(api.get("kernel"), "Reconciling"))
    passed = json.dumps({"verdict": "Passed"})
    _forge(editor, api, name, {ANNOTATION_NODE_CHECK: passed, ANNOTATION_NODE_CHECK_SEAL: FORGED_SEAL})
    holds(held, 6, "the node held after a forged Passed", describe=lambda: condition(api.get("kernel"), "Reconciling"))
    # not back with a new boot ID in time: the controller's own verdict, Failed, over the forged one
    dj = api.wait_status("kernel", lambda d: d["status"].get("failedNodes") == 1, "the node failed", timeout=90)
    assert dj["status"]["failedNodeNames"] == [first] and api.job_nodes("kernel") == [first]
    written = api.jobs("kernel")[0]["metadata"]["annotations"]
    assert (
        json.loads(written[ANNOTATION_NODE_CHECK])["verdict"] == "Failed"
        and written[ANNOTATION_NODE_CHECK_SEAL] != FORGED_SEAL
    )
    assert second not in api.job_nodes("kernel")
