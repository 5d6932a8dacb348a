"""What a review costs the webhook is what its budget charges: for every shape of review,
the memory handling the largest one adds (measured, a fresh process each) stays within
defaults.WEBHOOK_MEMORY_PER_BYTE per byte; and no list or map of a spec costs a problem per
item (a problem each made a 3.5 MiB review cost hundreds of times its size)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from daemonjob import defaults
from daemonjob.domain.spec.validate import validate
from daemonjob.testing.costlyreviews import MAINTENANCE, SHAPES, costly_review, peak_memory
from daemonjob.testing.doubles.builders import daemonjob

MIB = 1024 * 1024
LARGEST = defaults.WEBHOOK_MAX_REQUEST_BYTES


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_the_largest_review_of_each_shape_costs_at_most_what_the_budget_charges(shape: str) -> None:
    body = costly_review(shape, LARGEST)
    assert len(body) == LARGEST
    peak, code, answer = peak_memory(body)
    charged = LARGEST * defaults.WEBHOOK_MEMORY_PER_BYTE
    print(f"{shape}: {peak / MIB:.0f} MiB, {peak / len(body):.1f} per byte; charged {charged / MIB:.0f} MiB")
    assert code == 200 and answer < 64 * 1024, (code, answer)  # an answer, and a short one
    assert peak <= charged, f"{shape}: {peak / MIB:.0f} MiB handled, {charged / MIB:.0f} MiB charged"


# Every list and map of a spec the rule book reads, the CRD's arrays among them.
PLACES = [
    "spec.after",
    "spec.rollout.haltOnAlerts",
    "spec.healthCheck.daemonSets",
    "spec.nodeParameters",
    "spec.nodeSelector.matchExpressions",
    "spec.nodeSelector.matchLabels",
    "spec.nodeMaintenance.drain.ignorePodSelector.matchExpressions",
    "spec.jobTemplate.metadata.labels",
    "spec.jobTemplate.spec.template.spec.tolerations",
    "spec.jobTemplate.spec.template.spec.containers",
    "spec.jobTemplate.spec.template.spec.initContainers",
    "spec.jobTemplate.spec.template.spec.nodeSelector",
    "spec.jobTemplate.spec.template.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution."
    "nodeSelectorTerms",
]
UNITS: list[Any] = [{}, [], 0, "", "a", "a/b", {"key": "a", "operator": "In"}, {"0": 0}]


def _put(obj: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    *parents, last = path.split(".")
    node = obj
    for key in parents:
        node = node.setdefault(key, {})
    node[last] = value
    return obj


@pytest.mark.parametrize("place", PLACES)
def test_no_list_or_map_of_the_spec_costs_a_problem_per_item(place: str) -> None:
    count = 2000
    for unit in UNITS:
        for value in (
            [copy.deepcopy(unit) for _ in range(count)],
            {f"k{i}": copy.deepcopy(unit) for i in range(count)},
        ):
            dj = _put(daemonjob("many", nodeMaintenance=MAINTENANCE), place, value)
            problems = validate(dj).problems
            assert len(problems) <= 8, (place, unit, len(problems), problems[:3])
    # one matcher of many labels counts as many
    matcher = {f"label{i}": 0 for i in range(count)}
    problems = validate(_put(daemonjob("many"), "spec.rollout.haltOnAlerts", [matcher])).problems
    assert [p.message for p in problems] == [
        "spec.rollout.haltOnAlerts[0]: Too many: 2000: must have at most 32 labels"
    ]


def test_a_list_longer_than_the_schema_allows_is_one_problem_in_the_api_servers_words() -> None:
    problems = validate(daemonjob("many", after=[f"dj-{i}" for i in range(33)])).problems
    assert [p.message for p in problems] == ["spec.after: Too many: 33: must have at most 32 items"]
    problems = validate(daemonjob("many", healthCheck={"daemonSets": ["kube-system/x"] * 65})).problems
    assert [p.message for p in problems] == ["spec.healthCheck.daemonSets: Too many: 65: must have at most 64 items"]
    assert validate(daemonjob("many", after=[f"dj-{i}" for i in range(32)])).problems == []
