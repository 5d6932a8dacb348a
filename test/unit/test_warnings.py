"""Settings that do nothing as combined: each warned of with its field path, never refused,
silent once the field it needs is there; the webhook returns them, the plugin prints them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from daemonjob.admission.review import WARNINGS_MAX, handle
from daemonjob.domain.spec.validate import problems_of
from daemonjob.domain.spec.warnings import RULES, no_effect
from daemonjob.kubectl import cli
from daemonjob.kubectl.commands import create
from daemonjob.testing.doubles.builders import daemonjob

SAMPLES = Path(__file__).resolve().parents[2] / "examples"

# spec fields that leave one field idle -> the start of the warning; then the field that makes it work
IDLE: dict[str, tuple[dict[str, Any], str, dict[str, Any]]] = {
    "pause": (
        {"rollout": {"pauseBetweenNodes": "5m"}},
        "spec.rollout.pauseBetweenNodes has no effect without spec.maxParallel",
        {"maxParallel": 2},
    ),
    "canary": (
        {"rollout": {"canary": 1}, "rerunPolicy": "Never"},
        "spec.rollout.canary has no effect with spec.rerunPolicy: Never",
        {"rerunPolicy": "OnTemplateChange"},
    ),
    "reboot-timeout": (
        {"nodeMaintenance": {"rebootTimeout": "20m"}},
        "spec.nodeMaintenance.rebootTimeout has no effect without spec.nodeMaintenance.reboot: Expected",
        {"nodeMaintenance": {"rebootTimeout": "20m", "reboot": "Expected"}},
    ),
    "reboot-never": (
        {"nodeMaintenance": {"rebootTimeout": "20m", "reboot": "Never"}},
        "spec.nodeMaintenance.rebootTimeout has no effect without spec.nodeMaintenance.reboot: Expected",
        {"nodeMaintenance": {"rebootTimeout": "20m", "reboot": "Expected"}},
    ),
    "keep-cordoned": (
        {"nodeMaintenance": {"keepFailedCordoned": True}},
        "spec.nodeMaintenance.keepFailedCordoned has no effect without spec.nodeMaintenance.cordon: true",
        {"nodeMaintenance": {"keepFailedCordoned": True, "cordon": True}},
    ),
    "time-zone": (
        {"timeZone": "Europe/Berlin"},
        "spec.timeZone has no effect without spec.schedule",
        {"schedule": "0 3 * * *"},
    ),
    "deadline": (
        {"startingDeadlineSeconds": 600},
        "spec.startingDeadlineSeconds has no effect without spec.schedule",
        {"schedule": "0 3 * * *"},
    ),
}


@pytest.mark.parametrize("case", sorted(IDLE))
def test_an_idle_setting_is_warned_of_by_its_field_and_the_field_it_needs(case: str) -> None:
    idle, says, _ = IDLE[case]
    dj = daemonjob(**idle)
    assert problems_of(dj) == []  # valid: a warning, not a refusal
    warnings = no_effect(dj)
    assert len(warnings) == 1 and warnings[0].startswith(says), warnings


@pytest.mark.parametrize("case", sorted(IDLE))
def test_the_warning_goes_once_the_field_it_needs_is_set(case: str) -> None:
    idle, _, needed = IDLE[case]
    assert no_effect(daemonjob(**{**idle, **needed})) == []


def test_every_rule_has_its_case_and_all_are_said_at_once_in_rule_order() -> None:
    assert len(RULES) == len({says.split(" has no effect")[0] for _, says, _ in IDLE.values()})
    dj = daemonjob(
        rollout={"pauseBetweenNodes": "5m", "canary": 1},
        rerunPolicy="Never",
        nodeMaintenance={"rebootTimeout": "20m", "keepFailedCordoned": True},
        timeZone="UTC",
        startingDeadlineSeconds=60,
    )
    assert [w.split(" ")[0] for w in no_effect(dj)] == [
        "spec.rollout.pauseBetweenNodes",
        "spec.rollout.canary",
        "spec.nodeMaintenance.rebootTimeout",
        "spec.nodeMaintenance.keepFailedCordoned",
        "spec.timeZone",
        "spec.startingDeadlineSeconds",
    ]


@pytest.mark.parametrize("spec", [None, "x", {"rollout": "x", "nodeMaintenance": 3}, {}])
def test_a_malformed_spec_has_no_warning_and_no_crash(spec: Any) -> None:
    assert no_effect({"spec": spec}) == []


@pytest.mark.parametrize("sample", sorted(p.name for p in SAMPLES.glob("*.yaml")))
def test_the_examples_set_nothing_idle(sample: str) -> None:
    for doc in yaml.safe_load_all((SAMPLES / sample).read_text()):
        if doc and doc.get("kind") == "DaemonJob":
            assert no_effect(doc) == []


def _review(operation: str, obj: dict[str, Any], old: dict[str, Any] | None = None) -> dict[str, Any]:
    request = {
        "uid": "u-1",
        "operation": operation,
        "name": obj["metadata"]["name"],
        "namespace": "ns",
        "kind": {"group": "daemonjob.io", "version": "v1alpha1", "kind": "DaemonJob"},
        "object": obj,
        "oldObject": old,
    }
    answer = handle(
        json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}).encode()
    )
    assert answer.code == 200
    assert answer.result == "warned"
    response: dict[str, Any] = json.loads(answer.body)["response"]
    return response


def test_the_webhook_admits_with_the_warnings() -> None:
    response = _review("CREATE", daemonjob(rollout={"pauseBetweenNodes": "5m"}))
    assert response["allowed"] is True
    assert response["warnings"] == no_effect(daemonjob(rollout={"pauseBetweenNodes": "5m"}))


def test_an_update_keeping_a_problem_warns_of_it_first_then_of_the_idle_setting() -> None:
    old = daemonjob(maxParallel="150%")
    new = daemonjob(maxParallel="150%", timeZone="UTC")
    response = _review("UPDATE", new, old)
    assert response["allowed"] is True
    assert [w.split(":")[0].split(" ")[0] for w in response["warnings"]] == ["spec.maxParallel", "spec.timeZone"]


def test_a_refusal_carries_no_warning_and_the_warnings_are_capped() -> None:
    answer = handle(
        json.dumps(
            {
                "apiVersion": "admission.k8s.io/v1",
                "kind": "AdmissionReview",
                "request": {
                    "uid": "u",
                    "operation": "CREATE",
                    "kind": {"group": "daemonjob.io", "version": "v1alpha1", "kind": "DaemonJob"},
                    "object": daemonjob(schedule="bad", rollout={"pauseBetweenNodes": "5m"}),
                },
            }
        ).encode()
    )
    response = json.loads(answer.body)["response"]
    assert response["allowed"] is False and "warnings" not in response
    assert WARNINGS_MAX >= len(RULES)


def test_create_prints_the_warnings_on_stderr_as_kubectl_does(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[dict[str, Any]] = []

    def idle(manifest: dict[str, Any]) -> list[str]:
        seen.append(manifest)
        return ["spec.x has no effect without spec.y"]

    monkeypatch.setattr(create, "no_effect", idle)
    code = cli.main(["create", "w", "--image", "busybox", "-n", "ns", "--dry-run=client", "-o", "json", "--", "true"])
    out, err = capsys.readouterr()
    assert code == 0
    assert err == "Warning: spec.x has no effect without spec.y\n"
    assert json.loads(out) == seen[0]  # the manifest it warned of is the one it prints
