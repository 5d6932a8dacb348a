"""The webhook's answers: every problem with its field, updates that only fix pass, bad reviews get 400."""

from __future__ import annotations

import json
from typing import Any

import pytest

from daemonjob.admission.review import Checks, handle
from daemonjob.testing.doubles.builders import daemonjob


def requested(**spec: Any) -> dict[str, Any]:
    """A DaemonJob of the name and namespace the review requests below carry (ok in ns)."""
    return daemonjob("ok", namespace="ns", **spec)


def review(operation: str, obj: Any, old: Any = None, **extra: Any) -> dict[str, Any]:
    request = {
        "uid": "u-1",
        "operation": operation,
        "name": "ok",
        "namespace": "ns",
        "kind": {"group": "daemonjob.io", "version": "v1alpha1", "kind": "DaemonJob"},
        "resource": {"group": "daemonjob.io", "version": "v1alpha1", "resource": "daemonjobs"},
        "object": obj,
        "oldObject": old,
        **extra,
    }
    answer_ = handle(
        json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}).encode()
    )
    assert answer_.code == 200, answer_.body
    assert answer_.operation == operation
    answer = json.loads(answer_.body)
    assert answer_.result == (
        "refused"
        if not answer["response"]["allowed"]
        else "warned"
        if answer["response"].get("warnings")
        else "allowed"
    )
    assert answer["apiVersion"] == "admission.k8s.io/v1" and answer["kind"] == "AdmissionReview"
    assert answer["response"]["uid"] == "u-1"
    return answer["response"]


def test_valid_create_is_allowed() -> None:
    assert review("CREATE", requested(schedule="@daily")) == {"uid": "u-1", "allowed": True}


def test_invalid_create_is_refused_with_every_field() -> None:
    response = review("CREATE", requested(schedule="0 25 * * *", maxParallel="150%"))
    assert response["allowed"] is False
    status = response["status"]
    assert status["code"] == 422 and status["reason"] == "Invalid"
    assert status["message"].startswith("spec.maxParallel: Invalid value: ")
    assert "; spec.schedule: Invalid value: " in status["message"]
    assert [c["field"] for c in status["details"]["causes"]] == ["spec.maxParallel", "spec.schedule"]


def test_an_update_that_adds_a_problem_is_refused() -> None:
    response = review("UPDATE", requested(schedule="0 25 * * *", maxParallel="150%"), requested(maxParallel="150%"))
    assert response["allowed"] is False
    assert response["status"]["message"].count("spec.") == 2  # all problems, not only the new one


def test_an_update_that_only_removes_problems_passes_with_warnings() -> None:
    response = review("UPDATE", requested(maxParallel="150%"), requested(schedule="0 25 * * *", maxParallel="150%"))
    assert response["allowed"] is True
    assert [w.split(":")[0] for w in response["warnings"]] == ["spec.maxParallel"]


def test_an_object_being_deleted_and_a_delete_are_never_refused() -> None:
    dying = requested(schedule="bad")
    dying["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert review("UPDATE", dying, requested())["allowed"] is True
    assert review("DELETE", None, requested(schedule="bad"))["allowed"] is True


def test_status_and_other_kinds_pass() -> None:
    assert review("UPDATE", requested(schedule="bad"), requested(), subResource="status")["allowed"] is True
    assert (
        review("CREATE", requested(schedule="bad"), kind={"group": "", "version": "v1", "kind": "Pod"})["allowed"]
        is True
    )


@pytest.mark.parametrize(
    "body, says",
    [
        (b"not json", "not JSON"),
        (b"[]", "not a JSON object"),
        (
            b'{"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview", "request": {}}',
            "expected apiVersion",
        ),
        (b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}', "request: Required value"),
        (
            b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"operation": "CREATE"}}',
            "request.uid: Required value",
        ),
        (
            b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"uid": "x", '
            b'"operation": "CREATE", "object": "str"}}',
            "request.object: must be an object",
        ),
        (
            b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"uid": "x", '
            b'"operation": "CREATE", "kind": {"group": "daemonjob.io", "kind": "DaemonJob"}, '
            b'"object": {"metadata": "x", "spec": {}}}}',
            "cannot read the object",
        ),
    ],
)
def test_malformed_reviews_get_a_clear_400(body: bytes, says: str) -> None:
    answer = handle(body)
    assert answer.code == 400
    assert says in json.loads(answer.body)["error"]


