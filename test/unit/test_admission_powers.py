"""Asking for node maintenance takes the requester's own power to cordon and drain: what the
webhook asks the API server, when, and what it answers (a fake reviewer stands for it)."""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any

from daemonjob.admission.powers import (
    EVICT_PODS,
    PATCH_NODES,
    AccessReviewer,
    CachedAccessReviewer,
    KubeAccessReviewer,
    Permission,
    powers_problems,
)
from daemonjob.admission.review import Checks, handle
from daemonjob.machinery.process.clock import FakeClock
from daemonjob.testing.doubles.builders import daemonjob

JANE = {"username": "jane", "uid": "u-jane", "groups": ["devs", "system:authenticated"], "extra": {"scope": ["a"]}}
CORDON = {"cordon": True}
DRAIN = {"cordon": True, "drain": {"timeout": "5m"}}


class Reviewer:
    """Holds the permissions in `grants`; raises `fails` if set. Records what it was asked."""

    def __init__(self, *grants: Permission, fails: Exception | None = None) -> None:
        self.grants = set(grants)
        self.fails = fails
        self.asked: list[tuple[str, Permission]] = []

    def may(self, user: Mapping[str, Any], permission: Permission) -> bool:
        self.asked.append((user["username"], permission))
        if self.fails is not None:
            raise self.fails
        return permission in self.grants


def dj(**spec: Any) -> dict[str, Any]:
    return daemonjob("ok", namespace="ops", **spec)


def review(
    operation: str, obj: Any, reviewer: AccessReviewer, old: Any = None, user: Mapping[str, Any] = JANE
) -> dict[str, Any]:
    request = {
        "uid": "u-1",
        "operation": operation,
        "name": "ok",
        "namespace": "ops",
        "kind": {"group": "daemonjob.io", "version": "v1alpha1", "kind": "DaemonJob"},
        "object": obj,
        "oldObject": old,
        "userInfo": dict(user),
    }
    body = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}).encode()
    answer = handle(body, Checks(frozenset({"ops"}), lambda r: powers_problems(r, reviewer)))
    assert answer.code == 200, answer.body
    return json.loads(answer.body)["response"]


def test_a_cordon_needs_patch_nodes_and_a_drain_evictions_too_each_named_when_missing() -> None:
    refused = review("CREATE", dj(nodeMaintenance=CORDON), Reviewer())
    assert refused["allowed"] is False
    assert refused["status"]["message"] == (
        'spec.nodeMaintenance: Forbidden: user "jane" may not patch nodes in all namespaces: asking for node '
        "maintenance takes the permissions to cordon and drain nodes oneself"
    )
    assert [c["field"] for c in refused["status"]["details"]["causes"]] == ["spec.nodeMaintenance"]
    drain = review("CREATE", dj(nodeMaintenance=DRAIN), Reviewer(PATCH_NODES))
    assert 'user "jane" may not create pods/eviction in all namespaces' in drain["status"]["message"]
    both = review("CREATE", dj(nodeMaintenance=DRAIN), Reviewer())
    assert "may not patch nodes nor create pods/eviction in all namespaces" in both["status"]["message"]


def test_who_holds_them_is_admitted_and_nobody_is_asked_about_a_daemonjob_without_maintenance() -> None:
    reviewer = Reviewer(PATCH_NODES, EVICT_PODS)
    assert review("CREATE", dj(nodeMaintenance=DRAIN), reviewer)["allowed"] is True
    assert reviewer.asked == [("jane", PATCH_NODES), ("jane", EVICT_PODS)]
    nobody = Reviewer()
    assert review("CREATE", dj(), nobody)["allowed"] is True
    assert review("CREATE", dj(nodeMaintenance={"cordon": False}), nobody)["allowed"] is True
    assert nobody.asked == []


