"""`kubectl daemonjob plan`'s pure parts: the preview made by `decide` itself, the drain's
verdicts and the PodDisruptionBudgets' refusals, the order's facts, the words printed."""

from __future__ import annotations

import io
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
import yaml

from daemonjob.domain.gates.orderview import order_input
from daemonjob.domain.nodework.disruption import disruption_of
from daemonjob.domain.nodework.drainpods import budgets_of, refusing_budgets
from daemonjob.domain.order.rules import OrderInput
from daemonjob.domain.preview.preview import Preview, PreviewInput, preview, with_applied
from daemonjob.domain.results.noderesult import result_of
from daemonjob.domain.rollout.inputs import FiringAlerts
from daemonjob.domain.shared.noderecord import ANNOTATION_MAINTENANCE, NodeRecord
from daemonjob.domain.spec.spec import DaemonJobSpec
from daemonjob.domain.spec.validate import read_spec
from daemonjob.kubectl import cli
from daemonjob.kubectl.cluster.client import PluginError, Target
from daemonjob.kubectl.commands import plan as plan_command
from daemonjob.kubectl.commands import planview
from daemonjob.kubectl.commands.plan import _allowed, load_file
from daemonjob.testing.doubles.builders import NAME, NS, UID, daemonjob, job, node, nodes, revision_of
from daemonjob.testing.doubles.decisions import Given, decide_over

NOW = datetime(2024, 3, 6, 12, 0, 0, tzinfo=timezone.utc)  # 13:00 in Berlin
NOT_READY = {"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"}


def plan_of(
    dj: dict[str, Any], listed: Sequence[dict[str, Any]], jobs: Sequence[dict[str, Any]] = (), **kw: Any
) -> Preview:
    return preview(PreviewInput(dj, listed, jobs, NOW, **kw))


def states(plan: Preview) -> dict[str, str]:
    return {n.name: n.state for n in plan.nodes}


def test_every_node_not_eligible_says_why_in_one_word_and_a_message() -> None:
    listed = [
        node("a", labels={"pool": "x"}),
        node("b", labels={"pool": "x"}, unschedulable=True),
        node("c", labels={"pool": "x"}, taints=[NOT_READY]),
        node("d", labels={"pool": "x"}, taints=[{"key": "gpu", "value": "1", "effect": "NoSchedule"}]),
        node("e", labels={"pool": "y"}),
    ]
    plan = plan_of(daemonjob(nodeSelector={"matchLabels": {"pool": "x"}}), listed)
    why = {n.name: n.why for n in plan.nodes}
    assert why == {"a": "", "b": "cordoned", "c": "NotReady", "d": "tainted", "e": "not selected"}
    assert "gpu=1:NoSchedule" in next(n.message for n in plan.nodes if n.name == "d")
    assert states(plan) == {"a": "runs", "b": "-", "c": "-", "d": "-", "e": "-"}
    template = {"spec": {"template": {"spec": {"nodeName": "a", "containers": [{"name": "c", "image": "i"}]}}}}
    pinned = plan_of(daemonjob(template={**template, "metadata": {}}), listed)
    assert {n.name: n.why for n in pinned.nodes}["b"] == "nodeName"


def test_waves_follow_max_parallel_after_the_slots_running_nodes_hold() -> None:
    first = daemonjob(maxParallel=3)
    dj = daemonjob(maxParallel=3, status={"currentRevision": revision_of(first), "templateHash": revision_of(first)})
    running = [job(dj, "n1", "active"), job(dj, "n2", "active")]
    plan = plan_of(dj, nodes(*[f"n{i}" for i in range(1, 9)]), running)
    assert plan.waves == [["n3"], ["n4", "n5", "n6"], ["n7", "n8"]]
    assert plan.order == ["n3", "n4", "n5", "n6", "n7", "n8"] and plan.slots == 3
    assert states(plan)["n1"] == "running" and not plan.new_revision and plan.reruns == []


