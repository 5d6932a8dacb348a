"""Every manifest of examples/ applied on the test bed, reaching the outcome its header
promises: Complete on every selected node, results grouped, a canary waiting for its promote,
`after` and the exclusion group holding, node parameters in the pods' env, drained and
rebooted nodes released.

The examples are what a user applies, so they carry no test-bed annotation: each test loads
one, adds here what the simulated kubelet needs to play it (`sim.daemonjob.io/*` on the pod
template: how long it runs, what it prints, a reboot), confines it to the test's own nodes
(its group label added to `spec.nodeSelector`, beside the example's own selector) and
shortens only what is for real clusters' clocks (a night's window, a minute's settle),
saying so where it does. Clusters are small and durations short: this file runs in CI."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
import yaml
from harness import (
    EXTERNAL,
    GROUP_LABEL,
    IMAGE,
    SIM_DURATION,
    Cluster,
    JobWatcher,
    Nodes,
    condition,
    holds,
    is_true,
    job_node,
    job_run,
    wait_for,
)

from daemonjob.domain.shared.apinames import ANNOTATION_NODE_CHECK
from daemonjob.domain.shared.noderecord import ANNOTATION_MAINTENANCE
from daemonjob.machinery.client.kube import Kube, path_for
from daemonjob.testing.sim.nodewatch import NodeWatcher
from daemonjob.testing.sim.simpod import ANNOTATION_DURATION, ANNOTATION_MESSAGES, ANNOTATION_OUTPUT
from daemonjob.testing.sim.simreboot import ANNOTATION_REBOOT

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
RBAC = ROOT / "manifests" / "node-maintenance" / "rbac.yaml"


# -- the examples, as the test bed plays them -----------------------------------------------------
def load(file: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((EXAMPLES / file).read_text()) if d]


def on_test_bed(body: dict[str, Any], group: str, duration: str = "1", **sim: str) -> dict[str, Any]:
    """`body` confined to this test's nodes, its pod annotated for the simulated kubelet."""
    out = copy.deepcopy(body)
    selector = out["spec"].setdefault("nodeSelector", {})
    selector.setdefault("matchLabels", {})[GROUP_LABEL] = group
    pod_meta = out["spec"]["jobTemplate"]["spec"]["template"].setdefault("metadata", {})
    pod_meta.setdefault("annotations", {}).update({ANNOTATION_DURATION: duration, **sim})
    return out


def create(api: Cluster, body: dict[str, Any]) -> dict[str, Any]:
    """As `kubectl apply -n NAMESPACE -f` creates it: metadata and spec as written."""
    obj = copy.deepcopy(body)
    obj["metadata"]["namespace"] = api.namespace
    return api.kube.create(api.dj_path(), obj)


def plugin(kubeconfig: Path, namespace: str, *args: str) -> subprocess.CompletedProcess[str]:
    """`kubectl daemonjob ARGS -n NAMESPACE`, the plugin as installed."""
    argv = [str(Path(sys.executable).parent / "kubectl-daemonjob"), "--kubeconfig", str(kubeconfig), "-n", namespace]
    return subprocess.run([*argv, *args], capture_output=True, text=True, timeout=180, check=False)


def released(api: Cluster, node: str) -> bool:
    obj = api.node(node)
    return not obj["spec"].get("unschedulable") and ANNOTATION_MAINTENANCE not in (
        obj["metadata"].get("annotations") or {}
    )


def _time(text: str) -> datetime:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)


# -- fixtures for node maintenance ----------------------------------------------------------------
@pytest.fixture(scope="session")
def maintenance_rbac(kubectl: Callable[..., Any], sa_kubeconfig: Any) -> None:
    kubectl("apply", "-f", str(RBAC))


@pytest.fixture
def allowed_controller(spawn_controller: Callable[..., Any], namespace: str, maintenance_rbac: None) -> Any:
    """Node maintenance allowed in this test's namespace, as the examples that cordon say they
    need; no cluster-wide limit (it counts the test bed's other nodes; its own tests are in
    e2e/test_cluster_budget.py)."""
    return spawn_controller(extra_args=[f"--node-maintenance-namespaces={namespace}", "--max-unavailable-nodes=100%"])


@pytest.fixture
def watch(kube: Kube, group: str) -> Iterator[NodeWatcher]:
    with NodeWatcher(kube, f"{GROUP_LABEL}={group}") as watcher:
        yield watcher


