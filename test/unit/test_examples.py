"""The documented DaemonJobs are valid: every manifest in examples/ and every YAML block of
README.md and docs/ passes the CRD's schema (manifests/crd.yaml, as the API server checks it,
fields it would prune included) and the controller's rule book (what admission refuses and
what sets Stalled). A fragment (`spec:` alone) is checked inside a minimal DaemonJob."""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from daemonjob.domain.validate import problems_of
from daemonjob.testing.crd import crd_schema, schema_problems

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")), *sorted(ROOT.glob("*.md"))]
SCHEMA = crd_schema(ROOT / "manifests" / "crd.yaml")
BLOCK = re.compile(r"^```ya?ml\n(.*?)^```", re.M | re.S)

# What a fragment is checked inside: the smallest DaemonJob the rule book accepts.
BASE: dict[str, Any] = {
    "apiVersion": "daemonjob.io/v1alpha1",
    "kind": "DaemonJob",
    "metadata": {"name": "fragment", "namespace": "ops"},
    "spec": {
        "jobTemplate": {
            "spec": {
                "backoffLimit": 0,
                "template": {
                    "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox:1.36"}]}
                },
            }
        }
    },
}


def _blocks() -> list[tuple[str, dict[str, Any]]]:
    """(where, DaemonJob) for every DaemonJob (or spec fragment) in a YAML block of the docs."""
    found = []
    for doc in sorted(set(DOCS)):
        text = doc.read_text()
        for match in BLOCK.finditer(text):
            line = text[: match.start()].count("\n") + 1
            for obj in yaml.safe_load_all(match.group(1)):
                where = f"{doc.relative_to(ROOT)}:{line}"
                if isinstance(obj, dict) and obj.get("kind") == "DaemonJob":
                    found.append((where, obj))
                elif isinstance(obj, dict) and set(obj) == {"spec"}:
                    whole = copy.deepcopy(BASE)
                    whole["spec"].update(obj["spec"])
                    found.append((f"{where} (fragment)", whole))
    return found


BLOCKS = _blocks()


def _examples() -> list[tuple[str, dict[str, Any]]]:
    return [
        (f"{p.name}:{obj['metadata']['name']}", obj)
        for p in EXAMPLES
        for obj in yaml.safe_load_all(p.read_text())
        if obj
    ]


def _problems(obj: dict[str, Any]) -> list[str]:
    return schema_problems(obj, SCHEMA) + [p.message for p in problems_of(obj)]


@pytest.mark.parametrize(("where", "obj"), BLOCKS, ids=[w for w, _ in BLOCKS])
def test_every_daemonjob_in_the_docs_is_valid(where: str, obj: dict[str, Any]) -> None:
    assert _problems(obj) == [], where


@pytest.mark.parametrize(("where", "obj"), _examples(), ids=[w for w, _ in _examples()])
def test_every_example_is_a_valid_daemonjob(where: str, obj: dict[str, Any]) -> None:
    assert (obj["apiVersion"], obj["kind"]) == ("daemonjob.io/v1alpha1", "DaemonJob"), where
    assert "namespace" not in obj["metadata"], f"{where}: applied with -n, it names no namespace"
    assert _problems(obj) == [], where


def test_the_docs_hold_daemonjobs_and_fragments() -> None:
    wheres = [w for w, _ in BLOCKS]
    assert sum("fragment" not in w for w in wheres) >= 4 and sum("fragment" in w for w in wheres) >= 4, wheres


def test_the_examples_are_clean_and_say_how_to_use_them() -> None:
    """At least seven; real images pinned by tag, no test-bed annotation; a header saying what it
    does, what it needs, how to apply it and what to look at."""
    assert len(EXAMPLES) >= 7
    for path in EXAMPLES:
        text = path.read_text()
        assert "sim.daemonjob.io" not in text, path.name
        header = text.split("\napiVersion:", 1)[0]
        assert header.startswith("# "), path.name
        assert "Needs:" in header and f"kubectl apply -n ops -f examples/{path.name}" in header, path.name
        assert "kubectl daemonjob " in header, path.name
        for image in re.findall(r"image: (\S+)", text):
            assert re.fullmatch(r"[a-z0-9./-]+:[0-9][\w.-]*", image), f"{path.name}: {image} is not pinned by tag"


def test_the_schema_check_finds_what_the_api_server_would_refuse_or_drop() -> None:
    """The checker is not vacuous: a typo, a wrong type, an enum, a pattern, a minimum."""
    obj = copy.deepcopy(BASE)
    obj["spec"].update(maxParralel=2, suspend="yes", rerunPolicy="Always", maxFailedNodes="110%", historyLimit=-1)
    obj["spec"]["nodeMaintenance"] = {"cordon": True, "drain": {"onTimeout": "Retry"}}
    problems = schema_problems(obj, SCHEMA)
    assert any(p.startswith("spec.maxParralel: unknown field") for p in problems), problems
    assert any(p.startswith("spec.suspend: Invalid value: 'yes': must be of type boolean") for p in problems)
    assert any(p.startswith("spec.rerunPolicy: Unsupported value") for p in problems), problems
    assert any(p.startswith("spec.maxFailedNodes: Invalid value: '110%'") for p in problems), problems
    assert any(p.startswith("spec.historyLimit: Invalid value: -1") for p in problems), problems
    assert any(p.startswith("spec.nodeMaintenance.drain.onTimeout: Unsupported value") for p in problems), problems
    del obj["spec"]["jobTemplate"]
    assert "spec.jobTemplate: Required value" in schema_problems(obj, SCHEMA)