def test_a_template_change_is_a_new_revision_that_reruns_the_nodes_after_the_status_records_it() -> None:
    dj = daemonjob(maxParallel=2, generation=2, status={"currentRevision": "r1", "templateHash": "old"})
    done = [job(dj, n, "succeeded", revision="r1") for n in ("n1", "n2", "n3")]
    plan = plan_of(dj, nodes("n1", "n2", "n3"), done)
    assert plan.new_revision and plan.previous == "r1" and plan.revision != revision_of(dj)
    assert plan.reruns == ["n1", "n2", "n3"] and plan.waves == [["n1", "n2"], ["n3"]]
    assert plan.passes == 2  # the first pass records the salted revision, the second starts nodes
    unchanged = daemonjob(status={"currentRevision": revision_of(dj), "templateHash": revision_of(dj)})
    ran = [job(unchanged, n, "succeeded") for n in ("n1", "n2")]
    again = plan_of(unchanged, nodes("n1", "n2"), ran)
    assert not again.new_revision and again.waves == [] and set(states(again).values()) == {"done"}


def test_rerun_policy_never_keeps_nodes_that_ran() -> None:
    dj = daemonjob(rerunPolicy="Never", generation=2, status={"currentRevision": "r1", "templateHash": "old"})
    plan = plan_of(dj, nodes("n1", "n2"), [job(dj, "n1", "succeeded", revision="r1")])
    assert plan.new_revision and plan.reruns == [] and plan.order == ["n2"]


def test_canary_nodes_go_first_and_the_rest_waits_for_a_promote() -> None:
    plan = plan_of(daemonjob(rollout={"canary": 2}), nodes("n1", "n2", "n3", "n4"))
    assert plan.canary == ["n1", "n2"] and plan.canary_count == 2
    assert plan.waves[0] == ["n1", "n2"] and [g.gate for g in plan.gates] == ["canary"]
    assert [n.canary for n in plan.nodes] == [True, True, False, False] and plan.promote_before == 2
    one_by_one = plan_of(daemonjob(maxParallel=1, rollout={"canary": 2}), nodes("n1", "n2", "n3"))
    assert one_by_one.waves == [["n1"], ["n2"], ["n3"]] and one_by_one.canary == ["n1", "n2"]
    assert one_by_one.promote_before == 3


def test_a_closed_window_says_when_it_opens_and_the_wave_it_then_starts() -> None:
    window = {"schedule": "0 22 * * *", "duration": "4h", "timeZone": "Europe/Berlin"}
    plan = plan_of(daemonjob(maxParallel=1, rollout={"window": window}), nodes("n1", "n2"))
    assert plan.as_dict()["window"] == {
        "open": False,
        "schedule": "0 22 * * *",
        "timeZone": "Europe/Berlin",
        "opensAt": "2024-03-06T21:00:00Z",
    }
    out = io.StringIO()
    planview.show(plan, [], stream=out)
    assert "Window:     '0 22 * * *' in Europe/Berlin, closed; next opens at 2024-03-06T21:00:00Z" in out.getvalue()
    (gate,) = plan.gates
    assert (gate.gate, gate.reason, gate.until) == ("window", "WaitingForWindow", "2024-03-06T21:00:00Z")
    assert plan.waves == [["n1"], ["n2"]] and plan.starting == []


def test_the_exclusion_group_and_after_hold_nodes_and_a_missing_dependency_stalls() -> None:
    dj = daemonjob(exclusionGroup="maint")
    order = OrderInput(group="maint", busy={"n1": "kernel-upgrade"})
    plan = plan_of(dj, nodes("n1", "n2"), order=order)
    assert states(plan) == {"n1": "held", "n2": "runs"} and plan.order == ["n2"]
    assert [(g.gate, g.nodes) for g in plan.gates] == [("exclusionGroup", ("n1",))]
    assert plan.stalled is None
    stalled = plan_of(daemonjob(after=["gone"]), nodes("n1"), order=OrderInput(after=("gone",), missing=("gone",)))
    assert stalled.stalled is not None and stalled.stalled["reason"] == "DependencyNotFound"
    assert stalled.as_dict()["stalled"] is True


