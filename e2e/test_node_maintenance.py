"""Node maintenance (spec.nodeMaintenance) against the API server: cordon, drain through the
Eviction API (PodDisruptionBudgets are the API server's own), run, uncordon; nothing left
cordoned, nobody else's cordon undone, each node cordoned and uncordoned exactly once even
when the controller is killed at each step.

Counts come from the API server: a Node watch (cordons, uncordons, the most nodes held at
once) and its audit log (the controller's successful Node writes)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from harness import (
    CONTROLLER_NS,
    EXTERNAL,
    FAIL,
    GROUP_LABEL,
    IMAGE,
    SIM_DURATION,
    Cluster,
    JobWatcher,
    Nodes,
    condition,
    daemonjob,
    metric_value,
    sleep,
    wait_for,
)

from daemonjob.domain.jobs.contract import job_node, job_revision
from daemonjob.domain.nodework.maintenance import FINALIZER
from daemonjob.domain.nodework.releases import ANNOTATION_RELEASE
from daemonjob.domain.shared.noderecord import ANNOTATION_MAINTENANCE, NodeRecord, outcomes_of
from daemonjob.kubectl.cli import parse
from daemonjob.kubectl.cluster.client import PluginError, Target
from daemonjob.kubectl.commands import release
from daemonjob.kubectl.commands.status import load_view
from daemonjob.machinery.client.kube import ApiError, Kube, path_for
from daemonjob.testing.audit import AuditLog
from daemonjob.testing.sim.nodewatch import NodeWatcher

pytestmark = pytest.mark.skipif(EXTERNAL, reason="needs the local control plane's audit log and its own RBAC")

SA_USER = f"system:serviceaccount:{CONTROLLER_NS}:daemonjob-controller"
RBAC = Path(__file__).resolve().parents[1] / "manifests" / "node-maintenance" / "rbac.yaml"


@pytest.fixture(scope="session")
def maintenance_rbac(kubectl: Callable[..., Any], sa_kubeconfig: Any) -> None:
    """The optional ClusterRole the manifests ship for node maintenance: the controller runs with it alone."""
    kubectl("apply", "-f", str(RBAC))


@pytest.fixture
def allowed_controller(spawn_controller: Callable[..., Any], namespace: str, maintenance_rbac: None) -> Any:
    """No cluster-wide limit here (these clusters have a node or two, one often cordoned by the
    test): it has tests of its own, e2e/test_cluster_budget.py."""
    return spawn_controller(extra_args=[f"--node-maintenance-namespaces={namespace}", "--max-unavailable-nodes=100%"])


@pytest.fixture
def watch(kube: Kube, group: str) -> Iterator[NodeWatcher]:
    with NodeWatcher(kube, f"{GROUP_LABEL}={group}") as watcher:
        yield watcher


def _maintained(name: str, group: str, workload: Any = None, **maintenance: Any) -> dict[str, Any]:
    body = daemonjob(name, group, workload or sleep(2), maxParallel=2)
    body["spec"]["nodeMaintenance"] = {"cordon": True, **maintenance}
    return body


CORDON_TOLERATION = {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}


def _workload(
    api: Cluster, name: str, group: str, replicas: int, nodes: list[str] | None = None, tolerate_cordon: bool = False
) -> None:
    """A ReplicaSet whose pods run (the simulated kubelet keeps them Running) on the group's nodes."""
    selector = {"app": name}
    spec: dict[str, Any] = {
        "containers": [{"name": "app", "image": IMAGE, "command": ["sleep", "3600"]}],
        "nodeSelector": {GROUP_LABEL: group},
        "terminationGracePeriodSeconds": 1,
    }
    if tolerate_cordon:
        spec["tolerations"] = [CORDON_TOLERATION]
    if nodes:
        spec["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": nodes}]}
                    ]
                }
            }
        }
    api.kube.create(
        path_for("apps/v1", "replicasets", api.namespace),
        {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {"name": name},
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": selector},
                "template": {"metadata": {"labels": selector, "annotations": {SIM_DURATION: "3600"}}, "spec": spec},
            },
        },
    )
    wait_for(lambda: len(_running_pods(api, name)) == replicas, what=f"{replicas} pods of {name} running")


