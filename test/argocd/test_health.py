"""Argo CD's health check (manifests/argocd/health.lua) run by a real Lua 5.1 interpreter over
DaemonJobs the controller wrote in the e2e runs (testdata/, listed with the verdict in
health_test.yaml, Argo CD's convention: `DAEMONJOB_ARGOCD_CAPTURE=test/argocd pytest
e2e/test_argocd_health.py` writes them again), and over edits of them for the orders of
precedence no single run shows."""

from __future__ import annotations

import copy
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from daemonjob.testing.argocd import HEALTH_SCRIPT, health
from daemonjob.testing.kstatus import CURRENT, FAILED, IN_PROGRESS, verdict

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
CASES = yaml.safe_load((HERE / "health_test.yaml").read_text())["tests"]
# What each Argo CD status means in kstatus terms (a canary waiting for its promote is
# InProgress to kstatus, Suspended to Argo CD: it waits for someone, as a paused Argo Rollout).
KSTATUS = {
    "Healthy": {CURRENT},
    "Progressing": {IN_PROGRESS},
    "Degraded": {FAILED},
    "Suspended": {CURRENT, IN_PROGRESS},
}


@pytest.fixture(scope="module")
def lua() -> str:
    out = subprocess.run(
        ["bash", str(ROOT / "hack" / "provision-lua.sh")], capture_output=True, text=True, check=False, timeout=600
    )
    assert out.returncode == 0, out.stderr
    return out.stdout.strip().splitlines()[-1]


def load(case: str) -> dict[str, Any]:
    return yaml.safe_load((HERE / "testdata" / f"{case}.yaml").read_text())


def set_condition(obj: dict[str, Any], kind: str, status: str, reason: str, message: str = "") -> dict[str, Any]:
    out = copy.deepcopy(obj)
    conditions = out["status"]["conditions"]
    for cond in conditions:
        if cond["type"] == kind:
            cond.update(status=status, reason=reason, message=message)
            return out
    conditions.append({"type": kind, "status": status, "reason": reason, "message": message})
    return out


def test_the_shipped_script_is_the_tested_one() -> None:
    assert HEALTH_SCRIPT.resolve() == (ROOT / "manifests" / "argocd" / "health.lua").resolve()


def test_the_captured_states_cover_every_state_of_a_rollout() -> None:
    cases = {Path(c["inputPath"]).stem for c in CASES}
    assert {
        "rolling-out",
        "complete",
        "failed",
        "stalled",
        "suspended",
        "canary-paused",
        "canary-failed",
        "generation-not-observed",
        "waiting-for-schedule",
        "run-in-progress",
        "run-complete",
    } <= cases
    assert {c["healthStatus"]["status"] for c in CASES} == {"Healthy", "Progressing", "Degraded", "Suspended"}


@pytest.mark.parametrize("case", CASES, ids=lambda c: Path(c["inputPath"]).stem)
def test_captured_daemonjobs(lua: str, case: dict[str, Any]) -> None:
    obj = yaml.safe_load((HERE / case["inputPath"]).read_text())
    assert obj["kind"] == "DaemonJob" and obj["apiVersion"].startswith("daemonjob.io/")
    got = health(obj, lua=lua)
    assert (got.status, got.message) == (case["healthStatus"]["status"], case["healthStatus"]["message"])
    assert verdict(obj).status in KSTATUS[got.status], (verdict(obj), got)


def test_before_the_controller_wrote_anything_it_is_progressing(lua: str) -> None:
    obj = load("complete")
    del obj["status"]
    got = health(obj, lua=lua)
    assert got.status == "Progressing"
    assert got.message == f"waiting for the controller to observe generation {obj['metadata']['generation']}"
    obj["status"] = {"observedGeneration": obj["metadata"]["generation"]}  # observed, no conditions yet
    assert health(obj, lua=lua).status == "Progressing"


def test_an_unobserved_generation_outranks_the_old_verdict(lua: str) -> None:
    for case in ("complete", "failed", "suspended", "canary-paused"):
        obj = load(case)
        obj["metadata"]["generation"] += 1
        got = health(obj, lua=lua)
        assert got.status == "Progressing", (case, got)


def test_stalled_outranks_suspend_and_a_paused_canary(lua: str) -> None:
    suspended = set_condition(load("suspended"), "Stalled", "True", "ConfigMapMissing", "ConfigMap x not found")
    assert health(suspended, lua=lua).status == "Degraded"
    paused = set_condition(load("canary-paused"), "Stalled", "True", "JobConflict", "a Job name is taken")
    assert health(paused, lua=lua).message == "JobConflict: a Job name is taken"
    failed_only = set_condition(load("rolling-out"), "Failed", "True", "NodesFailed", "1 of 2 eligible nodes failed")
    assert health(failed_only, lua=lua).status == "Degraded"


def test_suspend_outranks_complete(lua: str) -> None:
    obj = load("run-complete")
    obj["spec"]["suspend"] = True  # the controller keeps Complete=True and RolloutFinished then
    got = health(obj, lua=lua)
    assert got.status == "Suspended" and got.message.startswith("Suspended: AllNodesSucceeded: "), got


@pytest.mark.parametrize(
    "reason", ["WaitingForCanary", "PausingBetweenNodes", "WaitingForWindow", "HaltedByAlerts", "WaitingForCache"]
)
def test_other_gates_are_progressing_only_the_canary_waits_for_someone(lua: str, reason: str) -> None:
    obj = set_condition(load("canary-paused"), "Reconciling", "True", reason, "waiting")
    assert health(obj, lua=lua).status == "Progressing"


def test_a_condition_without_message_is_named_by_its_reason(lua: str) -> None:
    obj = set_condition(load("failed"), "Stalled", "True", "FailureThresholdExceeded", "")
    assert health(obj, lua=lua).message == "FailureThresholdExceeded"
