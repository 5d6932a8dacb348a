"""The Job body contract and reading state back from Jobs."""

from __future__ import annotations

import copy
from datetime import datetime, timezone
from typing import Any

import pytest

from daemonjob.domain.jobs.contract import job_created, job_finish_time, job_node, job_revision, job_state
from daemonjob.domain.jobs.jobbody import build_job
from daemonjob.domain.jobs.owners import daemonjob_ref
from daemonjob.domain.shared.apinames import ANNOTATION_NODE, LABEL_NAME, LABEL_REVISION
from daemonjob.domain.shared.timestamps import format_time, parse_time
from daemonjob.domain.spec.revision import job_name
from daemonjob.testing.doubles.builders import daemonjob

REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"


def with_every_field() -> dict[str, Any]:
    """A template with every field build_job keeps, drops or merges into."""
    return daemonjob(
        uid="uid-1",
        generation=2,
        template={
            "metadata": {
                "name": "ignored",
                "labels": {"team": "sec"},
                "annotations": {"note": "x"},
            },
            "spec": {
                "backoffLimit": 2,
                "completions": 5,
                "parallelism": 3,
                "template": {
                    "metadata": {"labels": {"app": "audit"}},
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [{"name": "c", "image": "busybox"}],
                        "affinity": {
                            "nodeAffinity": {
                                REQUIRED: {
                                    "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "Exists"}]}]
                                },
                                "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "preference": {}}],
                            },
                            "podAntiAffinity": {"x": 1},
                        },
                    },
                },
            },
        },
    )


def test_build_job_metadata() -> None:
    job = build_job(with_every_field(), "node-1", "rev1234567")
    meta = job["metadata"]
    assert job["apiVersion"] == "batch/v1" and job["kind"] == "Job"
    assert meta["name"] == job_name("audit", "node-1", "rev1234567")
    assert meta["namespace"] == "ops"
    assert meta["labels"] == {"team": "sec", LABEL_NAME: "audit", LABEL_REVISION: "rev1234567"}
    assert meta["annotations"] == {"note": "x", ANNOTATION_NODE: "node-1"}
    assert meta["ownerReferences"] == [
        {
            "apiVersion": "daemonjob.io/v1alpha1",
            "kind": "DaemonJob",
            "name": "audit",
            "uid": "uid-1",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert set(meta) == {"name", "namespace", "labels", "annotations", "ownerReferences"}


def test_build_job_spec_runs_once_pinned_to_the_node() -> None:
    job = build_job(with_every_field(), "node-1", "rev1234567")
    spec = job["spec"]
    assert spec["completions"] == 1 and spec["parallelism"] == 1
    assert spec["backoffLimit"] == 2
    pod = spec["template"]
    assert pod["metadata"]["labels"] == {"app": "audit", LABEL_NAME: "audit", LABEL_REVISION: "rev1234567"}
    affinity = pod["spec"]["affinity"]
    assert affinity["nodeAffinity"][REQUIRED] == {
        "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-1"]}]}]
    }
    assert affinity["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"] == [
        {"weight": 1, "preference": {}}
    ]
    assert affinity["podAntiAffinity"] == {"x": 1}
    assert "tolerations" not in pod["spec"]


def test_build_job_with_minimal_template() -> None:
    dj = {
        "metadata": {"name": "a", "namespace": "n", "uid": "u"},
        "spec": {"jobTemplate": {"spec": {"template": {"spec": {"restartPolicy": "OnFailure"}}}}},
    }
    job = build_job(dj, "n1", "r")
    assert job["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][REQUIRED]["nodeSelectorTerms"][0]["matchFields"][
        0
    ]["values"] == ["n1"]
    assert job["metadata"]["labels"] == {LABEL_NAME: "a", LABEL_REVISION: "r"}