def _running_pods(api: Cluster, app: str) -> list[dict[str, Any]]:
    pods = api.kube.get(path_for("v1", "pods", api.namespace), labelSelector=f"app={app}")["items"]
    return [
        p
        for p in pods
        if (p.get("status") or {}).get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")
    ]


def _pdb(api: Cluster, name: str, app: str, min_available: int) -> None:
    versions = {v["version"] for v in api.kube.get("/apis/policy")["versions"]}
    version = "policy/v1" if "v1" in versions else "policy/v1beta1"  # 1.20 serves only v1beta1
    api.kube.create(
        path_for(version, "poddisruptionbudgets", api.namespace),
        {
            "apiVersion": version,
            "kind": "PodDisruptionBudget",
            "metadata": {"name": name},
            "spec": {"minAvailable": min_available, "selector": {"matchLabels": {"app": app}}},
        },
    )
    wait_for(
        lambda: (
            (api.kube.get(path_for(version, "poddisruptionbudgets", api.namespace, name)).get("status") or {}).get(
                "currentHealthy"
            )
            == min_available
        ),
        what="the PDB counts its pods",
    )


def _draining(dj: dict[str, Any]) -> Any:
    return ((dj.get("status") or {}).get("nodeMaintenance") or {}).get("draining")


def _drain_held_by_pdb(api: Cluster, group: str, name: str, app: str, drain: dict[str, Any]) -> dict[str, Any]:
    """DaemonJob `name` draining a node whose only pod of `app` a PDB keeps: the DaemonJob as
    it first reported the drain."""
    _workload(api, app, group, 1)
    _pdb(api, f"{app}-pdb", app, 1)
    api.apply(_maintained(name, group, drain=drain))
    return api.wait_status(name, _draining, "the drain reported")


def _node_writes(audit: AuditLog, since: int, nodes: list[str]) -> dict[str, int]:
    """The controller's successful writes of each Node (its cordon and its release)."""
    out = {n: 0 for n in nodes}
    for r in audit.writes(user=SA_USER, resources=["nodes"], since=since, succeeded_only=True):
        if r.name in out:
            out[r.name] += 1
    return out


def _uncordoned_without_record(api: Cluster, node: str) -> bool:
    obj = api.node(node)
    return not obj["spec"].get("unschedulable") and ANNOTATION_MAINTENANCE not in (
        obj["metadata"].get("annotations") or {}
    )


def test_cordon_drain_run_uncordon_two_at_a_time(
    api: Cluster, nodes: Nodes, group: str, allowed_controller: Any, watch: NodeWatcher, audit_log: AuditLog
) -> None:
    names = nodes(4)
    _workload(api, "app", group, 4)
    mark = audit_log.mark()
    api.apply(_maintained("upgrade", group, drain={"timeout": "2m"}))
    dj = api.wait_complete("upgrade", 4, timeout=180)
    assert dj["status"]["succeededNodes"] == 4
    wait_for(lambda: all(_uncordoned_without_record(api, n) for n in names), what="every node uncordoned")
    assert watch.max_held <= 2, watch.summary()
    assert all(watch.cordons[n] == 1 and watch.uncordons[n] == 1 for n in names), watch.summary()
    assert _node_writes(audit_log, mark, names) == {n: 2 for n in names}
    evictions = [
        r
        for r in audit_log.writes(user=SA_USER, resources=["pods"], since=mark, succeeded_only=True)
        if r.subresource == "eviction"
    ]
    assert evictions, "no pod was evicted"
    reasons = {e.get("reason") for e in api.events("upgrade")}
    assert {"Cordoned", "Drained", "Uncordoned"} <= reasons, reasons
    mine = {"name": "upgrade"}
    text = allowed_controller.metrics()
    assert metric_value(text, "daemonjob_drain_duration_seconds_count", {**mine, "result": "drained"}) == 4
    wait_for(
        lambda: metric_value(allowed_controller.metrics(), "daemonjob_nodes_cordoned", mine) == 0,
        what="no node held cordoned",
    )
    assert FINALIZER in (api.get("upgrade")["metadata"].get("finalizers") or ())


