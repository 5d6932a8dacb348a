"""`kubectl daemonjob plan` against the API server: the plan made before an apply is what the
controller then does on the same cluster (the same nodes, the same first wave, the drain the
PodDisruptionBudget refuses), and the exit status of a refused and of a Stalled DaemonJob."""

from __future__ import annotations

import io
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from harness import EXTERNAL, GROUP_LABEL, Cluster, JobWatcher, Nodes, daemonjob, sleep, wait_for
from test_node_maintenance import RBAC, _pdb, _workload

from daemonjob.kubectl import cli
from daemonjob.kubectl.cluster.client import Target
from daemonjob.kubectl.commands.plan import make_plan
from daemonjob.testing.sim.kubelet import SimKubelet
from daemonjob.testing.sim.nodewatch import NodeWatcher

pytestmark = pytest.mark.skipif(EXTERNAL, reason="stops a simulated node's heartbeat and runs its own controller")

UNREACHABLE = "node.kubernetes.io/unreachable"
NO_BUDGET = "--max-unavailable-nodes=100%"
POOL_TAINT = {"key": "pool", "value": "batch", "effect": "NoSchedule"}
POOL_TOLERATION = {"key": "pool", "operator": "Equal", "value": "batch", "effect": "NoSchedule"}


@pytest.fixture
def drain_controller(spawn_controller: Callable[..., Any], namespace: str, kubectl: Callable[..., Any]) -> Any:
    kubectl("apply", "-f", str(RBAC))
    """No cluster-wide limit on nodes out of service (this test holds one cordoned and one NotReady
    on purpose): the plan is asked with the same flag."""
    return spawn_controller(extra_args=[f"--node-maintenance-namespaces={namespace}", NO_BUDGET])


def _write(tmp_path: Path, body: dict[str, Any]) -> str:
    path = tmp_path / f"{body['metadata']['name']}.yaml"
    path.write_text(yaml.safe_dump(body))
    return str(path)


def _cli(
    capsys: pytest.CaptureFixture[str], kubeconfig: Path, namespace: str, *args: str, stdin: str | None = None
) -> tuple[int, str]:
    """The plugin's own entry point, as `kubectl daemonjob plan ...` runs it: exit status and stdout."""
    saved = sys.stdin
    if stdin is not None:
        sys.stdin = io.StringIO(stdin)
    try:
        code = cli.main(["plan", *args, "-n", namespace, "--kubeconfig", str(kubeconfig)])
    finally:
        sys.stdin = saved
    return code, capsys.readouterr().out


