"""The kept plan's records: a node's one Job is kept as its view, several as a tuple, and every
reader sees a node's Jobs as a tuple either way."""

from __future__ import annotations

from datetime import datetime, timezone

from daemonjob.domain.rollout.keptplan import KeptPlan
from daemonjob.domain.rollout.plan import JobView, Plan, PlanContext, plan_node

NOW = datetime(2024, 3, 1, 12, 0, 0, tzinfo=timezone.utc)
NODE = {"metadata": {"name": "n1"}}
CTX = PlanContext(None, "rev", never=False, history_limit=3)


def view(name: str, state: str = "active", run: str | None = "r1") -> JobView:
    return JobView(name, f"uid-{name}", "n1", "rev", state, NOW, None, run=run)


def test_a_nodes_jobs_read_as_a_tuple_whether_one_or_several_are_kept() -> None:
    kept = KeptPlan()
    one, two = view("a"), view("b", "succeeded")
    kept.set_node("n1", NODE, [one])
    assert kept._views[kept._slot["n1"]] is one  # kept without a tuple around it
    assert kept.node("n1") == (NODE, (one,)) and list(kept.job_views()) == [one]
    kept.set_node("n1", NODE, [one, two])
    assert kept.node("n1") == (NODE, (one, two)) and list(kept.job_views()) == [one, two]
    kept.set_node("n1", NODE, [])
    assert kept.node("n1") == (NODE, ()) and list(kept.job_views()) == []
    kept.set_node("n1", None, [])
    assert kept.node("n1") is None


def test_active_runs_follow_a_node_going_from_one_job_to_several_and_back() -> None:
    kept = KeptPlan()
    kept.set_node("n1", NODE, [view("a", run="r1")])
    assert kept.active_runs() == {"r1"}
    kept.set_node("n1", NODE, [view("a", run="r1"), view("b", run="r2")])
    assert kept.active_runs() == {"r1", "r2"}
    kept.set_node("n1", NODE, [view("b", run="r2")])
    assert kept.active_runs() == {"r2"}
    kept.set_node("n1", NODE, [view("b", "succeeded", run="r2")])
    assert kept.active_runs() == set()


def test_a_part_planned_from_one_kept_view_equals_the_part_from_its_tuple() -> None:
    kept = KeptPlan()
    one = view("a", "succeeded")
    kept.set_node("n1", NODE, [one])
    kept.plan_for(CTX)
    assert kept.part("n1") == plan_node("n1", NODE, (one,), CTX)
    kept.set_node("n1", NODE, [one, view("b")])
    kept.plan_for(CTX)
    assert kept.part("n1") == plan_node("n1", NODE, (one, view("b")), CTX)


def fresh(ctx: PlanContext, *inputs: tuple[str, dict, list[JobView]]) -> Plan:
    """The plan made at once from these inputs: what the kept one must equal."""
    return Plan.of((name, plan_node(name, node, tuple(views), ctx)) for name, node, views in inputs)


def test_a_gone_nodes_part_stays_until_the_next_plan_and_its_slot_serves_a_new_node() -> None:
    kept = KeptPlan()
    n2, n3 = {"metadata": {"name": "n2"}}, {"metadata": {"name": "n3"}}
    a, b, c = view("a", "succeeded"), view("b", "failed"), view("c")
    kept.set_node("n1", NODE, [a])
    kept.set_node("n2", n2, [b])
    assert kept.plan_for(CTX) == fresh(CTX, ("n1", NODE, [a]), ("n2", n2, [b]))
    kept.set_node("n1", None, [])  # the node and its Job gone
    assert kept.node("n1") is None and kept.part("n1") is not None  # its part: until the next plan
    assert list(kept.job_views()) == [b]
    assert kept.plan_for(CTX) == fresh(CTX, ("n2", n2, [b])) and kept.part("n1") is None
    kept.set_node("n3", n3, [c])  # takes the freed slot
    assert len(kept._views) == 2 and kept.node("n3") == (n3, (c,)) and kept.node("n2") == (n2, (b,))
    assert kept.plan_for(CTX) == fresh(CTX, ("n2", n2, [b]), ("n3", n3, [c]))
    kept.set_node("n1", NODE, [a])  # back: a new slot
    kept.set_node("n3", None, [])
    ctx = PlanContext(None, "rev", never=False, history_limit=2)  # a new context: every part made again
    assert kept.plan_for(ctx) == fresh(ctx, ("n2", n2, [b]), ("n1", NODE, [a]))
    assert kept.part("n3") is None and kept.node("n3") is None and kept.active_runs() == set()
