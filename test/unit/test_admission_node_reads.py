"""Node parameters are a read of Nodes: the webhook lets an entry through when the operator's
allow-list names its key, else only when the requester may get nodes (a fake reviewer stands
for the API server's SubjectAccessReview)."""

from __future__ import annotations

import argparse
import copy
import json
from collections.abc import Mapping
from typing import Any

import pytest

from daemonjob import cli
from daemonjob.admission.nodereads import GET_NODES, AllowedKeys, allowed_keys, node_reads_problems
from daemonjob.admission.powers import Permission
from daemonjob.admission.review import Checks, handle
from daemonjob.testing.doubles.builders import daemonjob

JANE = {"username": "jane", "uid": "u-jane", "groups": ["devs"]}
ZONE = {"env": "ZONE", "fromLabel": "topology.kubernetes.io/zone"}
RACK = {"env": "RACK", "fromAnnotation": "example.com/rack"}
ALLOW_ZONE = allowed_keys("topology.kubernetes.io/zone")


class Reviewer:
    def __init__(self, *grants: Permission, fails: Exception | None = None) -> None:
        self.grants, self.fails = set(grants), fails
        self.asked: list[tuple[str, Permission]] = []

    def may(self, user: Mapping[str, Any], permission: Permission) -> bool:
        self.asked.append((user["username"], permission))
        if self.fails is not None:
            raise self.fails
        return permission in self.grants


def dj(*params: Any, **spec: Any) -> dict[str, Any]:
    return daemonjob("ok", namespace="team", nodeParameters=list(params), **spec)


def review(
    operation: str,
    obj: Any,
    reviewer: Reviewer,
    allowed: AllowedKeys = ALLOW_ZONE,
    old: Any = None,
    user: Mapping[str, Any] = JANE,
) -> dict[str, Any]:
    request = {
        "uid": "u-1",
        "operation": operation,
        "name": "ok",
        "namespace": "team",
        "kind": {"group": "daemonjob.io", "version": "v1alpha1", "kind": "DaemonJob"},
        "object": obj,
        "oldObject": old,
        "userInfo": dict(user),
    }
    body = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}).encode()
    answer = handle(body, Checks(frozenset(), lambda r: node_reads_problems(r, reviewer, allowed)))
    assert answer.code == 200, answer.body
    return json.loads(answer.body)["response"]


def test_an_allowed_key_needs_no_review_and_another_needs_get_nodes() -> None:
    nobody = Reviewer()
    assert review("CREATE", dj(ZONE), nobody) == {"uid": "u-1", "allowed": True}
    assert nobody.asked == []
    refused = review("CREATE", dj(ZONE, RACK), nobody)
    assert refused["allowed"] is False
    assert refused["status"]["message"] == (
        'spec.nodeParameters: Forbidden: user "jane" may not get nodes, and the controller allows no one to '
        'read the node\'s annotation "example.com/rack" (it allows: topology.kubernetes.io/zone): passing a '
        "node's labels and annotations to its Job takes the permission to read Nodes oneself"
    )
    assert [c["field"] for c in refused["status"]["details"]["causes"]] == ["spec.nodeParameters"]
    assert nobody.asked == [("jane", GET_NODES)]
    reader = Reviewer(GET_NODES)
    assert review("CREATE", dj(ZONE, RACK), reader)["allowed"] is True
    assert reader.asked == [("jane", GET_NODES)]


def test_a_prefix_allows_every_key_under_it_and_no_flag_allows_nothing() -> None:
    nobody = Reviewer()
    assert review("CREATE", dj(RACK, ZONE), nobody, allowed_keys("example.com/*, topology.kubernetes.io/*"))["allowed"]
    assert not review(
        "CREATE", dj({"env": "X", "fromLabel": "example.company/x"}), nobody, allowed_keys("example.com/*")
    )["allowed"]
    refused = review("CREATE", dj(ZONE), nobody, AllowedKeys())
    assert "it allows: none" in refused["status"]["message"]
    assert review("CREATE", dj(), nobody, AllowedKeys())["allowed"] is True  # no entries: nothing read


def test_every_update_is_checked_but_the_garbage_collectors_fields() -> None:
    before = dj(RACK)
    nobody = Reviewer()
    retemplated = copy.deepcopy(before)
    retemplated["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["command"] = ["env"]
    assert review("UPDATE", retemplated, nobody, old=before)["allowed"] is False  # a new way to show the value
    finalized = copy.deepcopy(before)
    finalized["metadata"]["finalizers"] = ["example.com/keep"]
    asked = len(nobody.asked)
    assert review("UPDATE", finalized, nobody, old=before)["allowed"] is True
    assert review("UPDATE", dj(ZONE), nobody, old=before)["allowed"] is True  # giving the read up
    assert len(nobody.asked) == asked


def test_no_answer_and_no_user_are_refusals_that_say_so() -> None:
    failed = review("CREATE", dj(RACK), Reviewer(fails=TimeoutError("read timed out")))
    assert failed["status"]["message"] == (
        'spec.nodeParameters: Forbidden: cannot check that user "jane" may get nodes (SubjectAccessReview '
        "failed: read timed out); node parameters outside the allowed keys are refused until it can be checked"
    )
    assert "names no user" in review("CREATE", dj(RACK), Reviewer(GET_NODES), user={})["status"]["message"]


def test_the_flag_takes_keys_and_prefixes_and_refuses_what_is_not_a_key() -> None:
    args = cli.parser().parse_args(["--node-parameter-keys", "topology.kubernetes.io/zone, example.com/*,,"])
    keys: AllowedKeys = args.node_parameter_keys
    assert keys == AllowedKeys(frozenset({"topology.kubernetes.io/zone"}), ("example.com/",))
    assert str(keys) == "example.com/*, topology.kubernetes.io/zone"
    assert cli.parser().parse_args([]).node_parameter_keys == AllowedKeys()
    for bad in ("bad key!", "*", "/*", "a/b/*"):
        with pytest.raises(argparse.ArgumentTypeError):
            allowed_keys(bad)