# -- run once everywhere, gently ------------------------------------------------------------------
def test_node_setup_and_rolling_cleanup_complete_everywhere(
    api: Cluster, nodes: Nodes, group: str, controller: Any, admin_kubeconfig: Path
) -> None:
    names = nodes(3)
    (setup,) = load("node-setup.yaml")
    (cleanup,) = load("rolling-cleanup.yaml")
    with JobWatcher(api.kube, api.namespace, "rolling-cleanup") as watcher:
        create(api, on_test_bed(setup, group, **{ANNOTATION_OUTPUT: "configured {node}"}))
        create(api, on_test_bed(cleanup, group))
        api.wait_complete("node-setup", 3)
        api.wait_complete("rolling-cleanup", 3)
    assert api.job_nodes("node-setup") == sorted(names)
    assert watcher.max_active == 1, watcher.summary()  # maxParallel 25% of 3 nodes: one at a time
    logs = plugin(admin_kubeconfig, api.namespace, "logs", "node-setup")
    assert logs.returncode == 0, logs.stderr
    assert {f"[{n}] configured {n}" for n in names} <= set(logs.stdout.splitlines()), logs.stdout


# -- an audit whose results are grouped -----------------------------------------------------------
def test_kernel_audit_names_the_odd_node_out(
    api: Cluster, nodes: Nodes, group: str, controller: Any, admin_kubeconfig: Path
) -> None:
    names = nodes(3)
    (control_plane,) = nodes(1, labels={"node-role.kubernetes.io/control-plane": ""})
    facts = {n: json.dumps({"kernel": "6.1.0-18", "arch": "x86_64"}) for n in names}
    facts[names[1]] = json.dumps({"kernel": "6.1.0-17", "arch": "x86_64"})
    (audit,) = load("kernel-audit.yaml")
    create(api, on_test_bed(audit, group, duration="0", **{ANNOTATION_MESSAGES: json.dumps(facts)}))
    api.wait_complete("kernel-audit", 3)
    assert control_plane not in api.job_nodes("kernel-audit")

    def grouped() -> dict[str, Any] | None:
        results = api.status("kernel-audit").get("results") or {}
        return results if results.get("recorded") == 3 else None

    results = wait_for(grouped, 60, "status.results of 3 nodes")
    assert [(g["message"], g["count"]) for g in results["groups"]] == [("6.1.0-18", 2), ("6.1.0-17", 1)]
    assert results["summary"] == f"2 outcomes; odd ones: {names[1]}"
    out = plugin(admin_kubeconfig, api.namespace, "results", "kernel-audit", "--group-by", ".kernel")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("3 nodes, 2 outcomes by .kernel"), out.stdout
    status = plugin(admin_kubeconfig, api.namespace, "status", "kernel-audit")
    assert status.returncode == 0 and "3 succeeded" in status.stdout, status.stdout + status.stderr


# -- a schedule -----------------------------------------------------------------------------------
def test_nightly_cleanup_waits_for_three_in_berlin_and_runs_now_when_asked(
    api: Cluster, nodes: Nodes, group: str, controller: Any, admin_kubeconfig: Path
) -> None:
    names = nodes(2)
    (nightly,) = load("nightly-image-cleanup.yaml")
    create(api, on_test_bed(nightly, group))
    now = datetime.now(ZoneInfo("Europe/Berlin"))
    tick = now.replace(hour=3, minute=0, second=0, microsecond=0)
    if tick <= now:
        tick = (tick + timedelta(days=1)).replace(hour=3)
    expected = tick.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    api.wait_status(
        "nightly-image-cleanup", lambda d: d["status"].get("nextScheduleTime") == expected, f"next tick {expected}"
    )
    holds(lambda: api.jobs("nightly-image-cleanup") == [], 2, "no run before the tick")
    out = plugin(admin_kubeconfig, api.namespace, "run-now", "nightly-image-cleanup", "--wait", "--timeout", "2m")
    assert out.returncode == 0, out.stdout + out.stderr
    jobs = api.jobs("nightly-image-cleanup")
    assert sorted(job_node(j) for j in jobs) == sorted(names)
    assert len({job_run(j) for j in jobs}) == 1 and job_run(jobs[0]), jobs


