"""Every semantics bullet of the product contract, as decisions on plain dicts."""

from __future__ import annotations

import copy
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from daemonjob.domain.decision.decide import Decision
from daemonjob.domain.jobs.jobbody import build_job
from daemonjob.domain.shared.apinames import ANNOTATION_NODE, LABEL_REVISION
from daemonjob.domain.shared.timestamps import format_time
from daemonjob.domain.spec.revision import job_name
from daemonjob.testing.doubles import builders
from daemonjob.testing.doubles.builders import job, job_template, node, nodes, revision_of
from daemonjob.testing.doubles.decisions import Given, decide_over
from daemonjob.testing.doubles.decisions import apply as apply_decision

NOW = datetime(2024, 3, 1, 12, 0, 0, tzinfo=timezone.utc)


# ---------------------------------------------------------------- builders


def make_dj(
    status: dict[str, Any] | None = None, generation: int = 1, annotation: str = "1", **spec: Any
) -> dict[str, Any]:
    """A template with pod labels and backoffLimit 1; `annotation` picks its revision."""
    return builders.daemonjob(
        generation=generation,
        resource_version=None,
        status=status or {},
        template=job_template(annotation, labels={"app": "audit"}, backoff_limit=1),
        **spec,
    )


rev = revision_of


def cond(decision: Decision, kind: str) -> dict[str, Any]:
    (found,) = [c for c in decision.status["conditions"] if c["type"] == kind]
    return found


def created_nodes(decision: Decision) -> list[str]:
    return [c.node for c in decision.creates]


def deleted(decision: Decision) -> dict[str, str]:
    return {d.name: d.reason for d in decision.deletes}


def event_reasons(decision: Decision) -> list[str]:
    return [e.reason for e in decision.events]


