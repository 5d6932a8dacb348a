"""Argo CD's health check (manifests/argocd/health.lua) on the DaemonJobs the controller writes:
each state of a rollout read by a real Lua 5.1 interpreter from the live object, as Argo CD
reads it. DAEMONJOB_ARGOCD_CAPTURE=<dir> also writes each object read, with the verdict, as a
fixture of test/argocd (health_test.yaml, Argo CD's own convention for health checks)."""

from __future__ import annotations

import argparse
import copy
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from harness import FAIL, OK, Cluster, Nodes, condition, daemonjob, is_true, sleep

from daemonjob.kubectl.cluster.client import Target
from daemonjob.kubectl.commands import promote
from daemonjob.machinery.client.kube import path_for
from daemonjob.testing.argocd import ArgoHealth, health

ROOT = Path(__file__).resolve().parents[1]
CAPTURE = os.environ.get("DAEMONJOB_ARGOCD_CAPTURE")
NEVER = "0 0 1 1 *"  # a schedule whose first tick is months away at most, never within a test


@pytest.fixture(scope="module")
def lua() -> str:
    out = subprocess.run(
        ["bash", str(ROOT / "hack" / "provision-lua.sh")], capture_output=True, text=True, check=False, timeout=600
    )
    assert out.returncode == 0, out.stderr
    return out.stdout.strip().splitlines()[-1]


def _capture(case: str, obj: dict[str, Any], verdict: ArgoHealth) -> None:
    """The object as a fixture (without what only the API server's bookkeeping holds)."""
    assert CAPTURE is not None
    out = Path(CAPTURE)
    (out / "testdata").mkdir(parents=True, exist_ok=True)
    kept = copy.deepcopy(obj)
    kept["metadata"].pop("managedFields", None)
    (out / "testdata" / f"{case}.yaml").write_text(yaml.safe_dump(kept, sort_keys=False))
    index = out / "health_test.yaml"
    tests = (yaml.safe_load(index.read_text()) if index.exists() else None) or {"tests": []}
    entry = {
        "healthStatus": {"status": verdict.status, "message": verdict.message},
        "inputPath": f"testdata/{case}.yaml",
    }
    tests["tests"] = [t for t in tests["tests"] if t["inputPath"] != entry["inputPath"]] + [entry]
    tests["tests"].sort(key=lambda t: t["inputPath"])
    index.write_text(yaml.safe_dump(tests, sort_keys=False, width=1000))


def argo(lua: str, obj: dict[str, Any], case: str, status: str, reason: str | None = None) -> ArgoHealth:
    """Argo CD's health of the DaemonJob as just read from the API server (the very object a wait
    matched), asserted; `reason`: the condition it must name."""
    verdict = health(obj, lua=lua)
    assert verdict.status == status, (verdict, obj.get("status"))
    if reason is not None:
        assert verdict.message.startswith(f"{reason}: "), (verdict, obj.get("status"))
    if CAPTURE:
        _capture(case, obj, verdict)
    return verdict


def test_a_rollout_progresses_then_is_healthy_and_an_unobserved_edit_progresses(
    api: Cluster, nodes: Nodes, group: str, controller: Any, lua: str
) -> None:
    nodes(2)
    api.apply(daemonjob("rolling", group, sleep(3), maxParallel=1))
    dj = api.wait_status("rolling", lambda d: is_true(d, "Reconciling"), "Reconciling=True")
    argo(lua, dj, "rolling-out", "Progressing", "RollingOut")
    done = api.wait_complete("rolling", 2)
    argo(lua, done, "complete", "Healthy", "AllNodesSucceeded")

    controller.stop()  # nobody observes the edit: Argo CD must not read the old Complete
    edited = api.patch("rolling", {"maxParallel": 2})
    generation = done["metadata"]["generation"] + 1
    assert edited["metadata"]["generation"] == generation
    verdict = argo(lua, edited, "generation-not-observed", "Progressing")
    assert verdict.message == f"waiting for the controller to observe generation {generation}"
    controller.start()
    argo(lua, api.wait_complete("rolling", 2), "complete", "Healthy", "AllNodesSucceeded")