def test_a_pdb_that_blocks_the_drain_fails_the_node_and_uncordons_it(
    api: Cluster, nodes: Nodes, group: str, allowed_controller: Any, watch: NodeWatcher
) -> None:
    (node,) = nodes(1)
    draining = _drain_held_by_pdb(api, group, "blocked", "guarded", {"timeout": "8s", "onTimeout": "Fail"})
    entry = draining["status"]["nodeMaintenance"]["draining"][0]
    assert entry["node"] == node and entry["waitingPods"][0].startswith(f"{api.namespace}/guarded-"), entry
    assert "guarded-pdb" in entry.get("blockedBy", ""), entry
    _, view = load_view(Target(api.kube, api.namespace), "blocked")  # kubectl daemonjob status
    (row,) = view.rows
    assert row.reason == "draining" and "guarded-pdb" in row.message and f"{api.namespace}/guarded-" in row.message
    dj = api.wait_status("blocked", lambda d: (d.get("status") or {}).get("failedNodes") == 1, "the node failed")
    assert dj["status"]["nodeMaintenance"]["drainFailedNodes"] == [node]
    event = api.wait_event("blocked", lambda e: e.get("reason") == "DrainTimedOut", "DrainTimedOut")
    assert "guarded-pdb" in event["message"] and node in event["message"], event
    wait_for(lambda: _uncordoned_without_record(api, node), what="the node uncordoned")
    assert api.jobs("blocked") == [], "a Job started on a node that was never drained"
    outcomes = outcomes_of(api.node(node))  # the truth that keeps it out of this revision, on the Node
    assert [(o.uid, o.on_timeout) for o in outcomes] == [(dj["metadata"]["uid"], "Fail")], outcomes
    text = allowed_controller.metrics()
    assert (metric_value(text, "daemonjob_evictions_refused_total", {"name": "blocked"}) or 0) >= 1
    assert metric_value(text, "daemonjob_drain_duration_seconds_count", {"name": "blocked", "result": "timed_out"}) == 1
    assert len(_running_pods(api, "guarded")) == 1
    assert watch.cordons[node] == 1 and watch.uncordons[node] == 1, watch.summary()


def test_someone_elses_cordon_stays_and_a_failed_job_uncordons(
    api: Cluster, nodes: Nodes, group: str, allowed_controller: Any, watch: NodeWatcher, audit_log: AuditLog
) -> None:
    theirs, ours = nodes(2)
    api.patch_node(theirs, {"spec": {"unschedulable": True}})  # kubectl cordon, by an operator
    mark = audit_log.mark()
    api.apply(_maintained("failing", group, FAIL))
    dj = api.wait_status("failing", lambda d: (d.get("status") or {}).get("failedNodes") == 1, "the Job failed")
    assert dj["status"]["desiredNodes"] == 1, "a node cordoned by someone else counted as eligible"
    wait_for(lambda: _uncordoned_without_record(api, ours), what="the failed node uncordoned")
    assert api.node(theirs)["spec"].get("unschedulable") is True
    assert _node_writes(audit_log, mark, [theirs, ours]) == {theirs: 0, ours: 2}
    assert condition(api.get("failing"), "Failed").get("status") == "True"