def test_the_plan_is_what_the_controller_then_does(
    api: Cluster,
    nodes: Nodes,
    group: str,
    kubelet: SimKubelet,
    drain_controller: Any,
    admin_kubeconfig: Path,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    """22 nodes: 17 plain, one tainted and tolerated, two tainted and not, one cordoned, one
    NotReady; maxParallel 3 with a drain, and a PodDisruptionBudget guarding the pod on the
    first node by name."""
    plain = nodes(17)
    tolerated = nodes(1, taints=[POOL_TAINT])
    tainted = nodes(2, taints=[{"key": "dedicated", "value": "db", "effect": "NoSchedule"}])
    cordoned = nodes(1, unschedulable=True)
    not_ready = nodes(1)
    kubelet.stop_heartbeat(not_ready[0])
    wait_for(
        lambda: any(t.get("key") == UNREACHABLE for t in api.node(not_ready[0])["spec"].get("taints") or ()),
        120,
        f"{not_ready[0]} to be marked unreachable",
    )
    eligible = sorted([*plain, *tolerated])
    guarded = eligible[0]
    _workload(api, "guarded", group, 1, nodes=[guarded])
    _pdb(api, "guarded-pdb", "guarded", 1)
    body = daemonjob("accuracy", group, sleep(2), maxParallel=3, pod_spec={"tolerations": [POOL_TOLERATION]})
    body["spec"]["nodeMaintenance"] = {"cordon": True, "drain": {"timeout": "8s", "onTimeout": "Skip"}}
    path = _write(tmp_path, body)

    code, text = _cli(capsys, admin_kubeconfig, api.namespace, "-f", path, "-o", "json", NO_BUDGET)
    assert code == 0, text
    doc = json.loads(text)
    mine = {n["name"]: n for n in doc["nodes"] if n["name"] in {*eligible, *tainted, *cordoned, *not_ready}}
    assert len(mine) == 22
    assert sorted(n for n, line in mine.items() if line["state"] == "runs") == eligible
    assert {n: mine[n].get("why") for n in [*tainted, *cordoned, *not_ready]} == {
        **{n: "tainted" for n in tainted},
        cordoned[0]: "cordoned",
        not_ready[0]: "NotReady",
    }
    assert doc["revision"]["new"] and doc["revision"]["rerunsNodes"] == []
    assert doc["maxParallel"] == 3
    assert doc["order"] == eligible and doc["waves"][0] == eligible[:3]
    assert [len(w) for w in doc["waves"]] == [3] * 6
    (refusal,) = mine[guarded]["evictionRefused"].values()
    assert "guarded-pdb" in refusal, mine[guarded]
    assert mine[guarded]["evict"][0].startswith(f"{api.namespace}/guarded-")
    assert all(not mine[n].get("evictionRefused") for n in eligible[1:])

    _, words = _cli(capsys, admin_kubeconfig, api.namespace, "-f", path, NO_BUDGET)  # the same plan in words
    assert "Wave 1:" in words and "guarded-pdb" in words and "maxParallel 3" in words

    with (
        NodeWatcher(api.kube, f"{GROUP_LABEL}={group}") as watch,
        JobWatcher(api.kube, api.namespace, "accuracy") as jobs,
    ):
        api.apply(body)
        wait_for(lambda: len(watch.cordon_order) >= 3, 60, "the first wave cordoned")
        assert watch.cordon_order[:3] == doc["waves"][0], watch.cordon_order
        api.wait_status(
            "accuracy",
            lambda d: (
                (d.get("status") or {}).get("succeededNodes") == len(eligible) - 1
                and not (d.get("status") or {}).get("activeNodes")
            ),
            "every eligible node but the guarded one succeeded",
            timeout=240,
        )
        order = jobs.creation_order()
    assert sorted(order) == eligible[1:], "Jobs ran on the plan's nodes, all but the node the PDB kept"
    assert sorted(order[:2]) == doc["waves"][0][1:], f"the first wave's Jobs came first: {order}"
    assert sorted(watch.cordon_order) == eligible, "the plan's eligible nodes are the nodes cordoned"
    drained = api.get("accuracy")["status"].get("nodeMaintenance") or {}
    assert drained.get("skippedNodes") == [guarded], drained
    after = make_plan(Target(api.kube, api.namespace), "accuracy", None, budget=("100%", ""))[0]  # nothing left
    assert {n.name: (n.state, n.why) for n in after.nodes if n.name in eligible} == {
        guarded: ("left out", "drain timed out"),
        **{n: ("done", "") for n in eligible[1:]},
    }
    assert after.waves == [] and not after.new_revision


def test_plan_of_an_applied_daemonjob_says_what_is_left(
    api: Cluster, nodes: Nodes, group: str, controller: Any, admin_kubeconfig: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Once it ran, the same template plans nothing again; a new one re-runs every node."""
    names = nodes(3)
    body = daemonjob("again", group, sleep(1), maxParallel=2)
    api.apply(body)
    api.wait_complete("again", 3)
    plan = make_plan(Target(api.kube, api.namespace), "again", None)[0]
    assert not plan.new_revision and plan.order == [] and plan.waves == []
    assert {n.name: n.state for n in plan.nodes if n.name in names} == {n: "done" for n in names}

    body["spec"]["jobTemplate"]["metadata"] = {"annotations": {"touched": "1"}}
    code, text = _cli(capsys, admin_kubeconfig, api.namespace, "-f", "-", "-o", "yaml", stdin=yaml.safe_dump(body))
    doc = yaml.safe_load(text)
    assert code == 0 and doc["revision"]["new"] and sorted(doc["revision"]["rerunsNodes"]) == names, doc["revision"]
    assert doc["waves"] == [names[:2], names[2:]]
    with JobWatcher(api.kube, api.namespace, "again") as watcher:
        api.apply(body)  # the controller replaces the first wave's Jobs first
        api.wait_status(
            "again", lambda d: d["status"].get("currentRevision") == doc["revision"]["name"], "the new revision"
        )
        api.wait_complete("again", 3)
        order = [c.node for c in watcher.created if c.revision == doc["revision"]["name"]]
    assert sorted(order[:2]) == doc["waves"][0] and order[2:] == doc["waves"][1], order


def test_exit_status_is_1_for_a_refused_and_for_a_stalled_daemonjob(
    api: Cluster, group: str, admin_kubeconfig: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    refused = daemonjob("refused", group, node_selector={"matchExpressions": [{"key": "a", "operator": "Near"}]})
    code, text = _cli(capsys, admin_kubeconfig, api.namespace, "-f", _write(tmp_path, refused))
    assert code == 1 and "Refused:" in text and "spec.nodeSelector" in text, text

    stalled = daemonjob("stalled", group, after=["no-such-daemonjob"])
    api.apply(stalled)  # no webhook here: the API server takes it, the controller would stall it
    code, text = _cli(capsys, admin_kubeconfig, api.namespace, "stalled", "-o", "json")
    doc = json.loads(text)
    assert code == 1 and doc["stalled"], doc["conditions"]
    stall = next(c for c in doc["conditions"] if c["type"] == "Stalled")
    assert stall["reason"] == "DependencyNotFound" and "no-such-daemonjob" in stall["message"]

    fine = daemonjob("fine", group)
    code, text = _cli(capsys, admin_kubeconfig, api.namespace, "-f", _write(tmp_path, fine))
    assert code == 0, text


def test_the_order_across_daemonjobs_is_read_from_the_lists(
    api: Cluster, nodes: Nodes, group: str, controller: Any, admin_kubeconfig: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A member of the exclusion group running on the first node holds it, and waits for its
    turn on the second (older: it goes first); `after` holds every node until it succeeded there."""
    names = nodes(2)
    api.apply(daemonjob("first", group, sleep(20), exclusionGroup="maint", maxParallel=1))
    wait_for(lambda: api.job_nodes("first") == names[:1], 30, "the first member running on the first node")
    target = Target(api.kube, api.namespace)
    api.apply(daemonjob("done-base", group, sleep(0)))
    api.wait_complete("done-base", 2)

    member = yaml.safe_dump(daemonjob("second", group, exclusionGroup="maint"))
    code, text = _cli(capsys, admin_kubeconfig, api.namespace, "-f", "-", "-o", "json", stdin=member)
    doc = json.loads(text)
    held = {n["name"]: (n["state"], n.get("why")) for n in doc["nodes"] if n["name"] in names}
    assert code == 0 and held == {n: ("held", "exclusionGroup") for n in names}, held
    assert doc["waves"] == [] and [g["gate"] for g in doc["gates"]] == ["exclusionGroup"]

    api.apply(daemonjob("later", group, after=["first", "done-base"]))
    plan = make_plan(target, "later", None)[0]
    assert {n.name: (n.state, n.why) for n in plan.nodes if n.name in names} == {n: ("held", "after") for n in names}
    assert plan.stalled is None and [g.gate for g in plan.gates] == ["after"]