def apply(decision: Decision, jobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return apply_decision(decision, jobs, NOW)


def finish_deletes(jobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [j for j in jobs if not j["metadata"].get("deletionTimestamp")]


def with_status(dj: dict[str, Any], decision: Decision) -> dict[str, Any]:
    dj = copy.deepcopy(dj)
    dj["status"] = decision.status
    return dj


# ---------------------------------------------------------------- eligibility


def test_fresh_daemonjob_creates_one_job_per_eligible_node_in_sorted_order() -> None:
    dj = make_dj()
    d = decide_over(Given(dj, [], nodes("c", "a", "b"), NOW))
    assert created_nodes(d) == ["a", "b", "c"]
    assert [c.name for c in d.creates] == [job_name("audit", n, rev(dj)) for n in "abc"]
    assert d.creates[0].body == build_job(dj, "a", rev(dj), template_hash=rev(dj))
    assert d.creates[0].body["metadata"]["labels"]["daemonjob.io/template-hash"] == rev(dj)
    assert d.deletes == []


def test_ineligible_nodes_get_no_job_and_are_not_desired() -> None:
    dj = make_dj(
        nodeSelector={"matchExpressions": [{"key": "role", "operator": "NotIn", "values": ["infra"]}]},
    )
    dj["spec"]["jobTemplate"]["spec"]["template"]["spec"]["nodeSelector"] = {"disk": "ssd"}
    all_nodes = [
        node("ok", {"disk": "ssd"}),
        node("infra", {"disk": "ssd", "role": "infra"}),
        node("hdd", {"disk": "hdd"}),
        node("tainted", {"disk": "ssd"}, taints=[{"key": "gpu", "effect": "NoSchedule"}]),
        node("evicting", {"disk": "ssd"}, taints=[{"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"}]),
        node("cordoned", {"disk": "ssd"}, unschedulable=True),
        node("preferred", {"disk": "ssd"}, taints=[{"key": "x", "effect": "PreferNoSchedule"}]),
    ]
    d = decide_over(Given(dj, [], all_nodes, NOW))
    assert created_nodes(d) == ["ok", "preferred"]
    assert d.status["desiredNodes"] == 2


def test_tolerations_make_tainted_and_cordoned_nodes_eligible() -> None:
    dj = make_dj()
    dj["spec"]["jobTemplate"]["spec"]["template"]["spec"]["tolerations"] = [
        {"key": "gpu", "operator": "Exists"},
        {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"},
    ]
    d = decide_over(
        Given(
            dj,
            [],
            [node("t", taints=[{"key": "gpu", "value": "a", "effect": "NoExecute"}]), node("c", unschedulable=True)],
            NOW,
        )
    )
    assert created_nodes(d) == ["c", "t"]


# ---------------------------------------------------------------- one job per (node, revision)


@pytest.mark.parametrize("state", ["active", "succeeded", "failed", "terminating"])
def test_existing_current_revision_job_means_no_second_create(state: str) -> None:
    dj = make_dj()
    d = decide_over(Given(dj, [job(dj, "a", state)], nodes("a"), NOW))
    assert d.creates == []
    assert d.deletes == []


def test_decisions_are_deterministic_and_converge() -> None:
    dj = make_dj()
    first = decide_over(Given(dj, [], nodes("a", "b"), NOW))
    assert first == decide_over(Given(dj, [], nodes("a", "b"), NOW))
    second = decide_over(Given(with_status(dj, first), apply(first, []), nodes("a", "b"), NOW))
    assert second.creates == [] and second.deletes == []


def test_deleting_one_nodes_job_reruns_that_node() -> None:
    dj = make_dj()
    jobs = [job(dj, "a", "succeeded"), job(dj, "b", "succeeded")]
    assert decide_over(Given(dj, jobs, nodes("a", "b"), NOW)).creates == []
    d = decide_over(Given(dj, [jobs[0]], nodes("a", "b"), NOW))
    assert created_nodes(d) == ["b"]


# ---------------------------------------------------------------- revisions: OnTemplateChange


def test_template_change_reruns_finished_nodes_and_keeps_history() -> None:
    old = make_dj(annotation="1")
    new = make_dj(annotation="2")
    assert rev(old) != rev(new)
    jobs = [job(old, "a", "succeeded"), job(old, "b", "failed")]
    d = decide_over(Given(new, jobs, nodes("a", "b"), NOW))
    assert created_nodes(d) == ["a", "b"]
    assert d.deletes == []  # historyLimit 1 keeps the previous run
    assert d.status["pendingNodes"] == 2 and d.status["failedNodes"] == 0


def test_running_old_revision_is_deleted_before_new_one_is_created() -> None:
    old, new = make_dj(annotation="1"), make_dj(annotation="2")
    jobs = [job(old, "a", "active")]
    d1 = decide_over(Given(new, jobs, nodes("a"), NOW))
    assert deleted(d1) == {jobs[0]["metadata"]["name"]: "OldRevision"}
    assert d1.deletes[0].uid == jobs[0]["metadata"]["uid"]
    assert d1.creates == []
    # the delete is observed but the Job is still terminating: still no create
    jobs = apply(d1, jobs)
    d2 = decide_over(Given(with_status(new, d1), jobs, nodes("a"), NOW))
    assert d2.creates == [] and d2.deletes == []
    # gone: now the new revision starts
    d3 = decide_over(Given(with_status(new, d2), finish_deletes(jobs), nodes("a"), NOW))
    assert created_nodes(d3) == ["a"]


def test_history_limit_keeps_most_recent_finished_old_jobs() -> None:
    dj = make_dj(historyLimit=2)
    olds = [
        job(
            dj,
            "a",
            "succeeded",
            revision=f"old{i}",
            created=f"2024-01-0{i}T00:00:00Z",
            finished=f"2024-01-0{i}T01:00:00Z",
        )
        for i in range(1, 5)
    ]
    current = job(dj, "a", "succeeded")
    d = decide_over(Given(dj, [*olds, current], nodes("a"), NOW))
    assert deleted(d) == {olds[0]["metadata"]["name"]: "History", olds[1]["metadata"]["name"]: "History"}


def test_history_orders_by_completion_time_then_creation() -> None:
    dj = make_dj()
    late_finish = job(
        dj, "a", "failed", revision="old1", created="2024-01-01T00:00:00Z", finished="2024-01-09T00:00:00Z"
    )
    early_finish = job(
        dj, "a", "succeeded", revision="old2", created="2024-01-02T00:00:00Z", finished="2024-01-03T00:00:00Z"
    )
    d = decide_over(Given(dj, [late_finish, early_finish, job(dj, "a", "succeeded")], nodes("a"), NOW))
    assert deleted(d) == {early_finish["metadata"]["name"]: "History"}


def test_history_limit_zero_deletes_finished_old_jobs_but_never_current_ones() -> None:
    dj = make_dj(historyLimit=0)
    old = job(dj, "a", "succeeded", revision="old")
    current = job(dj, "a", "failed")
    d = decide_over(Given(dj, [old, current], nodes("a"), NOW))
    assert deleted(d) == {old["metadata"]["name"]: "History"}


def test_current_revision_jobs_are_kept_even_on_ineligible_nodes() -> None:
    dj = make_dj(historyLimit=0, nodeSelector={"matchLabels": {"role": "worker"}})
    jobs = [job(dj, "a", "succeeded"), job(dj, "b", "failed"), job(dj, "c", "active")]
    d = decide_over(Given(dj, jobs, nodes("a", "b", "c"), NOW))
    assert d.deletes == [] and d.creates == []
    # c's Job still runs: c stays desired and active (holding its slot) until it finishes
    assert (d.status["desiredNodes"], d.status["activeNodes"], d.status["pendingNodes"]) == (1, 1, 0)


def test_annotation_change_is_a_new_revision_everywhere() -> None:
    old, new = make_dj(annotation="1"), make_dj(annotation="2")
    jobs = [job(old, n, "succeeded") for n in "abc"]
    d = decide_over(Given(new, jobs, nodes("a", "b", "c"), NOW))
    assert created_nodes(d) == ["a", "b", "c"]
    assert {c.body["metadata"]["labels"][LABEL_REVISION] for c in d.creates} == {rev(new)}


# ---------------------------------------------------------------- revisions: Never


def test_never_keeps_existing_jobs_and_only_fills_new_nodes() -> None:
    old, new = make_dj(annotation="1"), make_dj(annotation="2", rerunPolicy="Never")
    jobs = [job(old, "a", "succeeded"), job(old, "b", "active"), job(old, "c", "failed")]
    d = decide_over(Given(new, jobs, nodes("a", "b", "c", "d"), NOW))
    assert created_nodes(d) == ["d"]
    assert d.deletes == []
    s = d.status
    assert (s["succeededNodes"], s["activeNodes"], s["failedNodes"], s["pendingNodes"]) == (1, 1, 1, 1)


def test_never_counts_a_node_by_its_newest_job_and_reruns_deleted_ones() -> None:
    old, new = make_dj(annotation="1"), make_dj(annotation="2", rerunPolicy="Never")
    older = job(old, "a", "failed", revision="r0", created="2024-01-01T00:00:00Z")
    newer = job(old, "a", "succeeded", created="2024-01-02T00:00:00Z")
    d = decide_over(Given(new, [older, newer], nodes("a", "b"), NOW))
    assert d.status["succeededNodes"] == 1 and d.status["failedNodes"] == 0
    assert created_nodes(d) == ["b"]
    assert d.deletes == []  # the older one is history of a node whose record is `newer`
    assert created_nodes(decide_over(Given(new, [], nodes("a"), NOW))) == ["a"]


def test_never_with_terminating_job_waits() -> None:
    dj = make_dj(rerunPolicy="Never")
    d = decide_over(Given(dj, [job(dj, "a", "terminating", revision="old")], nodes("a"), NOW))
    assert d.creates == []
    assert d.status["pendingNodes"] == 1


# ---------------------------------------------------------------- nodes joining and leaving


def test_joining_node_gets_current_revision_and_reopens_completion() -> None:
    dj = make_dj()
    jobs = [job(dj, "a", "succeeded")]
    done = decide_over(Given(dj, jobs, nodes("a"), NOW))
    assert cond(done, "Complete")["status"] == "True"
    d = decide_over(Given(with_status(dj, done), jobs, nodes("a", "b"), NOW + timedelta(minutes=1)))
    assert created_nodes(d) == ["b"]
    assert cond(d, "Complete")["status"] == "False"
    assert "completionTime" not in d.status


def test_deleted_node_has_all_its_jobs_deleted() -> None:
    dj = make_dj()
    jobs = [
        job(dj, "gone", "active"),
        job(dj, "gone", "succeeded", revision="old"),
        job(dj, "gone", "terminating", revision="older"),
        job(dj, "a", "succeeded"),
    ]
    d = decide_over(Given(dj, jobs, nodes("a"), NOW))
    assert deleted(d) == {jobs[0]["metadata"]["name"]: "NodeGone", jobs[1]["metadata"]["name"]: "NodeGone"}
    assert all(x.node == "gone" for x in d.deletes)


def test_node_gone_deletes_happen_even_when_suspended_or_stalled() -> None:
    dj = make_dj(suspend=True)
    dj["spec"]["jobTemplate"]["spec"]["ttlSecondsAfterFinished"] = 10
    d = decide_over(Given(dj, [job(dj, "gone")], [], NOW))
    assert [x.reason for x in d.deletes] == ["NodeGone"]


def test_node_turning_ineligible_keeps_running_job_and_gets_no_new_one() -> None:
    old = make_dj(annotation="1")
    new = make_dj(annotation="2", nodeSelector={"matchLabels": {"role": "worker"}})
    running_old = job(old, "a", "active")
    running_new = job(new, "b", "active")
    d = decide_over(Given(new, [running_old, running_new], nodes("a", "b"), NOW))
    assert d.deletes == [] and d.creates == []
    # b's current Job is counted (desired, active) while it runs; a's older one is not
    assert d.status["desiredNodes"] == 1 and d.status["activeNodes"] == 1


def test_cordoned_node_keeps_running_job() -> None:
    dj = make_dj()
    d = decide_over(Given(dj, [job(dj, "a", "active")], [node("a", unschedulable=True)], NOW))
    assert d.deletes == [] and d.creates == []


# ---------------------------------------------------------------- rollout control


def test_max_parallel_limits_creates_in_stable_order() -> None:
    dj = make_dj(maxParallel=3)
    d = decide_over(Given(dj, [], nodes(*"jihgfedcba"), NOW))
    assert created_nodes(d) == ["a", "b", "c"]


def test_max_parallel_counts_active_current_jobs_on_any_node() -> None:
    dj = make_dj(maxParallel=3, nodeSelector={"matchLabels": {"role": "w"}})
    ws = [node(n, {"role": "w"}) for n in "abcde"]
    jobs = [job(dj, "a", "active"), job(dj, "b", "succeeded"), job(dj, "x", "active")]
    d = decide_over(Given(dj, jobs, [*ws, node("x")], NOW))
    assert created_nodes(d) == ["c"]


def test_running_old_revision_job_holds_no_slot_but_its_replacement_takes_one() -> None:
    old, new = make_dj(annotation="1"), make_dj(annotation="2", maxParallel=2)
    d = decide_over(Given(new, [job(old, "a", "active")], nodes("a", "b", "c"), NOW))
    assert created_nodes(d) == ["b"]
    assert [(x.node, x.reason) for x in d.deletes] == [("a", "OldRevision")]


@pytest.mark.parametrize(
    ("value", "nodes_count", "expected"), [("25%", 10, 3), ("1%", 10, 1), ("100%", 4, 4), ("50%", 0, 0)]
)
def test_max_parallel_percent_rounds_up_with_minimum_one(value: str, nodes_count: int, expected: int) -> None:
    dj = make_dj(maxParallel=value)
    d = decide_over(Given(dj, [], nodes(*[f"n{i:02d}" for i in range(nodes_count)]), NOW))
    assert len(d.creates) == expected


def test_max_parallel_full_means_nothing_more_starts() -> None:
    dj = make_dj(maxParallel=2)
    d = decide_over(Given(dj, [job(dj, "a"), job(dj, "b")], nodes("a", "b", "c"), NOW))
    assert d.creates == []
    assert cond(d, "Reconciling")["status"] == "True"


def test_failure_threshold_stops_new_nodes_and_sets_failed() -> None:
    dj = make_dj(maxFailedNodes=1)
    jobs = [job(dj, "a", "failed"), job(dj, "b", "failed"), job(dj, "c", "active")]
    d = decide_over(Given(dj, jobs, nodes("a", "b", "c", "d", "e"), NOW))
    assert d.creates == []
    failed = cond(d, "Failed")
    assert failed["status"] == "True" and failed["reason"] == "FailureThresholdExceeded"
    assert "2 nodes failed" in failed["message"] and "maxFailedNodes 1" in failed["message"]
    assert cond(d, "Reconciling")["status"] == "False"
    assert ("Warning", "FailureThresholdReached") in [(e.type, e.reason) for e in d.events]
    # not repeated while it stays True
    again = decide_over(Given(with_status(dj, d), jobs, nodes("a", "b", "c", "d", "e"), NOW))
    assert "FailureThresholdReached" not in event_reasons(again)


def test_failure_threshold_reached_but_not_exceeded_keeps_going() -> None:
    dj = make_dj(maxFailedNodes=1)
    d = decide_over(Given(dj, [job(dj, "a", "failed")], nodes("a", "b"), NOW))
    assert created_nodes(d) == ["b"]
    assert cond(d, "Failed")["status"] == "False"


def test_max_failed_nodes_zero_stops_on_first_failure() -> None:
    dj = make_dj(maxFailedNodes=0)
    d = decide_over(Given(dj, [job(dj, "a", "failed")], nodes("a", "b"), NOW))
    assert d.creates == []


@pytest.mark.parametrize(
    ("value", "failed", "stops"), [("10%", 2, False), ("10%", 3, True), ("4%", 1, True), ("5%", 1, False)]
)
def test_max_failed_percent_rounds_down(value: str, failed: int, stops: bool) -> None:
    dj = make_dj(maxFailedNodes=value)
    names = [f"n{i:02d}" for i in range(20)]
    d = decide_over(Given(dj, [job(dj, n, "failed") for n in names[:failed]], nodes(*names), NOW))
    assert (d.creates == []) is stops


def test_failure_threshold_blocks_old_revision_deletes() -> None:
    old, new = make_dj(annotation="1"), make_dj(annotation="2", maxFailedNodes=0)
    d = decide_over(Given(new, [job(new, "a", "failed"), job(old, "b", "active")], nodes("a", "b"), NOW))
    assert d.deletes == [] and d.creates == []


def test_suspend_starts_nothing_and_lets_running_jobs_finish() -> None:
    old, new = make_dj(annotation="1"), make_dj(annotation="2", suspend=True)
    jobs = [job(old, "a", "active"), job(new, "b", "active")]
    d = decide_over(Given(new, jobs, nodes("a", "b", "c"), NOW))
    assert d.creates == [] and d.deletes == []
    rec = cond(d, "Reconciling")
    assert rec["status"] == "False" and rec["reason"] == "Suspended"
    assert cond(d, "Complete")["status"] == "False"


def test_rollout_over_with_failures_is_failed() -> None:
    dj = make_dj()
    d = decide_over(Given(dj, [job(dj, "a", "succeeded"), job(dj, "b", "failed")], nodes("a", "b"), NOW))
    failed = cond(d, "Failed")
    assert failed["status"] == "True" and failed["reason"] == "NodesFailed" and "b" in failed["message"]
    assert cond(d, "Complete")["status"] == "False"
    assert cond(d, "Reconciling")["status"] == "False"
    assert d.status["failedNodeNames"] == ["b"]


def test_failures_while_rollout_in_progress_are_not_failed_yet() -> None:
    dj = make_dj()
    d = decide_over(Given(dj, [job(dj, "a", "active"), job(dj, "b", "failed")], nodes("a", "b"), NOW))
    assert cond(d, "Failed")["status"] == "False"
    assert cond(d, "Reconciling")["status"] == "True"


# ---------------------------------------------------------------- completion


def test_complete_when_every_eligible_node_succeeded() -> None:
    dj = make_dj()
    jobs = [job(dj, n, "succeeded") for n in "ab"]
    d = decide_over(
        Given(dj, jobs, [*nodes("a", "b"), node("tainted", taints=[{"key": "x", "effect": "NoSchedule"}])], NOW)
    )
    c = cond(d, "Complete")
    assert c["status"] == "True" and c["reason"] == "AllNodesSucceeded"
    assert d.status["completionTime"] == format_time(NOW)
    assert "Completed" in event_reasons(d)
    assert cond(d, "Reconciling")["status"] == "False"
    later = decide_over(Given(with_status(dj, d), jobs, nodes("a", "b"), NOW + timedelta(hours=1)))
    assert later.status["completionTime"] == format_time(NOW)
    assert cond(later, "Complete")["lastTransitionTime"] == format_time(NOW)
    assert "Completed" not in event_reasons(later)


def test_template_change_turns_complete_false() -> None:
    old = make_dj(annotation="1")
    jobs = [job(old, "a", "succeeded")]
    done = decide_over(Given(old, jobs, nodes("a"), NOW))
    new = with_status(make_dj(annotation="2"), done)
    d = decide_over(Given(new, jobs, nodes("a"), NOW + timedelta(minutes=5)))
    assert cond(d, "Complete")["status"] == "False"
    assert "completionTime" not in d.status
    assert d.status["startTime"] == format_time(NOW + timedelta(minutes=5))
    assert "RevisionStarted" in event_reasons(d)


def test_zero_eligible_nodes_is_trivially_complete() -> None:
    d = decide_over(Given(make_dj(nodeSelector={"matchLabels": {"none": "x"}}), [], nodes("a"), NOW))
    assert cond(d, "Complete")["status"] == "True"


# ---------------------------------------------------------------- jobs are the record / bad input


def test_ttl_seconds_after_finished_is_refused() -> None:
    old = make_dj(annotation="1")
    dj = make_dj(annotation="2")
    dj["spec"]["jobTemplate"]["spec"]["ttlSecondsAfterFinished"] = 60
    d = decide_over(Given(dj, [job(old, "a", "active")], nodes("a", "b"), NOW))
    assert d.creates == [] and d.deletes == []
    stalled = cond(d, "Stalled")
    assert stalled["status"] == "True" and stalled["reason"] == "TTLNotAllowed"
    assert "ttlSecondsAfterFinished" in stalled["message"]
    assert [(e.type, e.reason) for e in d.events] == [("Warning", "InvalidSpec")]
    assert cond(d, "Reconciling")["status"] == "False"
    assert cond(d, "Complete")["status"] == "False"


@pytest.mark.parametrize("policy", [None, "Always"])
def test_restart_policy_must_be_never_or_on_failure(policy: str | None) -> None:
    dj = make_dj()
    pod = dj["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    if policy is None:
        del pod["restartPolicy"]
    else:
        pod["restartPolicy"] = policy
    d = decide_over(Given(dj, [], nodes("a"), NOW))
    assert d.creates == []
    stalled = cond(d, "Stalled")
    assert stalled["reason"] == "InvalidRestartPolicy" and '"Always"' in stalled["message"]


def test_invalid_selector_stalls_without_raising() -> None:
    dj = make_dj(nodeSelector={"matchExpressions": [{"key": "role", "operator": "In"}]})
    d = decide_over(Given(dj, [job(dj, "gone")], nodes("a"), NOW))
    assert d.creates == []
    assert [x.reason for x in d.deletes] == ["NodeGone"]
    stalled = cond(d, "Stalled")
    assert stalled["status"] == "True" and stalled["reason"] == "InvalidSelector"
    assert stalled["message"].startswith("spec.nodeSelector.matchExpressions[0].values: Required value")
    assert cond(d, "Complete")["status"] == "False"
    assert "InvalidSpec" in event_reasons(d)
    assert "RevisionStarted" not in event_reasons(d)


def test_stalled_warning_is_not_repeated_while_unchanged() -> None:
    dj = make_dj(nodeSelector={"matchExpressions": [{"key": "role", "operator": "In"}]})
    d = decide_over(Given(dj, [], nodes("a"), NOW))
    again = decide_over(Given(with_status(dj, d), [], nodes("a"), NOW + timedelta(minutes=1)))
    assert again.events == []
    assert cond(again, "Stalled")["lastTransitionTime"] == format_time(NOW)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("maxParallel", 0),
        ("maxParallel", "ten"),
        ("maxParallel", "5"),
        ("maxFailedNodes", -1),
        ("historyLimit", -1),
        ("rerunPolicy", "Sometimes"),
        ("suspend", "yes"),
        ("maxParallel", True),
    ],
)
def test_unusable_rollout_settings_stall(field: str, value: Any) -> None:
    d = decide_over(Given(make_dj(**{field: value}), [], nodes("a"), NOW))
    assert d.creates == []
    stalled = cond(d, "Stalled")
    assert stalled["status"] == "True" and stalled["reason"] == "InvalidSpec"
    assert f"spec.{field}" in stalled["message"]


def test_overlong_daemonjob_name_stalls() -> None:
    dj = make_dj()
    dj["metadata"]["name"] = "x" * 64
    d = decide_over(Given(dj, [], nodes("a"), NOW))
    assert d.creates == [] and cond(d, "Stalled")["reason"] == "InvalidName"


@pytest.mark.parametrize("spec", [None, {}, {"jobTemplate": "nope"}, {"jobTemplate": {"spec": {"template": 3}}}])
def test_malformed_specs_never_raise(spec: Any) -> None:
    dj = {"metadata": {"name": "x", "namespace": "n"}, "spec": spec, "status": "junk"}
    d = decide_over(Given(dj, [], nodes("a"), NOW))
    assert d.creates == []
    assert cond(d, "Stalled")["status"] == "True"


def test_api_side_error_surfaces_as_stalled_and_probes_one_create() -> None:
    dj = make_dj()
    msg = 'Job.batch "x" is invalid: spec.template.spec.containers[0].image: Required value'
    d = decide_over(Given(dj, [], nodes("a", "b", "c"), NOW, stalled=("Invalid", msg)))
    stalled = cond(d, "Stalled")
    assert (stalled["status"], stalled["reason"], stalled["message"]) == ("True", "Invalid", msg)
    assert created_nodes(d) == ["a"]
    assert ("Warning", "Invalid") in [(e.type, e.reason) for e in d.events]
    assert cond(d, "Reconciling")["status"] == "False"


def test_api_side_error_blocks_old_revision_deletes() -> None:
    old, new = make_dj(annotation="1"), make_dj(annotation="2")
    d = decide_over(Given(new, [job(old, "a", "active")], nodes("a"), NOW, stalled=("Forbidden", "quota exceeded")))
    assert d.deletes == [] and d.creates == []


# ---------------------------------------------------------------- status


def test_status_counts_and_fields() -> None:
    dj = make_dj(generation=7, nodeSelector={"matchExpressions": [{"key": "skip", "operator": "DoesNotExist"}]})
    names = [f"n{i:02d}" for i in range(30)]
    jobs = (
        [job(dj, n, "failed") for n in names[:22]]
        + [job(dj, names[22], "active"), job(dj, names[23], "succeeded"), job(dj, names[24], "terminating")]
        + [job(dj, names[25], "active", revision="old")]
    )
    all_nodes = [*nodes(*names), node("skipped", {"skip": "1"})]
    d = decide_over(Given(dj, jobs, all_nodes, NOW))
    s = d.status
    assert s["observedGeneration"] == 7
    assert s["currentRevision"] == rev(dj)
    assert (s["desiredNodes"], s["activeNodes"], s["succeededNodes"], s["failedNodes"], s["pendingNodes"]) == (
        30,
        1,
        1,
        22,
        6,
    )
    assert s["failedNodeNames"] == names[:20]
    assert s["startTime"] == format_time(NOW)
    assert [c["type"] for c in s["conditions"]] == ["Complete", "Failed", "Reconciling", "Stalled"]
    for c in s["conditions"]:
        assert set(c) == {"type", "status", "reason", "message", "lastTransitionTime", "observedGeneration"}
        assert c["observedGeneration"] == 7 and c["status"] in ("True", "False")


def test_start_time_kept_while_revision_unchanged() -> None:
    dj = make_dj()
    first = decide_over(Given(dj, [], nodes("a"), NOW))
    later = decide_over(Given(with_status(dj, first), [job(dj, "a")], nodes("a"), NOW + timedelta(hours=2)))
    assert later.status["startTime"] == format_time(NOW)


def test_last_transition_time_kept_only_while_status_unchanged() -> None:
    dj = make_dj()
    t1, t2, t3 = NOW, NOW + timedelta(minutes=1), NOW + timedelta(minutes=2)
    d1 = decide_over(Given(dj, [job(dj, "a")], nodes("a"), t1))
    d2 = decide_over(Given(with_status(dj, d1), [job(dj, "a")], nodes("a"), t2))
    assert cond(d2, "Reconciling")["lastTransitionTime"] == format_time(t1)
    d3 = decide_over(Given(with_status(dj, d2), [job(dj, "a", "succeeded")], nodes("a"), t3))
    assert cond(d3, "Reconciling")["lastTransitionTime"] == format_time(t3)
    assert cond(d3, "Complete")["lastTransitionTime"] == format_time(t3)
    assert cond(d3, "Stalled")["lastTransitionTime"] == format_time(t1)


def test_revision_started_event_once_per_revision() -> None:
    dj = make_dj()
    d1 = decide_over(Given(dj, [], nodes("a"), NOW))
    assert [(e.type, e.reason) for e in d1.events] == [("Normal", "RevisionStarted")]
    assert rev(dj) in d1.events[0].message
    d2 = decide_over(Given(with_status(dj, d1), apply(d1, []), nodes("a"), NOW))
    assert d2.events == []


def test_naive_now_is_taken_as_utc() -> None:
    d = decide_over(Given(make_dj(), [], nodes("a"), NOW.replace(tzinfo=None)))
    assert d.status["startTime"] == format_time(NOW)


def test_decide_does_not_mutate_inputs() -> None:
    old, dj = make_dj(annotation="1"), make_dj(annotation="2", maxParallel=2, historyLimit=0)
    done = decide_over(Given(dj, [], nodes("a"), NOW))
    dj = with_status(dj, done)
    jobs = [job(old, "a", "active"), job(old, "b", "succeeded"), job(dj, "gone", "failed")]
    ns = nodes("a", "b", "c")
    before = copy.deepcopy((dj, jobs, ns))
    d = decide_over(Given(dj, jobs, ns, NOW))
    assert d.creates and d.deletes
    assert (dj, jobs, ns) == before
    d.creates[0].body["metadata"]["labels"]["x"] = "y"
    d.status["conditions"][0]["status"] = "mutated"
    assert (dj, jobs, ns) == before


def test_job_pinned_by_annotation_and_match_fields() -> None:
    d = decide_over(Given(make_dj(), [], nodes("node-1"), NOW))
    body = d.creates[0].body
    assert body["metadata"]["annotations"][ANNOTATION_NODE] == "node-1"
    terms = body["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]
    assert terms == {
        "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-1"]}]}]
    }