def test_not_allowed_namespace_is_stalled_and_writes_no_node(
    api: Cluster,
    nodes: Nodes,
    group: str,
    spawn_controller: Callable[..., Any],
    maintenance_rbac: None,
    audit_log: AuditLog,
) -> None:
    names = nodes(2)
    spawn_controller(extra_args=["--node-maintenance-namespaces=somewhere-else"])
    mark = audit_log.mark()
    api.apply(_maintained("refused", group))
    dj = api.wait_status(
        "refused",
        lambda d: condition(d, "Stalled").get("reason") == "NodeMaintenanceNotAllowed",
        "Stalled NodeMaintenanceNotAllowed",
    )
    assert f'namespace "{api.namespace}"' in condition(dj, "Stalled")["message"]
    assert api.jobs("refused") == []
    assert _node_writes(audit_log, mark, names) == {n: 0 for n in names}


def test_deleting_the_daemonjob_mid_rollout_uncordons_before_it_goes(
    api: Cluster, nodes: Nodes, group: str, allowed_controller: Any, watch: NodeWatcher
) -> None:
    names = nodes(2)
    api.apply(_maintained("long", group, sleep(60)))
    wait_for(lambda: len(api.jobs("long")) == 2, what="both Jobs created")
    assert watch.held_now() == names
    # Foreground: the Jobs go first (a background delete keeps each node until its Job ends)
    api.kube.delete(api.dj_path("long"), {"propagationPolicy": "Foreground"})
    wait_for(lambda: _gone(api, "long"), what="the DaemonJob gone")
    assert all(_uncordoned_without_record(api, n) for n in names), [api.node(n)["spec"] for n in names]
    assert all(watch.uncordons[n] == 1 for n in names), watch.summary()


def _gone(api: Cluster, name: str) -> bool:
    try:
        api.get(name)
    except ApiError as exc:
        if exc.not_found:
            return True
        raise
    return False


def test_a_controller_killed_at_each_step_leaves_each_node_cordoned_and_uncordoned_once(
    api: Cluster, nodes: Nodes, group: str, allowed_controller: Any, watch: NodeWatcher, audit_log: AuditLog
) -> None:
    names = nodes(2)
    first = names[0]
    _workload(api, "held", group, 1, nodes=[first])
    _pdb(api, "held-pdb", "held", 1)
    mark = audit_log.mark()
    body = _maintained("crash", group, sleep(10), drain={"timeout": "5m"})
    body["spec"]["maxParallel"] = 1
    jobs = JobWatcher(api.kube, api.namespace, "crash").start()
    api.apply(body)
    # killed mid-drain (after the cordon): the PDB holds the first node's drain
    api.wait_status("crash", _draining, "draining")
    allowed_controller.kill()
    allowed_controller.start()
    api.kube.delete(path_for(_policy_version(api), "poddisruptionbudgets", api.namespace, "held-pdb"))
    # killed mid-Job
    wait_for(lambda: len(api.jobs("crash")) == 1, what="the first node's Job")
    allowed_controller.kill()
    allowed_controller.start()
    api.wait_complete("crash", 2, timeout=180)
    wait_for(lambda: all(_uncordoned_without_record(api, n) for n in names), what="every node uncordoned")
    assert all(watch.cordons[n] == 1 and watch.uncordons[n] == 1 for n in names), watch.summary()
    assert watch.max_held == 1, watch.summary()
    assert _node_writes(audit_log, mark, names) == {n: 2 for n in names}
    jobs.stop()
    assert all(len(uids) == 1 for uids in jobs.uids_per_node_revision().values()), jobs.summary()
    evicted = Counter(
        r.name
        for r in audit_log.writes(user=SA_USER, resources=["pods"], since=mark, succeeded_only=True)
        if r.subresource == "eviction"
    )
    assert evicted and all(n == 1 for n in evicted.values()), evicted  # drained once: no pod evicted twice


def _policy_version(api: Cluster) -> str:
    versions = {v["version"] for v in api.kube.get("/apis/policy")["versions"]}
    return "policy/v1" if "v1" in versions else "policy/v1beta1"


