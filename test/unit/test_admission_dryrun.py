"""The webhook's dry run of the node Job: what it creates, how the API server's refusals map
to the DaemonJob's fields, when it is a warning instead, and when it is not asked at all."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from daemonjob.admission.dryrun import (
    PLACEHOLDER_NODE,
    REFUSED_BY_CLUSTER,
    ClusterDryRun,
    Outcome,
    changes_what_runs,
    dry_run_job,
    map_field,
    pod_of,
    refusal,
    representative_node,
)
from daemonjob.admission.review import Checks, decide
from daemonjob.domain.shared.apinames import ANNOTATION_NODE
from daemonjob.domain.spec.problems import Problem
from daemonjob.domain.spec.spec import DaemonJobSpec
from daemonjob.domain.spec.validate import read_spec
from daemonjob.machinery.client.kube import ApiError
from daemonjob.testing.doubles.builders import daemonjob, node

PARAMS = [{"env": "ZONE", "fromLabel": "zone"}]


def request(operation: str = "CREATE", obj: Any = None, old: Any = None) -> dict[str, Any]:
    return {
        "uid": "u",
        "operation": operation,
        "namespace": "ns",
        "kind": {"group": "daemonjob.io", "version": "v1alpha1", "kind": "DaemonJob"},
        "object": obj if obj is not None else daemonjob("dj", namespace="ns"),
        "oldObject": old,
    }


def invalid(*causes: tuple[str, str], status: int = 422, reason: str = "Invalid", message: str = "") -> ApiError:
    body = {"details": {"causes": [{"field": f, "message": m} for f, m in causes]}}
    return ApiError(status, reason, message or "invalid", body)


# -- field paths ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("kind", "path", "mapped"),
    [
        ("Job", "spec.template.spec.containers", "spec.jobTemplate.spec.template.spec.containers"),
        ("Job", "spec.template.spec.containers[0].image", "spec.jobTemplate.spec.template.spec.containers[0].image"),
        ("Job", "spec.template.labels", "spec.jobTemplate.spec.template.metadata.labels"),  # the Job API's name
        ("Job", "spec.template.annotations", "spec.jobTemplate.spec.template.metadata.annotations"),
        ("Job", "metadata.labels", "spec.jobTemplate.metadata.labels"),
        ("Job", "metadata.name", "metadata.name"),
        ("Job", "spec.backoffLimit", "spec.jobTemplate.spec.backoffLimit"),
        (
            "Pod",
            "spec.containers[0].securityContext",
            "spec.jobTemplate.spec.template.spec.containers[0].securityContext",
        ),
        ("Pod", "metadata.labels", "spec.jobTemplate.spec.template.metadata.labels"),
        ("Pod", "", "spec.jobTemplate.spec.template.spec"),
    ],
)
def test_fields_of_the_job_and_pod_map_to_the_daemonjobs(kind: str, path: str, mapped: str) -> None:
    assert map_field(path, kind) == mapped


def test_an_invalid_job_gives_one_problem_per_cause_with_the_mapped_field() -> None:
    problems = refusal(
        invalid(
            ("spec.template.spec.containers", "Required value"),
            ("spec.template.labels", 'Invalid value: "bad key!": name part must ...'),
        ),
        "Job",
    )
    assert problems == [
        Problem(
            REFUSED_BY_CLUSTER,
            "spec.jobTemplate.spec.template.spec.containers: Required value",
            "spec.jobTemplate.spec.template.spec.containers",
        ),
        Problem(
            REFUSED_BY_CLUSTER,
            'spec.jobTemplate.spec.template.metadata.labels: Invalid value: "bad key!": name part must ...',
            "spec.jobTemplate.spec.template.metadata.labels",
        ),
    ]


def test_a_policy_refusal_without_causes_names_what_refused_without_the_dry_runs_name() -> None:
    message = 'pods "dj-n1-abc-x7k2p" is forbidden: violates PodSecurity "restricted:latest": privileged (...)'
    (problem,) = refusal(ApiError(403, "Forbidden", message), "Pod") or []
    assert problem.field == "spec.jobTemplate.spec.template.spec"
    assert problem.message == (
        "spec.jobTemplate.spec.template.spec: Forbidden: the namespace refuses the node Job's pod: "
        'violates PodSecurity "restricted:latest": privileged (...)'
    )
    quota = 'jobs.batch "dj-n1-abc" is forbidden: exceeded quota: q, requested: count/jobs.batch=1, used: ...'
    (problem,) = refusal(ApiError(403, "Forbidden", quota), "Job") or []
    assert problem.message.startswith("spec.jobTemplate: Forbidden: the namespace refuses the node Job: exceeded quota")


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        (ApiError(500, "InternalError", "etcd"), "Job"),
        (ApiError(503, "ServiceUnavailable", "x"), "Pod"),
        (ApiError(429, "TooManyRequests", "x"), "Job"),
        (ApiError(504, "Timeout", "x"), "Job"),
        (
            ApiError(
                403,
                "Forbidden",
                'jobs.batch is forbidden: User "system:serviceaccount:daemonjob-system:daemonjob-controller" '
                'cannot create resource "jobs" in API group "batch" in the namespace "ns"',
            ),
            "Job",
        ),
        (ApiError(400, "BadRequest", 'admission webhook "x.example.com" does not support dry run'), "Job"),
        (ApiError(403, "Forbidden", 'pods "p" is forbidden: exceeded quota: q, requested: pods=1'), "Pod"),
    ],
)
def test_answers_that_say_nothing_of_the_object_are_no_refusal(error: ApiError, kind: str) -> None:
    assert refusal(error, kind) is None


# -- what is created -----------------------------------------------------------------------------
def test_the_job_is_the_controllers_on_an_eligible_node_with_its_values() -> None:
    dj = daemonjob("dj", namespace="", nodeSelector={"matchLabels": {"pool": "a"}}, nodeParameters=PARAMS)
    spec = read_spec(dj)
    nodes = [node("other", labels={"pool": "b"}), node("n1", labels={"pool": "a", "zone": "z1"})]
    chosen = representative_node(nodes, spec)
    assert chosen is nodes[1]
    job = dry_run_job(dj, "ns", spec, chosen)
    assert job["metadata"]["namespace"] == "ns"
    assert job["metadata"]["annotations"][ANNOTATION_NODE] == "n1"
    assert job["spec"]["template"]["spec"]["containers"][0]["env"][:2] == [
        {"name": "DAEMONJOB_NODE_NAME", "value": "n1"},
        {"name": "ZONE", "value": "z1"},
    ]
    assert job["metadata"]["ownerReferences"][0]["uid"]  # a dry-run DaemonJob may have none: one is made up
    pod = pod_of(job)
    assert pod["metadata"]["generateName"] == job["metadata"]["name"] + "-"
    assert pod["metadata"]["labels"]["batch.kubernetes.io/job-name"] == job["metadata"]["name"]
    assert pod["spec"] is job["spec"]["template"]["spec"]


def test_no_eligible_node_gives_a_placeholder_and_the_defaults() -> None:
    dj = daemonjob("dj", nodeSelector={"matchLabels": {"pool": "a"}}, nodeParameters=PARAMS)
    spec = read_spec(dj)
    assert representative_node([node("b", labels={"pool": "b"})], spec) is None
    job = dry_run_job(dj, "ns", spec, None)
    assert job["metadata"]["annotations"][ANNOTATION_NODE] == PLACEHOLDER_NODE
    assert job["spec"]["template"]["spec"]["containers"][0]["env"][1] == {"name": "ZONE", "value": ""}


def test_only_a_change_of_what_runs_is_dry_run_again() -> None:
    old = daemonjob("dj", namespace="ns")
    relabelled = {**old, "metadata": {**old["metadata"], "labels": {"team": "a"}}}
    assert changes_what_runs(request("CREATE", old))
    assert not changes_what_runs(request("UPDATE", relabelled, old))
    assert not changes_what_runs(request("UPDATE", daemonjob("dj", namespace="ns", suspend=True), old))
    assert changes_what_runs(request("UPDATE", daemonjob("dj", namespace="ns", nodeParameters=PARAMS), old))
    edited = daemonjob("dj", namespace="ns")
    edited["spec"]["jobTemplate"]["spec"]["backoffLimit"] = 3
    assert changes_what_runs(request("UPDATE", edited, old))


# -- the dry run against a fake API server -------------------------------------------------------
class FakeKube:
    def __init__(self, *answers: Any) -> None:
        self.answers = list(answers)
        self.calls: list[tuple[str, dict[str, Any], dict[str, Any]]] = []

    def create(self, path: str, body: dict[str, Any], **kw: Any) -> Mapping[str, Any]:
        self.calls.append((path, body, kw))
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer if answer is not None else body


def run(kube: FakeKube, deadline: float = 100.0, now: float = 0.0) -> Outcome:
    dry = ClusterDryRun(kube, lambda: [node("n1")], clock=lambda: now)  # type: ignore[arg-type]
    req = request()
    return dry(req, read_spec(req["object"]), deadline)


def test_the_job_then_its_pod_with_dry_run_all_within_the_time_left() -> None:
    kube = FakeKube(None, None)
    assert run(kube, deadline=1.0) == Outcome()
    (job_path, _, job_kw), (pod_path, pod, pod_kw) = kube.calls
    assert (job_path, pod_path) == ("/apis/batch/v1/namespaces/ns/jobs", "/api/v1/namespaces/ns/pods")
    assert job_kw["dryRun"] == pod_kw["dryRun"] == "All"
    assert job_kw["request_timeout"] == 1.0  # what is left, under the per-call bound
    assert pod["kind"] == "Pod"


def test_a_refused_job_is_not_followed_by_its_pod() -> None:
    kube = FakeKube(invalid(("spec.template.spec.containers", "Required value")))
    outcome = run(kube)
    assert [p.field for p in outcome.problems] == ["spec.jobTemplate.spec.template.spec.containers"]
    assert len(kube.calls) == 1


def test_no_time_left_or_no_answer_is_a_warning() -> None:
    outcome = run(FakeKube(), deadline=0.1)
    assert outcome.problems == [] and "no time left" in outcome.warnings[0]
    outcome = run(FakeKube(TimeoutError("read timed out")))
    assert outcome.problems == [] and "could not be made (TimeoutError" in outcome.warnings[0]
    outcome = run(FakeKube(None, ApiError(503, "ServiceUnavailable", "down")))
    assert outcome.problems == [] and outcome.warnings[0].startswith(
        "the dry run of a node Job's pod could not be made"
    )


# -- in the review ------------------------------------------------------------------------------
def test_the_review_asks_the_cluster_only_when_its_own_rules_pass_and_passes_warnings_on() -> None:
    asked: list[DaemonJobSpec] = []

    def refusing(req: Mapping[str, Any], spec: DaemonJobSpec, deadline: float) -> Outcome:
        asked.append(spec)
        return Outcome(problems=[Problem(REFUSED_BY_CLUSTER, "spec.jobTemplate.spec.x: Required value")])

    response = decide(request(), Checks(dry_run=refusing))
    assert response["allowed"] is False
    assert response["status"]["details"]["causes"][0]["field"] == "spec.jobTemplate.spec.x"
    bad = daemonjob("dj", namespace="ns", schedule="0 25 * * *")
    assert (
        decide(request("CREATE", bad), Checks(dry_run=refusing))["status"]["details"]["causes"][0]["field"]
        == "spec.schedule"
    )
    assert len(asked) == 1  # not asked for an object its own rules refuse

    def warning(req: Mapping[str, Any], spec: DaemonJobSpec, deadline: float) -> Outcome:
        return Outcome(warnings=["the dry run of a node Job could not be made (...)"])

    assert decide(request(), Checks(dry_run=warning)) == {
        "uid": "u",
        "allowed": True,
        "warnings": ["the dry run of a node Job could not be made (...)"],
    }
    old = daemonjob("dj", namespace="ns")
    relabelled = {**old, "metadata": {**old["metadata"], "labels": {"team": "a"}}}
    assert decide(request("UPDATE", relabelled, old), Checks(dry_run=refusing))["allowed"] is True


def test_a_daemonjob_that_cordons_is_dry_run_with_the_cordons_toleration() -> None:
    dj = daemonjob("dj", nodeMaintenance={"cordon": True})
    job = dry_run_job(dj, "ns", read_spec(dj), node("n1"))
    tolerations = job["spec"]["template"]["spec"].get("tolerations") or []
    assert {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"} in tolerations
    assert (
        "tolerations"
        not in dry_run_job(daemonjob("dj"), "ns", read_spec(daemonjob("dj")), None)["spec"]["template"]["spec"]
    )
