"""Order across DaemonJobs as decisions: spec.exclusionGroup and spec.after hold nodes back,
the status names what each waits for, and what only the other DaemonJobs can tell of
spec.after (a missing name, a cycle) is Stalled."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from daemonjob.domain.decision.decide import Decision
from daemonjob.domain.order.rules import OrderInput
from daemonjob.domain.spec.validate import validate
from daemonjob.testing.doubles.builders import daemonjob, job, nodes
from daemonjob.testing.doubles.decisions import Given, decide_over

NOW = datetime(2024, 3, 6, 12, 0, 0, tzinfo=timezone.utc)


def condition(decision: Decision, kind: str) -> dict[str, Any]:
    (found,) = [c for c in decision.status["conditions"] if c["type"] == kind]
    return found


def created(decision: Decision) -> list[str]:
    return [c.node for c in decision.creates]


# ---------------------------------------------------------------- exclusionGroup


def test_a_node_busy_with_another_member_waits_and_the_status_names_it() -> None:
    dj = daemonjob(exclusionGroup="maint")
    order = OrderInput(group="maint", busy={"n1": "kernel-upgrade"})
    decision = decide_over(Given(dj, [], nodes("n1", "n2", "n3"), NOW, order=order))
    assert created(decision) == ["n2", "n3"]
    cond = condition(decision, "Reconciling")
    assert (cond["status"], cond["reason"]) == ("True", "WaitingForExclusionGroup")
    assert "node n1" in cond["message"] and "DaemonJob kernel-upgrade" in cond["message"]
    assert decision.gate == "exclusionGroup"
    assert condition(decision, "Complete")["status"] == "False"


def test_an_older_member_waiting_on_a_node_goes_first_there() -> None:
    dj = daemonjob(exclusionGroup="maint")
    order = OrderInput(group="maint", ahead={"n2": "older"})
    decision = decide_over(Given(dj, [], nodes("n1", "n2"), NOW, order=order))
    assert created(decision) == ["n1"]
    assert "n2" in condition(decision, "Reconciling")["message"]


def test_the_held_nodes_keep_maxparallel_slots_for_the_others() -> None:
    dj = daemonjob(exclusionGroup="maint", maxParallel=1)
    order = OrderInput(group="maint", busy={"n1": "other"})
    decision = decide_over(Given(dj, [], nodes("n1", "n2", "n3"), NOW, order=order))
    assert created(decision) == ["n2"]  # n1 is skipped, not waited for


def test_a_running_older_revision_is_not_torn_down_while_another_member_holds_the_node() -> None:
    dj = daemonjob(exclusionGroup="maint")
    old = job(dj, "n1", "active", revision="old-rev")
    order = OrderInput(group="maint", busy={"n1": "other"})
    decision = decide_over(Given(dj, [old], nodes("n1"), NOW, order=order))
    assert decision.deletes == [] and decision.creates == []


def test_without_order_nothing_is_held() -> None:
    decision = decide_over(Given(daemonjob(), [], nodes("n1", "n2"), NOW, order=OrderInput()))
    assert created(decision) == ["n1", "n2"] and decision.gate is None


def test_everything_done_is_complete_whatever_the_group_holds() -> None:
    dj = daemonjob(exclusionGroup="maint")
    jobs = [job(dj, "n1", "succeeded")]
    decision = decide_over(Given(dj, jobs, nodes("n1"), NOW, order=OrderInput(group="maint", busy={"n1": "other"})))
    assert condition(decision, "Complete")["status"] == "True"


# ---------------------------------------------------------------- after


def test_a_node_starts_only_once_every_dependency_succeeded_there() -> None:
    dj = daemonjob(after=["prepare", "drain"])
    order = OrderInput(
        after=("prepare", "drain"), done={"prepare": frozenset({"n1", "n2"}), "drain": frozenset({"n2", "n3"})}
    )
    decision = decide_over(Given(dj, [], nodes("n1", "n2", "n3"), NOW, order=order))
    assert created(decision) == ["n2"]
    cond = condition(decision, "Reconciling")
    assert cond["reason"] == "WaitingForDependencies"
    assert "nodes n1, n3" in cond["message"] and "DaemonJob drain" in cond["message"]
    assert "DaemonJob prepare" in cond["message"]
    assert decision.gate == "after"


def test_a_missing_dependency_is_stalled_and_starts_nothing() -> None:
    dj = daemonjob(after=["prepare"])
    order = OrderInput(after=("prepare",), missing=("prepare",))
    decision = decide_over(Given(dj, [], nodes("n1"), NOW, order=order))
    assert decision.creates == []
    cond = condition(decision, "Stalled")
    assert (cond["status"], cond["reason"]) == ("True", "DependencyNotFound")
    assert "spec.after" in cond["message"] and "prepare" in cond["message"]
    assert "; " not in cond["message"]  # problems are joined with "; ": each stays one item


def test_a_cycle_is_stalled_and_named() -> None:
    dj = daemonjob(after=["b"])
    order = OrderInput(after=("b",), done={"b": frozenset()}, cycle=("a", "b", "a"))
    decision = decide_over(Given(dj, [], nodes("n1"), NOW, order=order))
    assert decision.creates == []
    cond = condition(decision, "Stalled")
    assert cond["reason"] == "DependencyCycle" and "a -> b -> a" in cond["message"]


# ---------------------------------------------------------------- what one object tells


def test_the_rules_one_object_tells_name_their_field_paths() -> None:
    dj = daemonjob(name="audit", exclusionGroup="Not_A-Label!", after=["x", "x", "audit", 3])
    messages = [p.message for p in validate(dj).problems]
    assert any(m.startswith("spec.exclusionGroup: Invalid value") for m in messages)
    assert 'spec.after[1]: Duplicate value: "x"' in messages
    assert any(
        m.startswith('spec.after[2]: Invalid value: "audit": a DaemonJob cannot come after itself') for m in messages
    )
    assert any(m.startswith("spec.after[3]: Invalid value: 3") for m in messages)
    assert validate(daemonjob(exclusionGroup="maint", after=["prepare"])).problems == []