def pod(name: str, labels: Mapping[str, str], ready: bool = True, **extra: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "apps", "labels": dict(labels), **extra},
        "spec": {"nodeName": "n1"},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }


def pdb(name: str, allowed: int, healthy: int = 2, desired: int = 1, **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "apps", "generation": 1},
        "spec": {"selector": {"matchLabels": {"app": "web"}}, **spec},
        "status": {
            "disruptionsAllowed": allowed,
            "currentHealthy": healthy,
            "desiredHealthy": desired,
            "observedGeneration": 1,
        },
    }


def test_a_budget_refuses_once_its_disruptions_are_spent_and_an_unready_pod_spends_none() -> None:
    web = {"app": "web"}
    pods = [pod("w1", web), pod("w2", web), pod("other", {"app": "db"})]
    assert list(refusing_budgets(pods, budgets_of([pdb("web-pdb", 1)]))) == ["apps/w2"]
    assert "web-pdb" in refusing_budgets(pods, budgets_of([pdb("web-pdb", 0)]))["apps/w1"]
    assert refusing_budgets([pod("w1", web, ready=False)], budgets_of([pdb("web-pdb", 0)])) == {}
    assert "more than one" in refusing_budgets(pods[:1], budgets_of([pdb("a", 5), pdb("b", 5)]))["apps/w1"]
    assert refusing_budgets(pods, budgets_of([{**pdb("none", 0), "spec": {}}])) == {}  # no selector: no pods


def test_a_drain_plans_each_nodes_evictions_and_the_budget_refusing_one_now() -> None:
    dj = daemonjob(nodeMaintenance={"cordon": True, "drain": {}})
    owned = {"ownerReferences": [{"kind": "ReplicaSet", "controller": True, "name": "rs", "uid": "u"}]}
    listed = [pod("w1", {"app": "web"}, **owned), pod("bare", {"app": "x"})]
    plan = plan_of(dj, nodes("n1", "n2"), pods=listed, budgets=[pdb("web-pdb", 0)])
    (n1, n2) = plan.nodes
    assert n1.evict == ["apps/w1"] and "web-pdb" in n1.refused["apps/w1"]
    assert "apps/bare" in n1.blocked[0] and n2.evict == [] and plan.waves == [["n1"], ["n2"]]  # one at a time


def test_an_applied_daemonjob_keeps_its_identity_and_status_and_moves_its_generation_on_a_spec_change() -> None:
    applied = daemonjob(generation=4, status={"currentRevision": "r"})
    changed = daemonjob(manifest=True, maxParallel=2)
    merged = with_applied(changed, applied, NOW)
    assert merged["metadata"]["uid"] == applied["metadata"]["uid"] and merged["metadata"]["generation"] == 5
    assert merged["status"] == {"currentRevision": "r"} and merged["spec"]["maxParallel"] == 2
    assert with_applied(daemonjob(manifest=True, generation=4), applied, NOW)["metadata"]["generation"] == 4
    created = with_applied(changed, None, NOW)["metadata"]
    assert created["generation"] == 1 and created["creationTimestamp"] == "2024-03-06T12:00:00Z"


class Facts:
    """OrderFacts over a dict of DaemonJobs (the order's rules are the domain's)."""

    def __init__(self, djs: Mapping[str, dict[str, Any]], running: Mapping[str, list[str]]) -> None:
        self.djs, self.running = djs, running

    def spec_of(self, dj: Mapping[str, Any]) -> DaemonJobSpec:
        return read_spec(dj)

    def named(self, name: str) -> Mapping[str, Any] | None:
        return self.djs.get(name)

    def done(self, dj: Mapping[str, Any]) -> frozenset[str]:
        return frozenset({"n1"})

    def peers(self) -> Iterable[Mapping[str, Any]]:
        return [d for n, d in self.djs.items() if read_spec(d).exclusion_group]

    def running_nodes(self, dj: Mapping[str, Any]) -> Iterable[str]:
        return self.running.get(dj["metadata"]["name"], [])

    def claimed(self) -> Mapping[str, str]:
        return {}

    def turn_nodes(self, dj: Mapping[str, Any]) -> Sequence[str]:
        return ["n2"]


