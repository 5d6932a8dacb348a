"""The rule book: every problem at once, each naming its field, the bounds of a spec."""

from __future__ import annotations

from typing import Any

from daemonjob import defaults
from daemonjob.domain.validate import problems_of, validate
from daemonjob.testing.builders import make_dj


def dj(**spec: Any) -> dict[str, Any]:
    return make_dj("ok", namespace="ns", **spec)


def test_a_good_spec_has_no_problem() -> None:
    assert problems_of(dj(schedule="*/5 * * * *", timeZone="Europe/Berlin", historyLimit=10)) == []


def test_every_problem_at_once_each_with_its_field() -> None:
    bad = dj(schedule="0 25 * * *", timeZone="Mars/Olympus", maxParallel="150", concurrencyPolicy="Allow",
             startingDeadlineSeconds=-1, historyLimit=11, nodeSelector={"matchLabels": {"bad key!": "x"}})
    bad["spec"]["jobTemplate"]["spec"]["ttlSecondsAfterFinished"] = 10
    bad["spec"]["jobTemplate"]["spec"]["template"]["spec"]["restartPolicy"] = "Always"
    fields = [p.field for p in problems_of(bad)]
    assert set(fields) == {
        "spec.schedule", "spec.timeZone", "spec.maxParallel", "spec.concurrencyPolicy",
        "spec.startingDeadlineSeconds", "spec.historyLimit", "spec.nodeSelector.matchLabels",
        "spec.jobTemplate.spec.ttlSecondsAfterFinished", "spec.jobTemplate.spec.template.spec.restartPolicy",
    }, fields
    bad["spec"]["jobTemplate"]["metadata"] = {"annotations": {"x": "y" * defaults.JOB_TEMPLATE_MAX_BYTES}}
    for p in problems_of(bad):
        assert p.message.startswith(p.field + ": "), p
        assert "; " not in p.message, p  # problems are joined with "; ": each must stay one item


def test_history_limit_maximum_keeps_the_most_it_may() -> None:
    checked = validate(dj(historyLimit=defaults.HISTORY_LIMIT_MAX + 1))
    [problem] = checked.problems
    assert problem.field == "spec.historyLimit"
    assert f"must be less than or equal to {defaults.HISTORY_LIMIT_MAX}" in problem.message
    assert checked.settings.history_limit == defaults.HISTORY_LIMIT_MAX


def test_a_template_too_large_is_refused_by_its_serialized_size() -> None:
    big = dj()
    big["spec"]["jobTemplate"]["metadata"] = {"annotations": {"x": "y" * defaults.JOB_TEMPLATE_MAX_BYTES}}
    [problem] = problems_of(big)
    assert problem.field == "spec.jobTemplate" and problem.reason == "TemplateTooLarge"
    assert f"must have at most {defaults.JOB_TEMPLATE_MAX_BYTES} bytes" in problem.message


def test_a_huge_refused_value_is_not_repeated_whole() -> None:
    bad = dj()
    bad["spec"]["jobTemplate"]["spec"]["template"]["spec"]["restartPolicy"] = "A" * 1_000_000
    [problem] = [p for p in problems_of(bad) if p.field.endswith("restartPolicy")]
    assert len(problem.message) < 1000


def test_bad_name_is_named() -> None:
    bad = dj()
    bad["metadata"]["name"] = "x" * 64
    assert [p.field for p in problems_of(bad)] == ["metadata.name"]
