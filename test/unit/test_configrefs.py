"""Which ConfigMaps a pod template reads, and how their content moves the revision."""

from __future__ import annotations

import copy
from typing import Any

from daemonjob.domain.spec.configrefs import (
    ConfigMapRef,
    config_revision,
    missing_configmaps,
    referenced_configmaps,
    revision_for,
)
from daemonjob.domain.spec.revision import template_revision
from daemonjob.domain.spec.validate import read_spec
from daemonjob.testing.doubles.builders import daemonjob

POD: dict[str, Any] = {
    "spec": {
        "restartPolicy": "Never",
        "volumes": [
            {"name": "script", "configMap": {"name": "cleanup-script", "defaultMode": 0o755}},
            {"name": "extra", "configMap": {"name": "extra", "optional": True}},
            {
                "name": "bundle",
                "projected": {
                    "sources": [
                        {"configMap": {"name": "projected-a"}},
                        {"secret": {"name": "never-read"}},
                        {"downwardAPI": {"items": []}},
                        {"configMap": {"name": "projected-b", "optional": True}},
                    ]
                },
            },
            {"name": "creds", "secret": {"secretName": "never-read-either"}},
            {"name": "scratch", "emptyDir": {}},
        ],
        "initContainers": [
            {"name": "init", "envFrom": [{"configMapRef": {"name": "init-env"}}, {"secretRef": {"name": "nope"}}]}
        ],
        "containers": [
            {
                "name": "main",
                "envFrom": [{"configMapRef": {"name": "env-all", "optional": True}, "prefix": "X_"}],
                "env": [
                    {"name": "A", "value": "1"},
                    {"name": "B", "valueFrom": {"configMapKeyRef": {"name": "env-one", "key": "b"}}},
                    {"name": "C", "valueFrom": {"secretKeyRef": {"name": "nope", "key": "c"}}},
                    {"name": "D", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
                    # Referenced optionally here and required by the volume above: required.
                    {
                        "name": "E",
                        "valueFrom": {"configMapKeyRef": {"name": "cleanup-script", "key": "x", "optional": True}},
                    },
                ],
            }
        ],
    }
}


def running(pod: dict[str, Any], rerun: bool | None = True) -> dict[str, Any]:
    """A DaemonJob running `pod`, re-run on its ConfigMaps' changes unless told."""
    return daemonjob("cleanup", template={"spec": {"template": pod}}, rerunOnConfigChange=rerun)


def cm(**data: str) -> dict[str, Any]:
    return {"metadata": {"name": "x", "resourceVersion": "1", "labels": {"a": "b"}}, "data": data}


def test_every_kind_of_reference_is_found_and_secrets_are_not() -> None:
    assert referenced_configmaps(POD) == (
        ConfigMapRef("cleanup-script", optional=False),
        ConfigMapRef("env-all", optional=True),
        ConfigMapRef("env-one", optional=False),
        ConfigMapRef("extra", optional=True),
        ConfigMapRef("init-env", optional=False),
        ConfigMapRef("projected-a", optional=False),
        ConfigMapRef("projected-b", optional=True),
    )


def test_templates_without_references_or_malformed_ones() -> None:
    assert referenced_configmaps(None) == ()
    assert referenced_configmaps({}) == ()
    assert referenced_configmaps({"spec": {"containers": [{"name": "c", "image": "busybox"}]}}) == ()
    odd = {
        "spec": {
            "volumes": [None, {"configMap": {}}, {"configMap": {"name": ""}}, {"projected": {"sources": "x"}}],
            "containers": "nope",
            "initContainers": [{"env": [{"valueFrom": None}]}],
        }
    }
    assert referenced_configmaps(odd) == ()


def test_pod_template_of_a_daemonjob() -> None:
    assert read_spec(running(POD)).pod_template is POD
    assert read_spec({"spec": {}}).pod_template is None


def test_content_edits_change_the_revision_metadata_edits_do_not() -> None:
    obj = running(POD)
    base = {"cleanup-script": cm(run="docker image prune -af"), "env-one": cm(b="1")}
    rev = revision_for(read_spec(obj), base)
    edited = {**base, "cleanup-script": cm(run="crictl rmi --prune")}
    assert revision_for(read_spec(obj), edited) != rev
    relabelled = {
        **base,
        "cleanup-script": {**cm(run="docker image prune -af"), "metadata": {"name": "x", "resourceVersion": "9"}},
    }
    assert revision_for(read_spec(obj), relabelled) == rev
    binary = {**base, "env-one": {**cm(b="1"), "binaryData": {"blob": "AAEC"}}}
    assert revision_for(read_spec(obj), binary) != rev


def test_a_configmap_appearing_or_disappearing_changes_the_revision() -> None:
    obj = running(POD)
    present = {"cleanup-script": cm(run="x"), "extra": cm(k="v")}
    absent = {"cleanup-script": cm(run="x")}
    assert revision_for(read_spec(obj), present) != revision_for(read_spec(obj), absent)
    # An empty ConfigMap is not a missing one.
    assert revision_for(read_spec(obj), {**absent, "extra": cm()}) != revision_for(read_spec(obj), absent)


def test_unreferenced_configmaps_never_matter() -> None:
    obj = running(POD)
    base = {"cleanup-script": cm(run="x")}
    assert revision_for(read_spec(obj), {**base, "unrelated": cm(a="1")}) == revision_for(read_spec(obj), base)


def test_without_the_opt_in_the_revision_is_the_template_hash() -> None:
    for rerun in (None, False):
        obj = running(POD, rerun=rerun)
        template = obj["spec"]["jobTemplate"]
        assert revision_for(read_spec(obj), {"cleanup-script": cm(run="x")}) == template_revision(template)
        assert revision_for(read_spec(obj), {"cleanup-script": cm(run="y")}) == template_revision(template)


def test_template_edits_still_change_the_folded_revision_and_order_does_not() -> None:
    obj = running(POD)
    cms = {"cleanup-script": cm(run="x", other="y")}
    changed = copy.deepcopy(obj)
    changed["spec"]["jobTemplate"]["spec"]["backoffLimit"] = 3
    assert revision_for(read_spec(changed), cms) != revision_for(read_spec(obj), cms)
    reordered = {"cleanup-script": {"data": {"other": "y", "run": "x"}}}
    assert revision_for(read_spec(obj), reordered) == revision_for(read_spec(obj), cms)
    refs = referenced_configmaps(POD)
    assert config_revision(obj["spec"]["jobTemplate"], refs, cms) == revision_for(read_spec(obj), cms)
    assert len(revision_for(read_spec(obj), cms)) == 10


def test_missing_required_configmaps_are_named() -> None:
    refs = referenced_configmaps(POD)
    have = {"cleanup-script": cm(run="x"), "env-one": cm(b="1"), "init-env": cm(), "projected-b": None}
    assert missing_configmaps(refs, have) == ["projected-a"]
    assert missing_configmaps(refs, {}) == ["cleanup-script", "env-one", "init-env", "projected-a"]
