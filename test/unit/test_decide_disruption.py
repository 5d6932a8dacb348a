"""The cluster's disruption budget: no cordon while --max-unavailable-nodes nodes are out of
service (a count, or a percentage of all nodes rounded up), whoever took them out; never the
last node in service of the protected set; a DaemonJob without node maintenance unaffected."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import pytest

from daemonjob.domain.decision.decide import Decision
from daemonjob.domain.nodework.disruption import Disruption, admit, out_of_service
from daemonjob.domain.nodework.maintenance import MaintenanceInput
from daemonjob.domain.spec.selectors import compile_label_selector
from daemonjob.domain.spec.selectortext import parse_selector_text
from daemonjob.testing.doubles.builders import NS, daemonjob, job_template, node
from daemonjob.testing.doubles.decisions import Given, decide_over

NOW = datetime(2026, 11, 25, 12, 0, 0, tzinfo=timezone.utc)
CONTROL_PLANE = "node-role.kubernetes.io/control-plane"
PROTECTED = compile_label_selector(parse_selector_text(CONTROL_PLANE))


def cordoning(**spec: Any) -> dict[str, Any]:
    return daemonjob(nodeMaintenance={"cordon": True}, **spec)


def budget(limit: int | str, nodes: int, unavailable: int = 0, protected_up: int = 0, **kw: Any) -> Disruption:
    return Disruption(limit, nodes, unavailable, protected=PROTECTED, protected_selector=CONTROL_PLANE,
                      protected_up=protected_up, **kw)  # fmt: skip


def decide(dj: dict[str, Any], nodes: list[dict[str, Any]], d: Disruption) -> Decision:
    return decide_over(
        Given(dj, [], nodes, NOW, maintenance=MaintenanceInput(allowed_namespaces=frozenset({NS})), disruption=d)
    )


def reconciling(decision: Decision) -> dict[str, Any]:
    (found,) = [c for c in decision.status["conditions"] if c["type"] == "Reconciling"]
    return found


def cordoned(decision: Decision) -> list[str]:
    return [c.node for c in decision.node_work.cordons] if decision.node_work is not None else []


@pytest.mark.parametrize(
    ("limit", "nodes", "expected"),
    [
        (3, 20, 3),
        ("15%", 20, 3),
        ("10%", 20, 2),
        ("10%", 21, 3),  # 2.1 rounds up, as Kubernetes scales a maxUnavailable
        ("10%", 3, 1),  # at least one node in a small cluster
        ("1%", 1, 1),
        ("0%", 50, 0),
        (0, 50, 0),
        ("100%", 7, 7),
    ],
)
def test_the_limit_is_a_count_or_a_percentage_of_all_nodes_rounded_up(
    limit: int | str, nodes: int, expected: int
) -> None:
    assert Disruption(limit, nodes).limit == expected


def test_unschedulable_notready_and_tainted_nodes_are_out_of_service() -> None:
    assert not out_of_service(node("a"))
    assert out_of_service(node("a", unschedulable=True))
    assert out_of_service(node("a", ready=False))
    unknown = node("a")
    unknown["status"]["conditions"][0]["status"] = "Unknown"
    assert out_of_service(unknown)
    assert out_of_service(node("a", taints=[{"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}]))
    fresh = {
        "metadata": {"name": "a"},
        "spec": {"taints": [{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}]},
    }
    assert out_of_service(fresh)  # never reported: the lifecycle controller's taint says so
    assert not out_of_service(node("a", taints=[{"key": "x", "effect": "NoSchedule"}]))


def test_at_the_limit_no_node_is_cordoned_and_the_status_gives_the_count() -> None:
    d = decide(cordoning(maxParallel=5), [node("a"), node("b")], budget(3, 20, unavailable=3))
    assert cordoned(d) == [] and d.creates == []
    cond = reconciling(d)
    assert cond["reason"] == "ClusterDisruptionBudget"
    assert "3 of 20 nodes unavailable, limit 3" in cond["message"]
    assert d.gate == "clusterDisruptionBudget"
    assert d.requeue_at is None  # a node coming back wakes it, not the clock


def test_at_the_limit_a_turn_on_a_node_out_of_service_already_goes_on() -> None:
    """A DaemonJob that tolerates cordons (a repair Job for cordoned nodes, say) takes no node
    out of service there: the limit does not hold it."""
    tolerates = job_template(
        pod_spec={"tolerations": [{"key": "node.kubernetes.io/unschedulable", "operator": "Exists"}]}
    )
    dj = daemonjob(nodeMaintenance={"cordon": True}, maxParallel=5, template=tolerates)
    d = decide(dj, [node("down", unschedulable=True), node("up")], budget(1, 20, unavailable=1))
    assert cordoned(d) == ["down"]
    assert reconciling(d)["reason"] == "ClusterDisruptionBudget"  # "up" waits for it


def test_above_the_limit_also_holds() -> None:
    d = decide(cordoning(maxParallel=5), [node("a")], budget("10%", 20, unavailable=4))
    assert (
        cordoned(d) == []
        and "4 of 20 nodes unavailable, limit 2 (--max-unavailable-nodes=10%)" in reconciling(d)["message"]
    )


def test_below_the_limit_only_the_room_left_is_cordoned_and_the_gate_is_named() -> None:
    d = decide(cordoning(maxParallel=5), [node("a"), node("b"), node("c")], budget(3, 20, unavailable=1))
    assert cordoned(d) == ["a", "b"]
    cond = reconciling(d)
    assert cond["reason"] == "ClusterDisruptionBudget" and "1 of 20 nodes unavailable, limit 3" in cond["message"]


def test_with_room_enough_max_parallel_decides_and_the_budget_is_not_named() -> None:
    d = decide(cordoning(maxParallel=1), [node("a"), node("b")], budget(3, 20, unavailable=0))
    assert cordoned(d) == ["a"]
    assert reconciling(d)["reason"] != "ClusterDisruptionBudget"


def test_reserved_cordons_of_other_daemonjobs_count() -> None:
    d = decide(cordoning(maxParallel=5), [node("a")], budget(2, 20, unavailable=2, reserved=frozenset({"x", "y"})))
    assert cordoned(d) == []


def test_the_last_protected_node_in_service_is_never_cordoned() -> None:
    cp = {CONTROL_PLANE: ""}
    nodes = [node("cp-1", labels=cp), node("w-1")]
    d = decide(cordoning(maxParallel=5), nodes, budget(5, 10, protected_up=1))
    assert cordoned(d) == ["w-1"]
    cond = reconciling(d)
    assert cond["reason"] == "ClusterDisruptionBudget"
    assert "cp-1" in cond["message"] and CONTROL_PLANE in cond["message"]


def test_protected_nodes_are_cordoned_while_another_stays_in_service() -> None:
    cp = {CONTROL_PLANE: ""}
    nodes = [node("cp-1", labels=cp), node("cp-2", labels=cp), node("cp-3", labels=cp)]
    d = decide(cordoning(maxParallel=5), nodes, budget(5, 10, protected_up=3))
    assert cordoned(d) == ["cp-1", "cp-2"]  # cp-3 stays the last one


def test_a_daemonjob_without_node_maintenance_is_not_held() -> None:
    d = decide(daemonjob(), [node("a"), node("b")], budget(1, 20, unavailable=5))
    assert sorted(c.node for c in d.creates) == ["a", "b"]
    assert reconciling(d)["reason"] != "ClusterDisruptionBudget"


def test_no_limit_holds_nothing() -> None:
    d = decide(cordoning(maxParallel=5), [node("a"), node("b")], Disruption())
    assert cordoned(d) == ["a", "b"]


def test_admit_counts_each_cordon_once_and_a_node_out_of_service_costs_nothing() -> None:
    cp = {CONTROL_PLANE: ""}
    d = budget(4, 20, unavailable=1, protected_up=2)
    got = admit(
        d,
        [
            ("a", node("a")),
            ("down", node("down", unschedulable=True)),
            ("cp-1", node("cp-1", labels=cp)),
            ("cp-2", node("cp-2", labels=cp)),
            ("b", node("b")),
            ("c", node("c")),
        ],
    )
    assert got.admitted == ("a", "down", "cp-1", "b")
    assert got.protected == ("cp-2",)
    assert got.over_limit == ("c",)


def test_without_a_protected_set_the_room_left_limits_the_cordons() -> None:
    d = decide(cordoning(maxParallel=5), [node("a"), node("b"), node("c")], Disruption(2, 20, 1))
    assert cordoned(d) == ["a"] and reconciling(d)["reason"] == "ClusterDisruptionBudget"
