"""The Job watch's typed decode keeps everything the cache keeps, and takes any other shape whole."""

import copy

import orjson
import pytest

from daemonjob.controller.runtime.jobdecode import decode_job_event
from daemonjob.controller.runtime.transforms import Interner, job_transform
from daemonjob.domain.jobs.jobbody import build_job
from daemonjob.domain.shared.apinames import (
    ANNOTATION_BOOT_ID,
    ANNOTATION_NODE,
    ANNOTATION_NODE_CHECK,
    LABEL_ATTEMPT,
    LABEL_RUN,
    LABEL_TEMPLATE_HASH,
)
from daemonjob.testing.doubles.builders import daemonjob, job_template

DJ = daemonjob(resource_version=None, template=job_template(labels={"team": "sre"}, backoff_limit=None))


def every_field_job() -> dict:
    """A Job as the API server sends it, with every field the cache keeps set, and more."""
    job = build_job(DJ, "n1", "rev1")
    meta = job["metadata"]
    meta.update(
        uid="uid-n1",
        resourceVersion="42",
        creationTimestamp="2026-11-02T10:00:00Z",
        deletionTimestamp="2026-11-02T10:01:00Z",
        generation=1,
        finalizers=["foregroundDeletion"],
        managedFields=[{"manager": "daemonjob-controller", "fieldsV1": {"f:spec": {"f:template": {}}}}],
    )
    meta["labels"].update({LABEL_RUN: "r1", LABEL_TEMPLATE_HASH: "h1", LABEL_ATTEMPT: "2", "team": "sre"})
    meta["annotations"].update({ANNOTATION_BOOT_ID: "boot-1", ANNOTATION_NODE_CHECK: "ok", "other": "x"})
    meta["ownerReferences"].append({"apiVersion": "v1", "kind": "ConfigMap", "name": "c", "uid": "u2"})
    job["spec"]["ttlSecondsAfterFinished"] = 60
    job["status"] = {
        "startTime": "2026-11-02T10:00:00Z",
        "completionTime": "2026-11-02T10:00:05Z",
        "succeeded": 1,
        "conditions": [
            {"type": "SuccessCriteriaMet", "status": "True"},
            {
                "type": "Complete",
                "status": "True",
                "lastProbeTime": "2026-11-02T10:00:05Z",
                "lastTransitionTime": "2026-11-02T10:00:05Z",
                "reason": "Done",
            },
        ],
    }
    return job


def line(event_type: str, obj: dict) -> bytes:
    return orjson.dumps({"type": event_type, "object": obj})


@pytest.mark.parametrize("event_type", ["ADDED", "MODIFIED", "DELETED"])
def test_the_cache_keeps_the_same_job_from_either_decode(event_type):
    raw = line(event_type, every_field_job())
    typed = decode_job_event(raw)
    generic = orjson.loads(raw)
    assert typed["type"] == event_type
    assert typed["object"]["metadata"]["resourceVersion"] == "42"  # what the informer reads
    shared = Interner()
    assert job_transform(copy.deepcopy(typed["object"]), shared) == job_transform(generic["object"], shared)
    kept = job_transform(typed["object"], shared)
    assert kept["metadata"]["annotations"][ANNOTATION_NODE] == "n1"
    assert kept["metadata"]["annotations"][ANNOTATION_BOOT_ID] == "boot-1"
    assert kept["spec"]["ttlSecondsAfterFinished"] == 60


def test_what_the_cache_drops_is_not_built():
    typed = decode_job_event(line("ADDED", every_field_job()))["object"]
    assert "managedFields" not in typed["metadata"]
    assert typed["spec"]["template"] == {"metadata": {}}, "of the pod template only its annotations"
    assert set(typed["status"]) == {"completionTime", "conditions"}


def test_an_error_event_is_decoded_whole():
    status = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "too old resource version: 1 (42)",
        "reason": "Expired",
        "code": 410,
    }
    event = decode_job_event(line("ERROR", status))
    assert event == {"type": "ERROR", "object": status}


def test_a_bookmark_keeps_its_resource_version():
    bookmark = {"kind": "Job", "apiVersion": "batch/v1", "metadata": {"resourceVersion": "77"}}
    assert decode_job_event(line("BOOKMARK", bookmark))["object"]["metadata"]["resourceVersion"] == "77"


def test_a_field_of_an_unexpected_type_falls_back_to_the_generic_decode():
    job = every_field_job()
    job["metadata"]["labels"]["odd"] = 7  # never from a real API server, but nothing is lost
    raw = line("MODIFIED", job)
    assert decode_job_event(raw) == orjson.loads(raw)


def test_malformed_json_is_an_error_as_before():
    with pytest.raises(ValueError):
        decode_job_event(b'{"type": "ADDED", "object": ')