def test_failed_nodes_are_degraded(api: Cluster, nodes: Nodes, group: str, controller: Any, lua: str) -> None:
    nodes(2)
    api.apply(daemonjob("broken", group, FAIL, maxFailedNodes=0))
    dj = api.wait_status("broken", lambda d: is_true(d, "Stalled"), "Stalled=True")
    reason = condition(dj, "Stalled")["reason"]
    assert reason in ("FailureThresholdExceeded", "NodesFailed")
    argo(lua, dj, "failed", "Degraded", reason)


def test_a_stalled_rollout_is_degraded_until_the_user_acts(
    api: Cluster, nodes: Nodes, group: str, controller: Any, lua: str
) -> None:
    nodes(2)
    volume = {"volumes": [{"name": "script", "configMap": {"name": "node-script"}}]}
    api.apply(daemonjob("scripted", group, OK, pod_spec=volume, rerunOnConfigChange=True))
    dj = api.wait_status(
        "scripted", lambda d: condition(d, "Stalled").get("reason") == "ConfigMapMissing", "Stalled ConfigMapMissing"
    )
    verdict = argo(lua, dj, "stalled", "Degraded", "ConfigMapMissing")
    assert "node-script" in verdict.message
    api.kube.create(
        path_for("v1", "configmaps", api.namespace),
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "node-script"}, "data": {"run.sh": "true"}},
    )
    argo(lua, api.wait_complete("scripted", 2), "complete-after-stall", "Healthy", "AllNodesSucceeded")


def test_suspended_is_suspended(api: Cluster, nodes: Nodes, group: str, controller: Any, lua: str) -> None:
    nodes(2)
    api.apply(daemonjob("paused", group, OK, suspend=True))
    dj = api.wait_status("paused", lambda d: d["status"].get("desiredNodes") == 2, "the suspended DaemonJob seen")
    argo(lua, dj, "suspended", "Suspended", "Suspended")
    api.patch("paused", {"suspend": False})
    argo(lua, api.wait_complete("paused", 2), "complete-after-suspend", "Healthy", "AllNodesSucceeded")


def test_a_paused_canary_is_suspended_and_a_failed_one_degraded(
    api: Cluster, nodes: Nodes, group: str, controller: Any, lua: str
) -> None:
    nodes(3)
    api.apply(daemonjob("canaried", group, OK, rollout={"canary": 1}))
    api.apply(daemonjob("doomed", group, FAIL, rollout={"canary": 1}))
    dj = api.wait_status(
        "canaried", lambda d: condition(d, "Reconciling").get("reason") == "CanaryPaused", "Reconciling CanaryPaused"
    )
    verdict = argo(lua, dj, "canary-paused", "Suspended", "CanaryPaused")
    assert "kubectl daemonjob promote canaried" in verdict.message
    dj = api.wait_status(
        "doomed", lambda d: condition(d, "Failed").get("reason") == "CanaryFailed", "Failed CanaryFailed"
    )
    argo(lua, dj, "canary-failed", "Degraded", "CanaryFailed")

    assert promote.run(argparse.Namespace(name="canaried"), Target(api.kube, api.namespace)) == 0
    argo(lua, api.wait_complete("canaried", 3), "complete-after-promote", "Healthy", "AllNodesSucceeded")


def test_a_scheduled_daemonjob_is_healthy_between_runs(
    api: Cluster, nodes: Nodes, group: str, controller: Any, lua: str
) -> None:
    nodes(2)
    api.apply(daemonjob("nightly", group, sleep(2), schedule=NEVER, maxParallel=1))
    dj = api.wait_status(
        "nightly", lambda d: condition(d, "Complete").get("reason") == "WaitingForSchedule", "WaitingForSchedule"
    )
    argo(lua, dj, "waiting-for-schedule", "Healthy", "WaitingForSchedule")
    api.run_now("nightly", "first")
    dj = api.wait_status("nightly", lambda d: is_true(d, "Reconciling"), "the run in progress")
    argo(lua, dj, "run-in-progress", "Progressing", "RollingOut")
    argo(lua, api.wait_complete("nightly", 2), "run-complete", "Healthy", "AllNodesSucceeded")