def test_order_input_reads_busy_peers_older_members_dependencies_and_cycles() -> None:
    me = daemonjob("me", exclusionGroup="g", after=["base"], created="2024-03-02T00:00:00Z")
    older = daemonjob("older", exclusionGroup="g", created="2024-03-01T00:00:00Z")
    base = daemonjob("base", after=["me"])
    got = order_input(me, read_spec(me), Facts({"older": older, "base": base}, {"older": ["n3"]}))
    assert got.busy == {"n3": "older"} and got.ahead == {"n2": "older"}
    assert got.done == {"base": frozenset({"n1"})} and got.missing == () and got.cycle == ("me", "base", "me")


def test_the_words_name_the_revision_the_gates_the_waves_and_the_refusal() -> None:
    plan = plan_of(daemonjob(maxParallel=1, rollout={"canary": 1}), nodes("n1", "n2"))
    out = io.StringIO()
    planview.show(plan, ["spec.maxParallel: Invalid value"], stream=out)
    text = out.getvalue()
    for words in ("(new)", "Refused:    spec.maxParallel", "Canary:     1 node(s) first: n1", "Wave 1:", "NODE"):
        assert words in text, text


def test_alerts_not_read_are_named_and_a_firing_one_read_holds_every_node() -> None:
    dj = daemonjob(rollout={"haltOnAlerts": [{"alertname": "EtcdDown"}]})
    unread = plan_of(dj, nodes("n1"))
    assert [(g.gate, g.reason) for g in unread.gates] == [("alerts", "AlertsNotRead")] and unread.waves == [["n1"]]
    firing = FiringAlerts(firing=((("alertname", "EtcdDown"),),), unknown=None)
    halted = plan_of(dj, nodes("n1"), alerts=firing, alerts_read=True)
    assert [(g.gate, g.reason, g.nodes) for g in halted.gates] == [("alerts", "HaltedByAlerts", ("n1",))]
    assert halted.starting == [] and halted.waves == [["n1"]]  # once the alert resolves


def test_a_file_must_hold_one_daemonjob_and_the_command_takes_a_name_or_a_file(tmp_path: Path) -> None:
    two = tmp_path / "two.yaml"
    two.write_text(yaml.safe_dump_all([daemonjob("a", manifest=True), daemonjob("b", manifest=True)]))
    with pytest.raises(PluginError, match="holds 2 DaemonJobs"):
        load_file(str(two))
    one = tmp_path / "one.yaml"
    one.write_text(yaml.safe_dump_all([{"kind": "ConfigMap"}, daemonjob("a", manifest=True)]))
    assert load_file(str(one))["metadata"]["name"] == "a"
    with pytest.raises(PluginError, match="either NAME"):
        plan_command.run(cli.parse(["plan"]), Target(None, "ns"))
    assert cli.parse(["plan", "-f", "x.yaml", "-o", "yaml"]).filename == "x.yaml"


def test_a_node_in_maintenance_for_this_rollout_says_so_and_what_its_drain_evicts() -> None:
    first = daemonjob(nodeMaintenance={"cordon": True, "drain": {}})
    rev = revision_of(first)
    dj = daemonjob(nodeMaintenance={"cordon": True, "drain": {}}, status={"currentRevision": rev, "templateHash": rev})
    record = NodeRecord(f"{NS}/{NAME}", UID, rev, None, True, "2024-03-06T11:59:00Z")
    held = node("n1", unschedulable=True)
    held["metadata"]["annotations"] = {ANNOTATION_MAINTENANCE: record.text()}
    owned = {"ownerReferences": [{"kind": "ReplicaSet", "controller": True, "name": "rs", "uid": "u"}]}
    plan = plan_of(dj, [held, node("n2")], pods=[pod("w1", {"app": "web"}, **owned)])
    assert states(plan) == {"n1": "maintenance", "n2": "runs"}, plan.nodes
    assert plan.nodes[0].evict == ["apps/w1"] and plan.slots == 1
    assert plan.starting == [] and plan.waves == [["n2"]]  # once n1's slot frees