def test_a_daemonjob_asking_for_cordoned_nodes_drains_them_and_leaves_the_cordon(
    api: Cluster, nodes: Nodes, group: str, allowed_controller: Any, audit_log: AuditLog
) -> None:
    (theirs,) = nodes(1)
    _workload(api, "app", group, 1)
    api.patch_node(theirs, {"spec": {"unschedulable": True}})  # cordoned by an operator, pods still there
    body = _maintained("tolerant", group, drain={"timeout": "1m"})
    body["spec"]["jobTemplate"]["spec"]["template"]["spec"]["tolerations"] = [
        {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}
    ]
    mark = audit_log.mark()
    api.apply(body)
    api.wait_complete("tolerant", 1)
    wait_for(
        lambda: ANNOTATION_MAINTENANCE not in (api.node(theirs)["metadata"].get("annotations") or {}),
        what="the record removed",
    )
    assert api.node(theirs)["spec"].get("unschedulable") is True, "someone else's cordon was undone"
    evicted = [
        r
        for r in audit_log.writes(user=SA_USER, resources=["pods"], since=mark, succeeded_only=True)
        if r.subresource == "eviction"
    ]
    assert len(evicted) == 1


def test_suspending_mid_drain_releases_the_node(
    api: Cluster, nodes: Nodes, group: str, allowed_controller: Any, watch: NodeWatcher
) -> None:
    (node,) = nodes(1)
    _drain_held_by_pdb(api, group, "edited", "pinned", {"timeout": "5m"})
    api.patch("edited", {"suspend": True})
    wait_for(lambda: _uncordoned_without_record(api, node), what="the node released on suspend")
    assert api.jobs("edited") == []
    assert watch.cordons[node] == 1 and watch.uncordons[node] == 1, watch.summary()


def test_a_template_change_mid_drain_releases_the_node_and_the_new_revision_takes_it_again(
    api: Cluster, nodes: Nodes, group: str, allowed_controller: Any, watch: NodeWatcher
) -> None:
    (node,) = nodes(1)
    first = _drain_held_by_pdb(api, group, "edited", "pinned", {"timeout": "5m"})["status"]["currentRevision"]
    template = api.get("edited")["spec"]["jobTemplate"]
    template["spec"]["template"]["spec"]["containers"][0]["command"] = ["sh", "-c", "echo v2"]
    api.patch("edited", {"jobTemplate": template})

    def recorded_revision() -> str | None:
        text = (api.node(node)["metadata"].get("annotations") or {}).get(ANNOTATION_MAINTENANCE)
        return NodeRecord.parse(text).revision if text else None

    wait_for(lambda: recorded_revision() not in (None, first), what="the node taken again by the new revision")
    # the watch sees the second cordon a moment after the node read above shows its record
    wait_for(
        lambda: watch.cordons[node] == 2, timeout=10, what="the second cordon seen by the watch", describe=watch.summary
    )
    assert watch.cordons[node] == 2 and watch.uncordons[node] == 1, watch.summary()
    assert api.jobs("edited") == [], "a Job started on a node that was never drained"


def test_a_replacement_that_tolerates_the_cordon_is_not_evicted_in_a_loop(
    api: Cluster, nodes: Nodes, group: str, allowed_controller: Any, audit_log: AuditLog
) -> None:
    """Its ReplicaSet puts the evicted pod's replacement back on the cordoned node: the drain
    waited for the pod it evicted, not for whatever the node runs, so it is done."""
    (node,) = nodes(1)
    _workload(api, "tolerant-app", group, 1, tolerate_cordon=True)
    (first,) = _running_pods(api, "tolerant-app")
    mark = audit_log.mark()
    api.apply(_maintained("upgrade", group, drain={"timeout": "45s", "onTimeout": "Fail"}))
    dj = api.wait_complete("upgrade", 1, timeout=120)
    assert dj["status"]["succeededNodes"] == 1 and not dj["status"].get("failedNodes"), dj["status"]
    replacements = [p for p in _running_pods(api, "tolerant-app") if p["metadata"]["uid"] != first["metadata"]["uid"]]
    assert [p["spec"]["nodeName"] for p in replacements] == [node], "the replacement came back to the cordoned node"
    evicted = [
        r.name
        for r in audit_log.writes(user=SA_USER, resources=["pods"], since=mark, succeeded_only=True)
        if r.subresource == "eviction"
    ]
    assert evicted == [first["metadata"]["name"]]