def test_every_update_of_a_daemonjob_that_asks_is_checked_but_the_garbage_collectors_fields() -> None:
    before = dj(nodeMaintenance=DRAIN)
    # a new template (or a run-now annotation) cordons and drains every node again
    retemplated = copy.deepcopy(before)
    retemplated["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["image"] = "evil:1"
    assert review("UPDATE", retemplated, Reviewer(), before)["allowed"] is False
    annotated = copy.deepcopy(before)
    annotated["metadata"]["annotations"] = {"daemonjob.io/run-now": "2026-11-25T12:00:00Z"}
    assert review("UPDATE", annotated, Reviewer(), before)["allowed"] is False
    # the finalizer going (the controller, or an owner who lost the power) is not checked
    finalized = copy.deepcopy(before)
    finalized["metadata"]["finalizers"] = ["daemonjob.io/node-maintenance"]
    finalized["metadata"]["resourceVersion"] = "42"
    nobody = Reviewer()
    assert review("UPDATE", before, nobody, finalized) == {"uid": "u-1", "allowed": True}
    assert review("UPDATE", finalized, nobody, before) == {"uid": "u-1", "allowed": True}
    # nor is an update that gives node maintenance up
    assert review("UPDATE", dj(), nobody, before) == {"uid": "u-1", "allowed": True}
    assert nobody.asked == []


def test_no_answer_from_the_api_server_is_a_refusal_that_says_so() -> None:
    refused = review("CREATE", dj(nodeMaintenance=CORDON), Reviewer(fails=TimeoutError("read timed out")))
    assert refused["allowed"] is False
    assert refused["status"]["message"] == (
        'spec.nodeMaintenance: Forbidden: cannot check that user "jane" may patch nodes (SubjectAccessReview '
        "failed: read timed out); node maintenance is refused until it can be checked"
    )


def test_a_request_without_a_user_is_refused() -> None:
    refused = review("CREATE", dj(nodeMaintenance=CORDON), Reviewer(PATCH_NODES), user={})
    assert "the request names no user" in refused["status"]["message"]


def test_the_subject_access_review_carries_the_requester_and_the_cluster_wide_permission() -> None:
    class Kube:
        def __init__(self) -> None:
            self.created: list[tuple[str, dict[str, Any], float | None]] = []

        def create(self, path: str, body: dict[str, Any], *, request_timeout: float | None = None) -> dict[str, Any]:
            self.created.append((path, body, request_timeout))
            return {"status": {"allowed": True}}

    kube = Kube()
    assert KubeAccessReviewer(kube, timeout=1.5).may(JANE, EVICT_PODS) is True  # type: ignore[arg-type]
    ((path, body, timeout),) = kube.created
    assert path == "/apis/authorization.k8s.io/v1/subjectaccessreviews" and timeout == 1.5
    assert body["spec"] == {
        "user": "jane",
        "uid": "u-jane",
        "groups": ["devs", "system:authenticated"],
        "extra": {"scope": ["a"]},
        "resourceAttributes": {"group": "", "verb": "create", "resource": "pods", "subresource": "eviction"},
    }


def test_a_grace_period_of_zero_is_refused_at_apply_time() -> None:
    refused = review(
        "CREATE",
        dj(nodeMaintenance={"cordon": True, "drain": {"gracePeriodSeconds": 0}}),
        Reviewer(PATCH_NODES, EVICT_PODS),
    )
    assert refused["allowed"] is False
    assert [c["field"] for c in refused["status"]["details"]["causes"]] == [
        "spec.nodeMaintenance.drain.gracePeriodSeconds"
    ]
    assert "Invalid value: 0: must be an integer >= 1" in refused["status"]["message"]


def test_a_release_request_takes_the_power_to_uncordon_oneself() -> None:
    from daemonjob.domain.nodework.releases import ANNOTATION_RELEASE, release_text

    before = dj(nodeMaintenance={**CORDON, "keepFailedCordoned": True})
    released = copy.deepcopy(before)
    released["metadata"]["annotations"] = {ANNOTATION_RELEASE: release_text({"node-07": "2026-11-25T12:00:00Z"})}
    refused = review("UPDATE", released, Reviewer(), before)
    assert refused["allowed"] is False and 'user "jane" may not patch nodes' in refused["status"]["message"]
    assert review("UPDATE", released, Reviewer(PATCH_NODES), before)["allowed"] is True


def cached(reviewer: Reviewer, clock: FakeClock, qps: float = 1.0, burst: int = 2) -> CachedAccessReviewer:
    return CachedAccessReviewer(reviewer, ttl=10.0, qps=qps, burst=burst, clock=clock, timer=clock.now)


def test_answers_are_kept_a_short_while_keyed_by_user_groups_extra_and_permission() -> None:
    clock = FakeClock()
    inner = Reviewer(PATCH_NODES, EVICT_PODS)
    reviewer = cached(inner, clock, qps=100, burst=100)
    for _ in range(5):
        assert review("CREATE", dj(nodeMaintenance=DRAIN), reviewer)["allowed"] is True
    assert len(inner.asked) == 2  # one SubjectAccessReview per permission, then the answers kept
    other_groups = {**JANE, "groups": ["devs"]}
    other_extra = {**JANE, "extra": {"scope": ["b"]}}
    review("CREATE", dj(nodeMaintenance=CORDON), reviewer, user=other_groups)
    review("CREATE", dj(nodeMaintenance=CORDON), reviewer, user=other_extra)
    assert len(inner.asked) == 4  # other groups, other extra: asked again
    clock.step(11)
    review("CREATE", dj(nodeMaintenance=CORDON), reviewer)
    assert len(inner.asked) == 5  # expired: a revoked permission takes effect within the TTL


def test_a_denial_is_kept_apart_and_a_failed_review_is_not_kept() -> None:
    clock = FakeClock()
    inner = Reviewer()
    reviewer = cached(inner, clock, qps=100, burst=100)
    assert review("CREATE", dj(nodeMaintenance=CORDON), reviewer)["allowed"] is False
    assert review("CREATE", dj(nodeMaintenance=CORDON), reviewer)["allowed"] is False
    assert len(inner.asked) == 1
    inner.fails = OSError("connection refused")
    bob = {**JANE, "username": "bob"}
    assert review("CREATE", dj(nodeMaintenance=CORDON), reviewer, user=bob)["allowed"] is False
    inner.fails = None
    inner.grants = {PATCH_NODES}
    assert review("CREATE", dj(nodeMaintenance=CORDON), reviewer, user=bob)["allowed"] is True


def test_reviews_of_requesters_not_kept_are_rate_limited_and_refused_beyond_naming_why() -> None:
    clock = FakeClock()
    inner = Reviewer(PATCH_NODES, EVICT_PODS)
    reviewer = cached(inner, clock, qps=1.0, burst=2)
    answers = [
        review("CREATE", dj(nodeMaintenance=CORDON), reviewer, user={**JANE, "username": f"u{i}"}) for i in range(5)
    ]
    assert [a["allowed"] for a in answers] == [True, True, False, False, False]
    assert len(inner.asked) == 2  # beyond the burst nothing was asked
    message = answers[2]["status"]["message"]
    assert 'cannot check now that user "u2" may patch nodes' in message and "retry" in message, message
    assert review("CREATE", dj(nodeMaintenance=CORDON), reviewer, user={**JANE, "username": "u0"})["allowed"] is True
    clock.step(1.0)
    assert review("CREATE", dj(nodeMaintenance=CORDON), reviewer, user={**JANE, "username": "u9"})["allowed"] is True


def test_one_client_spending_its_allowance_does_not_shut_out_another() -> None:
    """A pod posting reviews of made-up users spends its own address's allowance, not the API
    server's: the operators' reviews, coming from the API server, are still asked."""
    clock = FakeClock()
    inner = Reviewer(PATCH_NODES)
    reviewer = CachedAccessReviewer(inner, qps=1.0, burst=2, total_qps=4.0, total_burst=8, clock=clock)
    pod, apiserver = reviewer.for_client("10.0.0.7"), reviewer.for_client("10.96.0.1")
    flood = [
        review("CREATE", dj(nodeMaintenance=CORDON), pod, user={**JANE, "username": f"made-up-{i}"})["allowed"]
        for i in range(5)
    ]
    assert flood == [True, True, False, False, False]
    assert review("CREATE", dj(nodeMaintenance=CORDON), apiserver, user={**JANE, "username": "ops"})["allowed"]
    assert [u for u, _ in inner.asked] == ["made-up-0", "made-up-1", "ops"]


def test_the_addresses_together_are_bounded_and_the_addresses_kept_are_bounded() -> None:
    clock = FakeClock()
    inner = Reviewer(PATCH_NODES)
    reviewer = CachedAccessReviewer(inner, qps=1.0, burst=2, total_qps=1.0, total_burst=5, max_clients=3, clock=clock)
    answers = [
        review(
            "CREATE", dj(nodeMaintenance=CORDON), reviewer.for_client(f"10.0.0.{i}"), user={**JANE, "username": f"u{i}"}
        )["allowed"]
        for i in range(8)
    ]
    assert answers == [True] * 5 + [False] * 3  # each address had room; all of them did not
    assert len(reviewer._clients) == 3  # the most recent addresses only