def test_an_invalid_alert_matcher_is_refused_with_its_field() -> None:
    response = review(
        "CREATE", requested(rollout={"haltOnAlerts": [{"alertname": "NodeNotReady"}, {"bad-label": "x"}]})
    )
    assert response["allowed"] is False
    assert [c["field"] for c in response["status"]["details"]["causes"]] == ["spec.rollout.haltOnAlerts[1]"]
    assert review("CREATE", requested(rollout={"haltOnAlerts": [{"alertname": "NodeNotReady"}]}))["allowed"] is True


# -- node maintenance: the controller's allowance ----------------------------------------------
def maintenance_review(
    operation: str, obj: Any, old: Any = None, allowed: frozenset[str] = frozenset(), namespace: str = "ns"
) -> dict[str, Any]:
    request = {
        "uid": "u-2",
        "operation": operation,
        "name": "ok",
        "namespace": namespace,
        "kind": {"group": "daemonjob.io", "version": "v1alpha1", "kind": "DaemonJob"},
        "object": obj,
        "oldObject": old,
    }
    answer = handle(
        json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}).encode(),
        Checks(allowed),
    )
    assert answer.code == 200, answer.body
    return json.loads(answer.body)["response"]


CORDON = {"cordon": True}


def test_maintenance_outside_the_allowed_namespaces_is_refused_on_create() -> None:
    response = maintenance_review("CREATE", requested(nodeMaintenance=CORDON), allowed=frozenset({"ops"}))
    assert response["allowed"] is False
    status = response["status"]
    assert status["message"] == (
        "spec.nodeMaintenance: Forbidden: node maintenance is not allowed in namespace "
        '"ns" (the controller allows it in: ops)'
    )
    assert [c["field"] for c in status["details"]["causes"]] == ["spec.nodeMaintenance"]
    assert maintenance_review("CREATE", requested(nodeMaintenance=CORDON), allowed=frozenset({"ns"}))["allowed"] is True
    assert maintenance_review("CREATE", requested(), allowed=frozenset())["allowed"] is True


def test_the_namespace_of_the_request_counts_when_the_object_has_none_yet() -> None:
    obj = requested(nodeMaintenance=CORDON)
    del obj["metadata"]["namespace"]
    assert maintenance_review("CREATE", obj, allowed=frozenset({"ns"}))["allowed"] is True
    refused = maintenance_review("CREATE", obj, allowed=frozenset({"ops"}))
    assert '"ns"' in refused["status"]["message"]


def test_the_refusal_comes_with_the_rule_book_problems() -> None:
    response = maintenance_review("CREATE", requested(schedule="0 25 * * *", nodeMaintenance={"drain": {}}))
    fields = [c["field"] for c in response["status"]["details"]["causes"]]
    assert fields == ["spec.schedule", "spec.nodeMaintenance.drain", "spec.nodeMaintenance"]


def test_an_update_that_newly_asks_for_maintenance_is_refused() -> None:
    response = maintenance_review("UPDATE", requested(nodeMaintenance=CORDON), requested())
    assert response["allowed"] is False
    assert "none, --node-maintenance-namespaces is empty" in response["status"]["message"]


def test_an_object_that_already_asked_can_be_edited_and_its_request_removed() -> None:
    # Written before the flag stopped allowing its namespace: labels, finalizer removal, fixes pass.
    before = requested(nodeMaintenance=CORDON)
    relabelled = requested(nodeMaintenance=CORDON)
    relabelled["metadata"]["labels"] = {"team": "ops"}
    kept = maintenance_review("UPDATE", relabelled, before)
    assert kept["allowed"] is True
    assert [w.split(":")[0] for w in kept["warnings"]] == ["spec.nodeMaintenance"]
    assert maintenance_review("UPDATE", requested(), before) == {"uid": "u-2", "allowed": True}


def test_the_operation_label_is_one_of_a_closed_set() -> None:
    from daemonjob.admission.webhook import operation_label

    assert [operation_label(op) for op in ("CREATE", "UPDATE", "DELETE", "CONNECT")] == [
        "CREATE",
        "UPDATE",
        "DELETE",
        "CONNECT",
    ]
    assert {operation_label(f"OP-{i}") for i in range(1000)} == {"other"}
    assert operation_label("") == ""
