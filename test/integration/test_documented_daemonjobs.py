"""The documented DaemonJobs are valid, as the API server itself judges them: every DaemonJob of
examples/ and of the YAML blocks of README.md and docs/ (a `spec:` fragment inside a minimal
DaemonJob) is created with a server-side dry run in a namespace of the local cluster, against
manifests/crd.yaml as installed, and must be neither refused (the CRD's structural schema) nor
pruned (every field sent comes back; the schema's defaults may be added). No admission webhook
serves the test's namespace, so the rule book is checked with the domain's own function, the
one the webhook and the controller apply."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from daemonjob.domain.spec.validate import problems_of
from daemonjob.machinery.client.kube import Kube
from daemonjob.testing.crd import served_problems
from daemonjob.testing.documented import FRAGMENT_BASE, in_docs, in_examples

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTED = [
    *in_docs(ROOT),
    *((where, obj) for where, obj in in_examples(ROOT) if obj.get("kind") == "DaemonJob"),
]

pytestmark = pytest.mark.cluster


def _problems(kube: Kube, namespace: str, obj: dict[str, Any]) -> list[str]:
    return served_problems(kube, namespace, obj) + [p.message for p in problems_of(obj)]


@pytest.mark.parametrize(("where", "obj"), DOCUMENTED, ids=[w for w, _ in DOCUMENTED])
def test_every_documented_daemonjob_is_accepted_whole(
    kube: Kube, installed_crd: None, namespace: str, where: str, obj: dict[str, Any]
) -> None:
    assert _problems(kube, namespace, obj) == [], where


def test_the_check_reports_what_the_api_server_drops_or_refuses(
    kube: Kube, installed_crd: None, namespace: str
) -> None:
    """Not vacuous: a misspelt field and an unknown one are pruned silently by the API server and
    reported here; a wrong type, an enum, a pattern, a minimum and a missing required field are
    refused, each named."""
    pruned = copy.deepcopy(FRAGMENT_BASE)
    pruned["spec"].update(maxParralel=2, nodeMaintenance={"cordon": True, "drain": {"timeoutSecond": 5}})
    assert served_problems(kube, namespace, pruned) == [
        "spec.maxParralel: not kept by the API server",
        "spec.nodeMaintenance.drain.timeoutSecond: not kept by the API server",
    ]

    refused = copy.deepcopy(FRAGMENT_BASE)
    refused["spec"].update(suspend="yes", rerunPolicy="Always", maxFailedNodes="110%", historyLimit=-1)
    del refused["spec"]["jobTemplate"]
    problems = served_problems(kube, namespace, refused)
    expected = {
        "spec.suspend": "must be of type boolean",
        "spec.rerunPolicy": "Unsupported value",
        "spec.maxFailedNodes": "should match",
        "spec.historyLimit": "greater than or equal to 0",
        "spec.jobTemplate": "Required value",
    }
    assert len(problems) == len(expected), problems
    for field, says in expected.items():
        assert any(p.startswith(f"{field}: ") and says in p for p in problems), (field, problems)

    # A documented DaemonJob passes as it is: the check does not refuse what it should accept.
    assert served_problems(kube, namespace, FRAGMENT_BASE) == []