# -- a canary -------------------------------------------------------------------------------------
def test_canary_waits_for_its_promote_then_completes(
    api: Cluster, nodes: Nodes, group: str, controller: Any, admin_kubeconfig: Path
) -> None:
    names = nodes(3)
    (canary,) = load("canary-logrotate.yaml")
    create(api, on_test_bed(canary, group))
    dj = api.wait_status(
        "canary-logrotate",
        lambda d: (condition(d, "Reconciling") or {}).get("reason") == "CanaryPaused",
        "Reconciling CanaryPaused",
    )
    assert names[0] in condition(dj, "Reconciling")["message"]
    holds(lambda: api.job_nodes("canary-logrotate") == [names[0]], 3, "nothing past the canary before a promote")
    out = plugin(admin_kubeconfig, api.namespace, "promote", "canary-logrotate")
    assert out.returncode == 0, out.stderr
    api.wait_complete("canary-logrotate", 3)
    assert api.job_nodes("canary-logrotate") == sorted(names)


# -- after and an exclusion group -----------------------------------------------------------------
def test_ordered_upgrade_runs_after_its_preflight_and_never_beside_the_trim(
    api: Cluster, nodes: Nodes, group: str, controller: Any
) -> None:
    """The weekly trim is asked to run now, so that the two members of the group compete for
    the same nodes while the upgrade waits for its preflight."""
    nodes(2)
    preflight, upgrade, trim = load("ordered-upgrade.yaml")
    with JobWatcher(api.kube, api.namespace, "containerd-upgrade,disk-trim") as watcher:
        create(api, on_test_bed(preflight, group, duration="3"))
        create(api, on_test_bed(upgrade, group, duration="2"))
        create(api, on_test_bed(trim, group, duration="3"))
        api.run_now("disk-trim", "e2e")
        api.wait_complete("containerd-preflight", 2)
        api.wait_complete("containerd-upgrade", 2)
        api.wait_status(
            "disk-trim",
            lambda d: is_true(d, "Complete") and (d["status"].get("currentRun") or "").startswith("now-"),
            "the trim's run Complete",
        )
    assert max(watcher.max_active_per_node.values()) == 1, watcher.summary()  # one member per node at a time
    done = {job_node(j): _time(j["status"]["completionTime"]) for j in api.jobs("containerd-preflight")}
    for job in api.jobs("containerd-upgrade"):
        assert _time(job["metadata"]["creationTimestamp"]) >= done[job_node(job)], "upgrade before its preflight"
    assert len(watcher.created) == 4, watcher.summary()  # each node once per member


# -- node parameters ------------------------------------------------------------------------------
def test_node_location_reaches_each_pods_env(api: Cluster, nodes: Nodes, group: str, controller: Any) -> None:
    (zoned,) = nodes(1, labels={"topology.kubernetes.io/zone": "eu-west-1a"})
    (bare,) = nodes(1)
    api.patch_node(zoned, {"metadata": {"annotations": {"example.com/rack": "r12"}}})
    (location,) = load("node-location.yaml")
    create(api, on_test_bed(location, group))
    api.wait_complete("node-location", 2)
    env = {}
    for job in api.jobs("node-location"):
        (pod,) = api.pods(job["metadata"]["name"])
        env[job_node(job)] = {e["name"]: e.get("value", "") for e in pod["spec"]["containers"][0]["env"]}
    assert env == {
        zoned: {"DAEMONJOB_NODE_NAME": zoned, "ZONE": "eu-west-1a", "RACK": "r12", "LOCATION": "$(ZONE)/$(RACK)"},
        bare: {"DAEMONJOB_NODE_NAME": bare, "ZONE": "", "RACK": "unknown", "LOCATION": "$(ZONE)/$(RACK)"},
    }


# -- node maintenance -----------------------------------------------------------------------------
def _workload(api: Cluster, name: str, group: str, replicas: int) -> list[str]:
    """A ReplicaSet whose pods (with an emptyDir, as a search engine's scratch space) run on the
    group's nodes; the uids of its pods once all run."""
    api.kube.create(
        path_for("apps/v1", "replicasets", api.namespace),
        {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {"name": name},
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": {"app": name}},
                "template": {
                    "metadata": {"labels": {"app": name}, "annotations": {SIM_DURATION: "36000"}},
                    "spec": {
                        "containers": [{"name": "app", "image": IMAGE, "command": ["sleep", "36000"]}],
                        "nodeSelector": {GROUP_LABEL: group},
                        "terminationGracePeriodSeconds": 1,
                        "volumes": [{"name": "scratch", "emptyDir": {}}],
                    },
                },
            },
        },
    )

    def running() -> list[str] | None:
        pods = api.kube.get(path_for("v1", "pods", api.namespace), labelSelector=f"app={name}")["items"]
        up = [p["metadata"]["uid"] for p in pods if p["status"].get("phase") == "Running"]
        return up if len(up) == replicas else None

    return wait_for(running, 60, f"{replicas} pods of {name} running")


