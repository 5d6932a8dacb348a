"""The rule book: every problem at once, each naming its field, the bounds of a spec."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from daemonjob import defaults
from daemonjob.domain.spec.maintenancespec import GRACE_RULE
from daemonjob.domain.spec.validate import problems_of, validate
from daemonjob.testing.doubles.builders import daemonjob


def test_a_good_spec_has_no_problem() -> None:
    assert problems_of(daemonjob(schedule="*/5 * * * *", timeZone="Europe/Berlin", historyLimit=10)) == []


def test_every_problem_at_once_each_with_its_field() -> None:
    bad = daemonjob(
        schedule="0 25 * * *",
        timeZone="Mars/Olympus",
        maxParallel="150",
        concurrencyPolicy="Allow",
        startingDeadlineSeconds=-1,
        historyLimit=11,
        nodeSelector={"matchLabels": {"bad key!": "x"}},
    )
    bad["spec"]["jobTemplate"]["spec"]["ttlSecondsAfterFinished"] = 10
    bad["spec"]["jobTemplate"]["spec"]["template"]["spec"]["restartPolicy"] = "Always"
    fields = [p.field for p in problems_of(bad)]
    assert set(fields) == {
        "spec.schedule",
        "spec.timeZone",
        "spec.maxParallel",
        "spec.concurrencyPolicy",
        "spec.startingDeadlineSeconds",
        "spec.historyLimit",
        "spec.nodeSelector.matchLabels",
        "spec.jobTemplate.spec.ttlSecondsAfterFinished",
        "spec.jobTemplate.spec.template.spec.restartPolicy",
    }, fields
    bad["spec"]["jobTemplate"]["metadata"] = {"annotations": {"x": "y" * defaults.JOB_TEMPLATE_MAX_BYTES}}
    for p in problems_of(bad):
        assert p.message.startswith(p.field + ": "), p
        assert "; " not in p.message, p  # problems are joined with "; ": each must stay one item


def test_history_limit_maximum_keeps_the_most_it_may() -> None:
    checked = validate(daemonjob(historyLimit=defaults.HISTORY_LIMIT_MAX + 1))
    [problem] = checked.problems
    assert problem.field == "spec.historyLimit"
    assert f"must be less than or equal to {defaults.HISTORY_LIMIT_MAX}" in problem.message
    assert checked.settings.history_limit == defaults.HISTORY_LIMIT_MAX


def test_a_template_too_large_is_refused_by_its_serialized_size() -> None:
    big = daemonjob()
    big["spec"]["jobTemplate"]["metadata"] = {"annotations": {"x": "y" * defaults.JOB_TEMPLATE_MAX_BYTES}}
    [problem] = problems_of(big)
    assert problem.field == "spec.jobTemplate" and problem.reason == "TemplateTooLarge"
    assert f"must have at most {defaults.JOB_TEMPLATE_MAX_BYTES} bytes" in problem.message


def test_a_huge_refused_value_is_not_repeated_whole() -> None:
    bad = daemonjob()
    bad["spec"]["jobTemplate"]["spec"]["template"]["spec"]["restartPolicy"] = "A" * 1_000_000
    [problem] = [p for p in problems_of(bad) if p.field.endswith("restartPolicy")]
    assert len(problem.message) < 1000


def test_bad_name_is_named() -> None:
    bad = daemonjob()
    bad["metadata"]["name"] = "x" * 64
    assert [p.field for p in problems_of(bad)] == ["metadata.name"]


# -- spec.nodeMaintenance ------------------------------------------------------------------------
def maintenance(raw: Any) -> tuple[Any, list[str]]:
    """What validate compiles of spec.nodeMaintenance = `raw`, and the messages of its problems."""
    checked = validate(daemonjob(nodeMaintenance=raw))
    return checked.maintenance, [p.message for p in checked.problems]


def test_maintenance_unset_or_asking_nothing_compiles_to_none_without_problems() -> None:
    assert validate(daemonjob()).maintenance is None
    for raw in ({}, {"cordon": False}, {"cordon": False, "keepFailedCordoned": True}):
        assert maintenance(raw) == (None, []), raw


def test_maintenance_compiles_with_the_defaults_of_the_contract() -> None:
    compiled, problems = maintenance({"cordon": True, "drain": {}})
    assert problems == []
    assert compiled.cordon is True and compiled.keep_failed_cordoned is False
    drain = compiled.drain
    assert drain.timeout == defaults.DRAIN_TIMEOUT == timedelta(minutes=10)
    assert (
        drain.grace_period_seconds,
        drain.delete_emptydir_data,
        drain.force,
        drain.ignore_pods,
        drain.on_timeout,
    ) == (None, False, False, None, "Fail")
    assert maintenance({"cordon": True})[0].drain is None


def test_maintenance_compiles_every_field() -> None:
    compiled, problems = maintenance(
        {
            "cordon": True,
            "keepFailedCordoned": True,
            "drain": {
                "timeout": "1h30m",
                "gracePeriodSeconds": 1,
                "deleteEmptyDirData": True,
                "force": True,
                "onTimeout": "Skip",
                "ignorePodSelector": {"matchLabels": {"app": "keep"}},
            },
        }
    )
    assert problems == []
    assert compiled.keep_failed_cordoned is True
    drain = compiled.drain
    assert (drain.timeout, drain.grace_period_seconds, drain.delete_emptydir_data, drain.force, drain.on_timeout) == (
        timedelta(hours=1, minutes=30),
        1,
        True,
        True,
        "Skip",
    )
    assert drain.ignore_pods({"app": "keep", "x": "y"}) is True
    assert drain.ignore_pods({"app": "evict"}) is False


DRAIN = "spec.nodeMaintenance.drain"
MAINTENANCE_PROBLEMS: list[tuple[str, Any, str]] = [
    ("not-an-object", ["cordon"], 'spec.nodeMaintenance: Invalid value: ["cordon"]: must be an object'),
    ("cordon-type", {"cordon": "yes"}, 'spec.nodeMaintenance.cordon: Invalid value: "yes": must be a boolean'),
    (
        "keep-type",
        {"cordon": True, "keepFailedCordoned": 1},
        "spec.nodeMaintenance.keepFailedCordoned: Invalid value: 1: must be a boolean",
    ),
    ("drain-not-an-object", {"cordon": True, "drain": True}, f"{DRAIN}: Invalid value: true: must be an object"),
    (
        "drain-without-cordon",
        {"drain": {}},
        f"{DRAIN}: Invalid value: a drain needs cordon: true (pods evicted from a schedulable node may come "
        "straight back)",
    ),
    (
        "drain-with-cordon-false",
        {"cordon": False, "drain": {"force": True}},
        f"{DRAIN}: Invalid value: a drain needs cordon: true (pods evicted from a schedulable node may come "
        "straight back)",
    ),
    (
        "timeout-format",
        {"cordon": True, "drain": {"timeout": "10 minutes"}},
        f'{DRAIN}.timeout: Invalid value: "10 minutes": must be a duration longer than 0s, in hours, minutes and '
        'seconds such as "5m" or "1h30m"',
    ),
    (
        "timeout-zero",
        {"cordon": True, "drain": {"timeout": "0s"}},
        f'{DRAIN}.timeout: Invalid value: "0s": must be a duration longer than 0s, in hours, minutes and seconds '
        'such as "5m" or "1h30m"',
    ),
    (
        "timeout-number",
        {"cordon": True, "drain": {"timeout": 600}},
        f"{DRAIN}.timeout: Invalid value: 600: must be a duration longer than 0s, in hours, minutes and seconds "
        'such as "5m" or "1h30m"',
    ),
    (
        "grace-negative",
        {"cordon": True, "drain": {"gracePeriodSeconds": -1}},
        f"{DRAIN}.gracePeriodSeconds: Invalid value: -1: {GRACE_RULE}",
    ),
    (
        "grace-zero",
        {"cordon": True, "drain": {"gracePeriodSeconds": 0}},
        f"{DRAIN}.gracePeriodSeconds: Invalid value: 0: {GRACE_RULE}",
    ),
    (
        "grace-text",
        {"cordon": True, "drain": {"gracePeriodSeconds": "30"}},
        f'{DRAIN}.gracePeriodSeconds: Invalid value: "30": {GRACE_RULE}',
    ),
    (
        "grace-boolean",
        {"cordon": True, "drain": {"gracePeriodSeconds": True}},
        f"{DRAIN}.gracePeriodSeconds: Invalid value: true: {GRACE_RULE}",
    ),
    (
        "empty-dir-type",
        {"cordon": True, "drain": {"deleteEmptyDirData": "true"}},
        f'{DRAIN}.deleteEmptyDirData: Invalid value: "true": must be a boolean',
    ),
    ("force-type", {"cordon": True, "drain": {"force": 1}}, f"{DRAIN}.force: Invalid value: 1: must be a boolean"),
    (
        "on-timeout",
        {"cordon": True, "drain": {"onTimeout": "X"}},
        f'{DRAIN}.onTimeout: Unsupported value: "X": supported values: "Fail", "Skip"',
    ),
    (
        "on-timeout-case",
        {"cordon": True, "drain": {"onTimeout": "fail"}},
        f'{DRAIN}.onTimeout: Unsupported value: "fail": supported values: "Fail", "Skip"',
    ),
    (
        "ignore-selector-key",
        {"cordon": True, "drain": {"ignorePodSelector": {"matchLabels": {"bad key!": "x"}}}},
        f'{DRAIN}.ignorePodSelector.matchLabels: Invalid value: "bad key!": name part must consist of alphanumeric '
        "characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName', or "
        "'my.name', or '123-abc')",
    ),
    (
        "ignore-selector-operator",
        {
            "cordon": True,
            "drain": {"ignorePodSelector": {"matchExpressions": [{"key": "app", "operator": "Gt", "values": ["1"]}]}},
        },
        f'{DRAIN}.ignorePodSelector.matchExpressions[0].operator: Unsupported value: "Gt": supported values: "In", '
        '"NotIn", "Exists", "DoesNotExist"',
    ),
    (
        "ignore-selector-not-an-object",
        {"cordon": True, "drain": {"ignorePodSelector": "app=keep"}},
        f'{DRAIN}.ignorePodSelector: Invalid value: "str": must be an object',
    ),  # the selector rules name the type
]


@pytest.mark.parametrize(
    ("raw", "message"), [c[1:] for c in MAINTENANCE_PROBLEMS], ids=[c[0] for c in MAINTENANCE_PROBLEMS]
)
def test_each_maintenance_problem_names_its_field_and_nothing_is_compiled(raw: Any, message: str) -> None:
    checked = validate(daemonjob(nodeMaintenance=raw))
    assert [p.message for p in checked.problems] == [message]
    [problem] = checked.problems
    assert problem.field == message.split(": ", 1)[0]
    assert problem.reason == ("InvalidSelector" if "ignorePodSelector" in message else "InvalidSpec")
    assert "; " not in problem.message  # problems are joined with "; "
    assert checked.maintenance is None  # a half-understood drain is worse than none


def test_every_maintenance_problem_at_once() -> None:
    compiled, problems = maintenance(
        {
            "cordon": "yes",
            "keepFailedCordoned": "no",
            "drain": {
                "timeout": "0s",
                "gracePeriodSeconds": -5,
                "deleteEmptyDirData": 0,
                "force": "no",
                "onTimeout": "Retry",
                "ignorePodSelector": {"matchExpressions": [{"key": "a", "operator": "In", "values": []}]},
            },
        }
    )
    assert compiled is None
    fields = [m.split(": ", 1)[0] for m in problems]
    assert sorted(fields) == sorted(
        [
            "spec.nodeMaintenance.cordon",
            "spec.nodeMaintenance.keepFailedCordoned",
            f"{DRAIN}.timeout",
            f"{DRAIN}.gracePeriodSeconds",
            f"{DRAIN}.onTimeout",
            f"{DRAIN}.ignorePodSelector.matchExpressions[0].values",
            f"{DRAIN}.deleteEmptyDirData",
            f"{DRAIN}.force",
            DRAIN,
        ]
    ), problems


def test_a_maintenance_problem_leaves_the_rest_of_the_spec_usable() -> None:
    checked = validate(daemonjob(maxParallel=2, nodeMaintenance={"cordon": True, "drain": {"onTimeout": "X"}}))
    assert [p.field for p in checked.problems] == [f"{DRAIN}.onTimeout"]
    assert checked.settings.max_parallel == 2