def _record_on(api: Cluster, node: str) -> NodeRecord | None:
    text = (api.node(node)["metadata"].get("annotations") or {}).get(ANNOTATION_MAINTENANCE)
    return NodeRecord.parse(text) if text else None


def _release(api: Cluster, *argv: str) -> int:
    """`kubectl daemonjob release kept ...` against the API server."""
    return release.run(parse(["release", "kept", *argv]), Target(api.kube, api.namespace))


def test_a_kept_failure_stays_cordoned_through_the_next_revision_until_released(
    api: Cluster, nodes: Nodes, group: str, allowed_controller: Any, watch: NodeWatcher, capsys: Any
) -> None:
    first, second = nodes(2)
    api.apply(_maintained("kept", group, FAIL, keepFailedCordoned=True))
    api.wait_status("kept", lambda d: (d.get("status") or {}).get("failedNodes") == 2, "both Jobs failed")
    wait_for(lambda: all((_record_on(api, n) or NodeRecord("", "", "")).kept for n in (first, second)), what="marked")
    old = api.get("kept")["status"]["currentRevision"]
    api.apply(_maintained("kept", group, sleep(1), keepFailedCordoned=True))  # a new revision

    def new_revision_settled(d: dict[str, Any]) -> bool:
        status = d.get("status") or {}
        maintenance = status.get("nodeMaintenance") or {}
        return status.get("currentRevision") != old and maintenance.get("rollout") == status.get("currentRevision")

    dj = api.wait_status("kept", new_revision_settled, "the new revision's status")
    new = dj["status"]["currentRevision"]
    assert dj["status"]["nodeMaintenance"]["keptCordonedNodes"] == [first, second], dj["status"]
    assert dj["status"]["desiredNodes"] == 0, "kept nodes are out of its rollout"
    assert [j for j in api.jobs("kept") if job_revision(j) == new] == [], "a Job ran on a kept node"
    assert all(api.node(n)["spec"].get("unschedulable") is True for n in (first, second))
    _, view = load_view(Target(api.kube, api.namespace), "kept")  # kubectl daemonjob status
    assert {(r.node, r.reason) for r in view.rows} == {(first, "kept cordoned"), (second, "kept cordoned")}

    # refusals: an unknown node, a dry run writes nothing
    with pytest.raises(PluginError, match='nodes "no-such-node" not found'):
        _release(api, "--node", "no-such-node")
    assert _release(api, "--node", first, "--dry-run") == 0
    assert ANNOTATION_RELEASE not in (api.get("kept")["metadata"].get("annotations") or {})
    assert _release(api, "--node", first) == 0
    assert f"node/{first} release requested" in capsys.readouterr().out
    # released: uncordoned, then taken by the new revision (cordon, Job, uncordon); the other stays
    api.wait_complete("kept", 1, timeout=120)
    wait_for(lambda: _uncordoned_without_record(api, first), what="the released node done with the new revision")
    assert [job_node(j) for j in api.jobs("kept") if job_revision(j) == new] == [first]
    assert (_record_on(api, second) or NodeRecord("", "", "")).kept and api.node(second)["spec"]["unschedulable"]
    with pytest.raises(PluginError, match=f'node "{first}" is not held by daemonjob "kept"'):
        _release(api, "--node", first)
    assert _release(api, "--all") == 0
    api.wait_complete("kept", 2, timeout=120)
    wait_for(lambda: _uncordoned_without_record(api, second), what="the second node released and run")
    assert watch.cordons[first] == 2 and watch.uncordons[first] == 2, watch.summary()
    assert watch.cordons[second] == 2 and watch.uncordons[second] == 2, watch.summary()
