"""The documented DaemonJobs, the checks that need no cluster: the docs hold DaemonJobs and
fragments, every example is a DaemonJob applied with -n, clean of the test bed's annotations and
headed by how to use it; and the comparison behind the pruning check.
test/integration/test_documented_daemonjobs.py has the API server check each of them against
the CRD's schema (refused or pruned) and the rule book."""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import pytest

from daemonjob.testing.crd import dropped
from daemonjob.testing.documented import example_files, in_docs, in_examples

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = example_files(ROOT)
DOCUMENTS = in_examples(ROOT)


def test_the_docs_hold_daemonjobs_and_fragments() -> None:
    wheres = [w for w, _ in in_docs(ROOT)]
    assert sum("fragment" not in w for w in wheres) >= 4 and sum("fragment" in w for w in wheres) >= 4, wheres


@pytest.mark.parametrize(("where", "obj"), DOCUMENTS, ids=[w for w, _ in DOCUMENTS])
def test_every_example_is_a_daemonjob_applied_with_n(where: str, obj: dict[str, Any]) -> None:
    assert (obj["apiVersion"], obj["kind"]) == ("daemonjob.io/v1alpha1", "DaemonJob"), where
    assert "namespace" not in obj["metadata"], f"{where}: applied with -n, it names no namespace"


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


def test_what_the_api_server_did_not_keep_is_named_by_its_path() -> None:
    """The comparison behind the integration test's pruning check: added keys (defaults,
    server-set metadata) are fine; a key, a list item or a value changed is named."""
    sent = {"metadata": {"name": "a"}, "spec": {"suspend": True, "nodeSelector": {"matchExpressions": [{"k": 1}]}}}
    got = copy.deepcopy(sent)
    got["metadata"]["uid"] = "u"
    got["spec"].update(historyLimit=1)
    assert dropped(sent, got) == []
    del got["spec"]["suspend"]
    got["spec"]["nodeSelector"]["matchExpressions"][0]["k"] = True
    assert dropped(sent, got) == ["spec.suspend", "spec.nodeSelector.matchExpressions[0].k (sent 1, got True)"]
    got["spec"]["nodeSelector"]["matchExpressions"] = []
    assert dropped(sent, got)[1:] == ["spec.nodeSelector.matchExpressions"]
