"""The rollout gate spec.rollout.haltOnAlerts as decisions: a matching firing alert, or alerts
that cannot be read, hold every new node back and say so; a running Job is never touched."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import pytest

from daemonjob.domain.decision.decide import Decision
from daemonjob.domain.gates import gate_in_force
from daemonjob.domain.rollout.inputs import FiringAlerts
from daemonjob.domain.spec.validate import validate
from daemonjob.testing.doubles.builders import daemonjob, job, nodes
from daemonjob.testing.doubles.decisions import Given, decide_over

NOW = datetime(2024, 3, 6, 12, 0, 0, tzinfo=timezone.utc)
HALT = [{"alertname": "NodeNotReady", "severity": "critical"}, {"alertname": "EtcdDown"}]


def alert(**labels: str) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(labels.items()))


def known(*firing: tuple[tuple[str, str], ...]) -> FiringAlerts:
    return FiringAlerts(firing=tuple(firing), unknown=None)


def decide_with(
    dj: dict[str, Any],
    alerts: FiringAlerts,
    jobs: list[dict[str, Any]] = (),
    node_names: tuple[str, ...] = ("n1", "n2", "n3"),
) -> Decision:
    return decide_over(Given(dj, jobs, nodes(*node_names), NOW, alerts=alerts))


def reconciling(decision: Decision) -> dict[str, Any]:
    (found,) = [c for c in decision.status["conditions"] if c["type"] == "Reconciling"]
    return found


def test_a_matching_firing_alert_halts_new_nodes_and_is_named() -> None:
    dj = daemonjob(rollout={"haltOnAlerts": HALT})
    firing = alert(alertname="NodeNotReady", severity="critical", node="n9")
    decision = decide_with(dj, known(firing, alert(alertname="Watchdog")))
    assert decision.creates == [] and decision.deletes == []
    cond = reconciling(decision)
    assert (cond["status"], cond["reason"]) == ("True", "HaltedByAlerts")
    assert 'NodeNotReady{severity="critical"}' in cond["message"] and "Watchdog" not in cond["message"]
    assert decision.gate == "alerts" and decision.requeue_at is None  # the poller wakes it, not the clock
    assert gate_in_force(decision.status) == ("alerts", "HaltedByAlerts")


def test_only_the_labels_the_matchers_name_are_copied_into_the_status() -> None:
    """Another tenant's alert matching a matcher: its other labels (any value, any length) stay out."""
    dj = daemonjob(rollout={"haltOnAlerts": HALT})
    secret = "x" * 100_000
    firing = [alert(alertname="EtcdDown", tenant=f"other-{i}", note=secret) for i in range(50)]
    cond = reconciling(decide_with(dj, known(*firing)))
    assert cond["reason"] == "HaltedByAlerts"
    assert "50 matching alert(s) firing: EtcdDown;" in cond["message"], cond["message"]
    assert "other-" not in cond["message"] and len(cond["message"]) < 300


def test_every_label_of_a_matcher_must_be_equal() -> None:
    dj = daemonjob(rollout={"haltOnAlerts": HALT})
    decision = decide_with(dj, known(alert(alertname="NodeNotReady", severity="warning")))
    assert [c.node for c in decision.creates] == ["n1", "n2", "n3"]
    assert decision.gate is None


def test_any_matcher_of_the_list_halts() -> None:
    dj = daemonjob(rollout={"haltOnAlerts": HALT})
    decision = decide_with(dj, known(alert(alertname="EtcdDown", instance="x")))
    assert decision.creates == [] and reconciling(decision)["reason"] == "HaltedByAlerts"


def test_resolved_alerts_let_the_rollout_go_on() -> None:
    dj = daemonjob(maxParallel=1, rollout={"haltOnAlerts": HALT})
    jobs = [job(dj, "n1", "succeeded")]
    decision = decide_with(dj, known(), jobs)
    assert [c.node for c in decision.creates] == ["n2"]
    assert reconciling(decision)["reason"] == "RollingOut"


@pytest.mark.parametrize(
    "alerts, why",
    [
        (FiringAlerts(), "without --prometheus-url"),
        (
            FiringAlerts(unknown="Prometheus at http://prom:9090 did not answer: connection refused"),
            "connection refused",
        ),
    ],
)
def test_unknown_alerts_halt_and_say_why(alerts: FiringAlerts, why: str) -> None:
    dj = daemonjob(rollout={"haltOnAlerts": HALT})
    decision = decide_with(dj, alerts)
    assert decision.creates == []
    cond = reconciling(decision)
    assert cond["reason"] == "AlertsUnknown" and why in cond["message"], cond
    assert decision.gate == "alerts"


def test_without_halt_on_alerts_unknown_alerts_change_nothing() -> None:
    decision = decide_with(daemonjob(), FiringAlerts())
    assert [c.node for c in decision.creates] == ["n1", "n2", "n3"] and decision.gate is None


def test_a_halt_never_stops_a_running_job_nor_replaces_an_older_one() -> None:
    dj = daemonjob(maxParallel=2, rollout={"haltOnAlerts": HALT})
    older = job(dj, "n1", "active", revision="old-revision")
    decision = decide_with(dj, known(alert(alertname="EtcdDown")), [older, job(dj, "n2", "active")])
    assert decision.creates == [] and decision.deletes == []
    assert reconciling(decision)["reason"] == "HaltedByAlerts"


def test_a_halt_is_not_named_once_every_node_has_run() -> None:
    dj = daemonjob(rollout={"haltOnAlerts": HALT})
    jobs = [job(dj, n, "succeeded") for n in ("n1", "n2", "n3")]
    decision = decide_with(dj, known(alert(alertname="EtcdDown")), jobs)
    assert decision.gate is None and reconciling(decision)["status"] == "False"


@pytest.mark.parametrize(
    "value, path",
    [
        ("NodeNotReady", "spec.rollout.haltOnAlerts: Invalid value"),
        ([{}], "spec.rollout.haltOnAlerts[0]: Invalid value"),
        ([{"alertname": "A"}, {"bad-label": "x"}], "spec.rollout.haltOnAlerts[1]: Invalid value"),
        ([{"severity": 3}], "spec.rollout.haltOnAlerts[0].severity: Invalid value: 3"),
    ],
)
def test_invalid_matchers_are_problems_naming_their_field(value: Any, path: str) -> None:
    checked = validate(daemonjob(rollout={"haltOnAlerts": value}))
    assert any(p.message.startswith(path) for p in checked.problems), checked.problems


def test_an_invalid_matcher_stalls_and_starts_nothing() -> None:
    decision = decide_with(daemonjob(rollout={"haltOnAlerts": [{}]}), known())
    assert decision.creates == []
    stalled = [c for c in decision.status["conditions"] if c["type"] == "Stalled"][0]
    assert stalled["status"] == "True" and "spec.rollout.haltOnAlerts[0]" in stalled["message"]


def test_valid_matchers_are_read_sorted() -> None:
    checked = validate(daemonjob(rollout={"haltOnAlerts": HALT}))
    assert not checked.problems
    assert checked.rollout.halt_on_alerts == (
        (("alertname", "NodeNotReady"), ("severity", "critical")),
        (("alertname", "EtcdDown"),),
    )