def test_build_job_never_mutates_input_nor_shares_structure() -> None:
    dj = with_every_field()
    before = copy.deepcopy(dj)
    job = build_job(dj, "node-1", "r")
    assert dj == before
    job["spec"]["template"]["spec"]["containers"][0]["image"] = "changed"
    assert dj == before
    assert build_job(dj, "node-1", "r") == build_job(dj, "node-1", "r")


def test_readers_roundtrip() -> None:
    job = build_job(with_every_field(), "node-1", "rev")
    assert job_node(job) == "node-1"
    assert job_revision(job) == "rev"
    assert job_node({}) is None and job_revision({}) is None


def _job(conditions: list[dict[str, str]] | None = None, deleting: bool = False, **status: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "j", "creationTimestamp": "2024-01-01T00:00:00Z"}
    if deleting:
        meta["deletionTimestamp"] = "2024-01-01T01:00:00Z"
    return {"metadata": meta, "status": {"conditions": conditions or [], **status}}


@pytest.mark.parametrize(
    ("job", "state"),
    [
        (_job(), "active"),
        (_job([{"type": "Complete", "status": "True"}]), "succeeded"),
        (_job([{"type": "Failed", "status": "True"}]), "failed"),
        (_job([{"type": "Failed", "status": "False"}]), "active"),
        (_job([{"type": "FailureTarget", "status": "True"}]), "active"),  # pods may still be running
        (_job([{"type": "Complete", "status": "True"}], deleting=True), "terminating"),
        (_job(deleting=True), "terminating"),
        ({}, "active"),
    ],
)
def test_job_state(job: dict[str, Any], state: str) -> None:
    assert job_state(job) == state


def test_finish_time_prefers_completion_time_then_condition() -> None:
    ok = _job(
        [{"type": "Complete", "status": "True", "lastTransitionTime": "2024-01-01T00:05:00Z"}],
        completionTime="2024-01-01T00:04:00Z",
    )
    failed = _job([{"type": "Failed", "status": "True", "lastTransitionTime": "2024-01-01T00:06:00Z"}])
    assert job_finish_time(ok) == datetime(2024, 1, 1, 0, 4, tzinfo=timezone.utc)
    assert job_finish_time(failed) == datetime(2024, 1, 1, 0, 6, tzinfo=timezone.utc)
    assert job_finish_time(_job()) is None
    assert job_created(ok) == datetime(2024, 1, 1, tzinfo=timezone.utc)


def test_time_helpers() -> None:
    assert parse_time("2024-01-01T00:00:00.123456Z") == datetime(2024, 1, 1, 0, 0, 0, 123456, tzinfo=timezone.utc)
    assert parse_time("garbage") is None and parse_time(None) is None
    assert format_time(datetime(2024, 5, 6, 7, 8, 9, 999, tzinfo=timezone.utc)) == "2024-05-06T07:08:09Z"
    assert format_time(datetime(2024, 5, 6, 7, 8, 9)) == "2024-05-06T07:08:09Z"


@pytest.mark.parametrize(
    ("ref", "ours"),
    [
        ({"apiVersion": "daemonjob.io/v1alpha1", "kind": "DaemonJob", "controller": True}, True),
        ({"apiVersion": "daemonjob.io/v1", "kind": "DaemonJob", "controller": True}, True),
        ({"apiVersion": "example.com/v1", "kind": "DaemonJob", "controller": True}, False),
        ({"apiVersion": "daemonjob.io.example.com/v1", "kind": "DaemonJob", "controller": True}, False),
        ({"apiVersion": "daemonjob.io/v1alpha1", "kind": "CronJob", "controller": True}, False),
        ({"apiVersion": "daemonjob.io/v1alpha1", "kind": "DaemonJob"}, False),
        ({"kind": "DaemonJob", "controller": True}, False),
    ],
)
def test_daemonjob_ref_is_a_daemonjob_of_our_group_in_any_version(ref: dict, ours: bool) -> None:
    job = {"metadata": {"ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "x"}, ref]}}
    assert (daemonjob_ref(job) is ref) is ours
