"""Properties of the exclusion group over random event sequences: members decide in any order
while Jobs finish at random; no node ever has Jobs of two members active at once, and once the
events stop every member completes (the oldest waiting first, no member starves)."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from daemonjob.domain.decision.decide import Decision
from daemonjob.domain.jobs.contract import job_node, job_state
from daemonjob.domain.order.rules import OrderInput, order_key
from daemonjob.domain.shared.timestamps import format_time
from daemonjob.testing.doubles import builders
from daemonjob.testing.doubles.decisions import Given, apply, decide_over

NOW = datetime(2024, 3, 1, 12, 0, 0, tzinfo=timezone.utc)
NODES = builders.nodes(*(f"node-{i}" for i in range(5)))
SETTINGS = dict(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def members(limits: list[int | None]) -> list[dict[str, Any]]:
    return [
        builders.daemonjob(
            f"m{i}",
            uid=f"uid-m{i}",
            created=f"2024-03-0{i + 1}T00:00:00Z",
            status={},
            exclusionGroup="maint",
            maxParallel=limit,
        )
        for i, limit in enumerate(limits)
    ]


def owner(job: dict[str, Any]) -> str:
    return job["metadata"]["labels"]["daemonjob.io/name"]


def order_for(dj: dict[str, Any], djs: list[dict[str, Any]], jobs: list[dict[str, Any]]) -> OrderInput:
    """What the controller reads from its caches: the others' running Jobs, the older ones' turns."""
    name = dj["metadata"]["name"]
    busy = {job_node(j): owner(j) for j in jobs if owner(j) != name and job_state(j) == "active"}
    ahead: dict[str, str] = {}
    for other in djs:
        if other is not dj and order_key(other) < order_key(dj):
            plan = decide_of(other, djs, jobs, with_order=False).reading.plan
            for turn in (*plan.replacing, *plan.starting):
                ahead.setdefault(turn.node, other["metadata"]["name"])
    return OrderInput(group="maint", busy=busy, ahead=ahead)


def decide_of(
    dj: dict[str, Any], djs: list[dict[str, Any]], jobs: list[dict[str, Any]], with_order: bool = True
) -> Decision:
    mine = [j for j in jobs if owner(j) == dj["metadata"]["name"]]
    order = order_for(dj, djs, jobs) if with_order else OrderInput()
    return decide_over(Given(dj, mine, NODES, NOW, order=order))


def step(dj: dict[str, Any], djs: list[dict[str, Any]], jobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    decision = decide_of(dj, djs, jobs)
    name = dj["metadata"]["name"]
    mine = apply(decision, [j for j in jobs if owner(j) == name], NOW)
    dj["status"] = decision.status
    return [j for j in jobs if owner(j) != name] + mine


def finish(jobs: list[dict[str, Any]], index: int, outcome: str = "Complete") -> None:
    active = [j for j in jobs if job_state(j) == "active"]
    if active:
        job = active[index % len(active)]
        job["status"] = {
            "conditions": [{"type": outcome, "status": "True", "lastTransitionTime": format_time(NOW)}],
            **({"completionTime": format_time(NOW)} if outcome == "Complete" else {}),
        }


def assert_exclusive(jobs: list[dict[str, Any]]) -> None:
    per_node: dict[str, set[str]] = {}
    for j in jobs:
        if job_state(j) == "active":
            per_node.setdefault(job_node(j) or "", set()).add(owner(j))
    assert all(len(o) == 1 for o in per_node.values()), per_node


EVENTS = st.lists(st.tuples(st.sampled_from(["decide", "finish"]), st.integers(0, 20)), max_size=40)


@settings(**SETTINGS)
@given(st.lists(st.sampled_from([None, 1, 2]), min_size=2, max_size=3), EVENTS)
def test_one_member_per_node_and_every_member_completes(
    limits: list[int | None], events: list[tuple[str, int]]
) -> None:
    djs = members(limits)
    jobs: list[dict[str, Any]] = []
    for kind, n in events:
        if kind == "decide":
            jobs = step(djs[n % len(djs)], djs, jobs)
        else:
            finish(jobs, n)
        assert_exclusive(jobs)
    for _ in range(60):  # the events stop: every member is passed over in turn, every Job ends
        for dj in djs:
            jobs = step(dj, djs, jobs)
            assert_exclusive(jobs)
        while any(job_state(j) == "active" for j in jobs):
            finish(jobs, 0)
        if all(c["status"] == "True" for dj in djs for c in dj["status"]["conditions"] if c["type"] == "Complete"):
            break
    done = {
        dj["metadata"]["name"]: [c["reason"] for c in dj["status"]["conditions"] if c["type"] == "Complete"]
        for dj in djs
    }
    assert all(r == ["AllNodesSucceeded"] for r in done.values()), done
