"""The controller as a process: crash-safe (deterministic Job names), clean to stop, observable."""

from __future__ import annotations

import signal
from collections.abc import Callable
from typing import Any

from harness import (
    CONTROLLER_NS,
    EXTERNAL,
    OK,
    Cluster,
    ControllerProcess,
    JobWatcher,
    Nodes,
    daemonjob,
    metric_value,
    sleep,
    wait_for,
)

from daemonjob.machinery.client.kube import path_for


def test_killed_mid_rollout_the_controller_resumes_without_duplicates(
    api: Cluster, nodes: Nodes, group: str, controller: Any
) -> None:
    """SIGKILL at any point, then a restart: one Job per (node, revision), and the rollout completes."""
    names = nodes(5)
    with JobWatcher(api.kube, api.namespace, "survivor") as watcher:
        api.apply(daemonjob("survivor", group, sleep(3), maxParallel=2))
        wait_for(lambda: len(watcher.created) >= 3, 60, "the rollout to be under way")
        controller.kill(signal.SIGKILL)
        assert not controller.alive() or EXTERNAL
        controller.restart()
        api.wait_complete("survivor", 5, timeout=120)
    per_key = watcher.uids_per_node_revision()
    assert {node for node, _ in per_key} == set(names)
    assert all(len(uids) == 1 for uids in per_key.values()), watcher.summary()
    assert watcher.max_active <= 2, watcher.summary()
    assert len(api.jobs("survivor")) == 5


def test_sigterm_exits_zero_and_logs_are_structured(
    api: Cluster, nodes: Nodes, group: str, controller_process: ControllerProcess
) -> None:
    """JSON log lines carry the DaemonJob's namespace and name; metrics and probes answer; SIGTERM exits 0."""
    nodes(2)
    api.apply(daemonjob("observed", group, OK))
    api.wait_complete("observed", 2)

    assert controller_process.health("/healthz") == 200
    assert controller_process.health("/readyz") == 200
    labels = {"namespace": api.namespace, "name": "observed"}

    def scraped() -> str | None:
        text = controller_process.metrics()
        return text if metric_value(text, "daemonjob_nodes", {**labels, "state": "succeeded"}) == 2.0 else None

    text = wait_for(scraped, 30, "the node gauge to show 2 succeeded")
    assert metric_value(text, "daemonjob_nodes", {**labels, "state": "desired"}) == 2.0
    assert metric_value(text, "daemonjob_leader") == 1.0
    if not EXTERNAL:  # elsewhere the deployed controller may have created them first
        assert metric_value(text, "daemonjob_jobs_created_total") == 2.0

    assert controller_process.stop() == 0
    records = controller_process.log_records()  # every line is a JSON object
    assert records and all("level" in r and "timestamp" in r and "event" in r for r in records)
    reconciles = [r for r in records if r.get("name") == "observed"]
    assert reconciles, "no log line names the DaemonJob"
    assert all(r.get("namespace") == api.namespace for r in reconciles)
    assert any(r.get("count") == 2 and "created" in r["event"] for r in reconciles), reconciles
    # A clean stop gives the Lease up, so a successor need not wait for it to expire.
    lease = api.kube.get(path_for("coordination.k8s.io/v1", "leases", CONTROLLER_NS, controller_process.lease))
    assert not lease["spec"].get("holderIdentity")


def test_a_standby_replica_takes_over_from_a_stopped_leader(
    api: Cluster,
    nodes: Nodes,
    group: str,
    controller_process: ControllerProcess,
    spawn_controller: Callable[..., ControllerProcess],
) -> None:
    """Two replicas share the Lease: only the leader acts, and the standby finishes the rollout."""
    leader = controller_process
    leader.wait_leader()
    standby = spawn_controller("standby")
    assert metric_value(standby.metrics(), "daemonjob_leader") == 0.0
    names = nodes(4)
    with JobWatcher(api.kube, api.namespace, "relay") as watcher:
        api.apply(daemonjob("relay", group, sleep(2), maxParallel=1))
        wait_for(lambda: len(watcher.created) >= 2, 60, "the rollout to be under way")
        assert metric_value(standby.metrics(), "daemonjob_jobs_created_total") == 0.0, "the standby acted"
        assert leader.stop() == 0
        standby.wait_leader(timeout=30)
        api.wait_complete("relay", 4)
    assert watcher.creation_order() == sorted(names)
    assert all(len(uids) == 1 for uids in watcher.uids_per_node_revision().values()), watcher.summary()
    assert watcher.max_active == 1, watcher.summary()
    if not EXTERNAL:  # elsewhere the deployed controller acts too
        assert metric_value(standby.metrics(), "daemonjob_jobs_created_total") >= 1.0