@pytest.mark.skipif(EXTERNAL, reason="node maintenance needs the local controller's flags")
def test_max_map_count_drains_one_node_at_a_time_and_releases_each(
    api: Cluster, nodes: Nodes, group: str, allowed_controller: Any, watch: NodeWatcher
) -> None:
    names = nodes(2, labels={"node-role.example.com/search": ""})
    searchers = _workload(api, "search", group, 2)
    (sysctl,) = load("max-map-count.yaml")
    create(api, on_test_bed(sysctl, group, duration="2"))
    api.wait_complete("max-map-count", 2, timeout=180)
    wait_for(lambda: all(released(api, n) for n in names), what="every node uncordoned")
    assert watch.max_held == 1, watch.summary()  # maxParallel 1: one node out of service at a time
    assert all(watch.cordons[n] == 1 and watch.uncordons[n] == 1 for n in names), watch.summary()
    pods = api.kube.get(path_for("v1", "pods", api.namespace), labelSelector="app=search")["items"]
    assert not {p["metadata"]["uid"] for p in pods} & set(searchers), "a search pod was not evicted"


def _agent(api: Cluster, group: str) -> None:
    """A DaemonSet standing in for the CNI agent and DNS cache the example checks (the test bed
    has neither): its pod on each node is restarted and Ready again after a reboot."""
    api.kube.create(
        path_for("apps/v1", "daemonsets", api.namespace),
        {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": {"name": "agent"},
            "spec": {
                "selector": {"matchLabels": {"app": "agent"}},
                "template": {
                    "metadata": {"labels": {"app": "agent"}, "annotations": {SIM_DURATION: "36000"}},
                    "spec": {
                        "nodeSelector": {GROUP_LABEL: group},
                        "containers": [{"name": "agent", "image": IMAGE, "command": ["sleep", "36000"]}],
                        "terminationGracePeriodSeconds": 1,
                    },
                },
            },
        },
    )


@pytest.mark.skipif(EXTERNAL, reason="needs the simulated kubelet to reboot nodes")
def test_kernel_upgrade_reboots_each_node_once_and_releases_it_healthy(
    api: Cluster, nodes: Nodes, group: str, allowed_controller: Any, watch: NodeWatcher
) -> None:
    names = nodes(2, labels={"pool": "batch"})
    _agent(api, group)
    (upgrade,) = load("kernel-upgrade.yaml")
    assert upgrade["spec"]["rollout"]["window"]["schedule"] == "0 1 * * 1-4"
    body = on_test_bed(upgrade, group, **{ANNOTATION_REBOOT: "5s"})
    del body["spec"]["rollout"]  # the night's window: the test runs whenever it runs
    health = body["spec"]["healthCheck"]
    assert health["daemonSets"] == ["kube-system/cilium", "kube-system/node-local-dns"]
    health.update(settle="2s", daemonSets=[f"{api.namespace}/agent"])  # a minute's settle is for real nodes
    create(api, body)
    dj = api.wait_complete("kernel-upgrade", 2, timeout=300)
    assert dj["status"]["succeededNodes"] == 2 and dj["status"]["failedNodes"] == 0
    wait_for(lambda: all(released(api, n) for n in names), what="every node released")
    assert dict(watch.boots) == {n: 1 for n in names}, watch.summary()  # each rebooted once
    assert watch.max_down == 1 and watch.max_held == 1, watch.summary()  # one node at a time
    assert watch.uncordoned_not_ready == [] and watch.uncordoned_not_rebooted == [], watch.summary()
    verdicts = {
        json.loads(j["metadata"]["annotations"][ANNOTATION_NODE_CHECK])["verdict"]
        for j in api.jobs(body["metadata"]["name"])
    }
    assert verdicts == {"Passed"}