def test_a_scheduled_daemonjob_says_nothing_starts_before_its_first_tick() -> None:
    plan = plan_of(daemonjob(schedule="0 3 * * *", maxParallel=2), nodes("a", "b", "c"))
    assert plan.starting == [] and plan.waves == [["a", "b"], ["c"]]
    out = io.StringIO()
    planview.show(plan, [], stream=out)
    assert "no node starts yet (WaitingForSchedule:" in out.getvalue()
    assert "the next tick is at 2024-03-07T03:00:00Z" in out.getvalue()


@pytest.mark.parametrize(
    "spec",
    [{"maxParallel": 3}, {"maxParallel": "50%"}, {}, {"maxParallel": 2, "rollout": {"canary": 1}}],
)
def test_the_first_wave_is_the_controllers_own_decision(spec: dict[str, Any]) -> None:
    first = daemonjob(**spec)
    rev = revision_of(first)
    dj = daemonjob(**spec, status={"currentRevision": rev, "templateHash": rev})
    listed = nodes(*[f"n{i}" for i in range(7)])
    jobs = [job(dj, "n2", "active"), job(dj, "n4", "succeeded")]
    decision = decide_over(Given(dj, jobs, listed, NOW, alerts=FiringAlerts(unknown=None)))
    plan = plan_of(dj, listed, jobs)
    assert plan.starting == [c.node for c in decision.creates]
    if plan.starting:
        assert plan.waves[0] == plan.starting
    else:  # the canary ran on n2 and n4: the next wave waits for a promote
        assert plan.canary == ["n2", "n4"] and plan.promote_before == 1
    assert states(plan)["n2"] == "running" and states(plan)["n4"] == "done"


def test_node_maintenance_is_taken_as_allowed_unless_the_applied_daemonjob_is_stalled_for_it() -> None:
    assert _allowed(None, "ops") == frozenset({"ops"})
    stalled = {"type": "Stalled", "status": "True", "reason": "NodeMaintenanceNotAllowed"}
    assert _allowed(daemonjob(status={"conditions": [stalled]}), "ops") == frozenset()


def test_the_cluster_disruption_budget_holds_cordons_past_the_limit() -> None:
    dj = daemonjob(maxParallel=3, nodeMaintenance={"cordon": True})
    listed = [*nodes("n1", "n2", "n3", "n4"), node("x", unschedulable=True)]
    budget = disruption_of(listed, 2, "")  # one node down already: room for one cordon
    assert (budget.nodes, budget.unavailable, budget.room) == (5, 1, 1)
    plan = plan_of(dj, listed, disruption=budget)
    assert plan.starting == ["n1"] and [g.gate for g in plan.gates] == ["clusterDisruptionBudget"]
    assert plan_of(dj, listed).starting == ["n1", "n2", "n3"]  # no limit given: maxParallel alone


def test_a_plan_reads_the_records_of_jobs_let_go() -> None:
    """With spec.results.deleteSucceededJobs a node whose Job is gone ran by its record: the
    plan runs only the others, as the controller would."""
    dj = daemonjob(maxParallel=5, results={"deleteSucceededJobs": True})
    results = [r for n in ("a", "b") if (r := result_of(job(dj, n, "succeeded"), None)) is not None]
    plan = plan_of(dj, nodes("a", "b", "c"), recorded=results)
    assert states(plan) == {"a": "done", "b": "done", "c": "runs"}
    assert states(plan_of(dj, nodes("a", "b", "c"))) == {"a": "runs", "b": "runs", "c": "runs"}
