"""Node maintenance only where the controller's --node-maintenance-namespaces allows it."""

from __future__ import annotations

from typing import Any

import pytest

from daemonjob import cli
from daemonjob.domain.nodework.allowance import NODE_MAINTENANCE_NOT_ALLOWED, maintenance_refusal
from daemonjob.testing.doubles.builders import daemonjob

CORDON = {"cordon": True}
DRAIN = {"cordon": True, "drain": {"timeout": "5m"}}


@pytest.mark.parametrize("maintenance", [CORDON, DRAIN, {"drain": {}}], ids=["cordon", "drain", "drain-alone"])
def test_refused_outside_the_allowed_namespaces_naming_them(maintenance: dict[str, Any]) -> None:
    problem = maintenance_refusal(
        daemonjob(namespace="team-a", nodeMaintenance=maintenance), frozenset({"ops", "infra"})
    )
    assert problem is not None
    assert problem.reason == NODE_MAINTENANCE_NOT_ALLOWED == "NodeMaintenanceNotAllowed"
    assert problem.field == "spec.nodeMaintenance"
    assert problem.message == (
        "spec.nodeMaintenance: Forbidden: node maintenance is not allowed in namespace "
        '"team-a" (the controller allows it in: infra, ops)'
    )


def test_with_no_namespace_allowed_the_message_says_the_flag_is_empty() -> None:
    problem = maintenance_refusal(daemonjob(namespace="ops", nodeMaintenance=CORDON), frozenset())
    assert problem is not None
    assert problem.message == (
        "spec.nodeMaintenance: Forbidden: node maintenance is not allowed in namespace "
        '"ops" (the controller allows it in: none, --node-maintenance-namespaces is empty)'
    )


@pytest.mark.parametrize(
    "maintenance",
    [None, {}, {"cordon": False}, {"keepFailedCordoned": True}, {"drain": None}],
    ids=["unset", "empty", "cordon-false", "keep-only", "drain-null"],
)
def test_a_daemonjob_asking_for_no_maintenance_is_never_refused(maintenance: Any) -> None:
    assert maintenance_refusal(daemonjob(namespace="anywhere", nodeMaintenance=maintenance), frozenset()) is None


def test_allowed_in_a_listed_namespace() -> None:
    assert maintenance_refusal(daemonjob(namespace="ops", nodeMaintenance=DRAIN), frozenset({"ops"})) is None


def test_an_object_without_spec_or_metadata_is_read_without_error() -> None:
    assert maintenance_refusal({}, frozenset()) is None
    problem = maintenance_refusal({"spec": {"nodeMaintenance": CORDON}}, frozenset({"ops"}))
    assert problem is not None and 'namespace ""' in problem.message


def test_the_flag_is_a_comma_separated_set_of_namespace_names() -> None:
    assert cli.parser().parse_args([]).node_maintenance_namespaces == frozenset()
    args = cli.parser().parse_args(["--node-maintenance-namespaces=ops, infra,,ops"])
    assert args.node_maintenance_namespaces == frozenset({"ops", "infra"})
    assert cli.parser().parse_args(["--node-maintenance-namespaces="]).node_maintenance_namespaces == frozenset()


@pytest.mark.parametrize("value", ["Ops", "team_a", "-ops", "x" * 64, "ops/infra"])
def test_the_flag_refuses_what_is_no_namespace_name(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.parser().parse_args([f"--node-maintenance-namespaces=ops,{value}"])
    assert "--node-maintenance-namespaces" in capsys.readouterr().err
