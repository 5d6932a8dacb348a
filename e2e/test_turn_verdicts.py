"""A node's turn is judged by its verdict, and the verdict is the controller's alone, against the
API server: retries and maxFailedNodes count turns whose node never passed its health check;
a namespace editor without node powers who patches a Job's verdict or boot ID annotations does
not release the node (the annotations are sealed: an HMAC with a key only the controller reads).
"""

from __future__ import annotations

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
    sleep,
)

from daemonjob.domain.gates.health import NODE_UNHEALTHY, WAITING_FOR_NODE_HEALTH
from daemonjob.machinery.kube import path_for
from daemonjob.testing.simpod import ANNOTATION_READY

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
