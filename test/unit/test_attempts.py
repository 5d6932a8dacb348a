"""Attempts: a node's Job re-created after a delete never takes a name an earlier Job had,
and the same cluster state always gives the same name."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timezone
from typing import Any

import pytest

from daemonjob.domain.decision.decide import decide
from daemonjob.domain.jobs.attempts import DeletedJobs, assign, next_attempt, recorded_attempts, rollout_of
from daemonjob.domain.jobs.changes import CreateJob
from daemonjob.domain.jobs.contract import job_attempt
from daemonjob.domain.jobs.jobbody import build_job
from daemonjob.domain.rollout.inputs import DecisionInput
from daemonjob.domain.rollout.keptplan import KeptPlan
from daemonjob.domain.rollout.plan import JobView
from daemonjob.domain.shared.apinames import LABEL_ATTEMPT
from daemonjob.domain.spec.revision import NAME_MAX, job_name
from daemonjob.testing.doubles.builders import daemonjob, job, node, nodes, revision_of

NOW = datetime(2024, 3, 1, 12, 0, 0, tzinfo=timezone.utc)
DJ = daemonjob()
REV = revision_of(DJ)


# -- names -------------------------------------------------------------------------------------
def test_attempt_zero_keeps_the_name_jobs_had_before_attempts_existed() -> None:
    assert job_name("audit", "node-1", "abc") == job_name("audit", "node-1", "abc", None, 0)
    assert job_name("audit", "node-1", "abc", "r1") == job_name("audit", "node-1", "abc", "r1", 0)


def test_every_attempt_of_a_node_has_a_name_of_its_own() -> None:
    names = {job_name("audit", "node-1", "abc", run, attempt) for run in (None, "r1") for attempt in range(50)}
    assert len(names) == 100


def test_attempt_names_stay_dns_labels_of_at_most_63_characters() -> None:
    name = job_name("a" * 80, "node." * 30, "abc", "20261123t030000z", 123456)
    assert len(name) <= NAME_MAX and name == name.lower() and not name.startswith("-") and not name.endswith("-")


def test_a_jobs_attempt_is_its_label_and_zero_without_it() -> None:
    first = build_job(DJ, "node-1", REV)
    again = build_job(DJ, "node-1", REV, attempt=2)
    assert LABEL_ATTEMPT not in first["metadata"]["labels"] and job_attempt(first) == 0
    assert job_attempt(again) == 2 and again["metadata"]["name"] == job_name("audit", "node-1", REV, None, 2)
    for bad in ("x", "-1", "", "9" * 20):
        assert job_attempt({"metadata": {"labels": {LABEL_ATTEMPT: bad}}}) == 0


# -- the next attempt --------------------------------------------------------------------------
def view(attempt: int, revision: str = REV, run: str | None = None) -> JobView:
    return JobView(f"j{attempt}", "u", "node-1", revision, "failed", NOW, None, run=run, attempt=attempt)


@pytest.mark.parametrize(
    ("jobs", "recorded", "deleted", "expected"),
    [
        ([], 0, None, 0),  # the node's first Job
        ([], 0, 0, 1),  # its first Job was seen deleted
        ([], 1, None, 1),  # recorded before the create, then a restart forgot the delete
        ([], 2, 0, 2),  # the record wins over an older delete
        ([view(0, "other")], 0, None, 0),  # another revision's Jobs count for nothing
        ([view(3, run="r1")], 0, None, 0),  # nor another run's
        ([view(1)], 0, None, 2),  # a terminating Job of the rollout still counts
        ([view(1)], 0, 4, 5),
    ],
)
def test_the_next_attempt_is_above_every_earlier_one(
    jobs: list[JobView], recorded: int, deleted: int | None, expected: int
) -> None:
    assert next_attempt(jobs, REV, None, recorded, deleted) == expected


def test_a_record_of_another_rollout_is_void() -> None:
    status = {"nodeAttempts": {"rollout": rollout_of(REV, None), "nodes": [{"node": "n", "attempt": 2}]}}
    assert recorded_attempts(status, REV, None) == {"n": 2}
    assert recorded_attempts(status, REV, "r1") == {}
    assert recorded_attempts(status, "other", None) == {}
    broken = {"nodeAttempts": {"rollout": REV, "nodes": [{"node": "n", "attempt": "2"}, "x", {"attempt": 1}]}}
    assert recorded_attempts(broken, REV, None) == {}


# -- assigning attempts to creates -------------------------------------------------------------
Inputs = dict[str, tuple[dict[str, Any] | None, tuple[JobView, ...]]]


def create(node_name: str) -> CreateJob:
    return CreateJob(node_name, job_name("audit", node_name, REV), REV, DJ)


def record(*entries: tuple[str, int]) -> dict[str, Any]:
    return {"nodeAttempts": {"rollout": REV, "nodes": [{"node": n, "attempt": a} for n, a in entries]}}


def inputs(*names: str, jobs: dict[str, tuple[JobView, ...]] | None = None) -> Inputs:
    return {n: (node(n), (jobs or {}).get(n, ())) for n in names}


def test_first_jobs_go_as_they_are_and_nothing_is_recorded() -> None:
    creates = [create("a"), create("b")]
    out = assign(creates, {}, REV, None, inputs("a", "b").get)
    assert out.creates == creates and out.status is None and out.recording == ()


def test_a_node_seen_losing_its_job_is_recorded_first_and_created_once_recorded() -> None:
    deleted = DeletedJobs({(REV, None): {"a": 0}})
    out = assign([create("a"), create("b")], {}, REV, None, inputs("a", "b").get, deleted)
    assert [c.node for c in out.creates] == ["b"] and out.recording == ("a",)
    assert out.status == record(("a", 1))["nodeAttempts"]

    again = assign([create("a")], record(("a", 1)), REV, None, inputs("a").get, deleted)
    (c,) = again.creates
    assert (c.attempt, c.follows) == (1, 0)
    assert c.name == job_name("audit", "a", REV, None, 1) == c.body["metadata"]["name"]
    assert again.status == record(("a", 1))["nodeAttempts"]


def test_a_delete_is_recorded_before_the_nodes_turn_comes() -> None:
    """maxParallel may keep the node waiting for hours: the record, not the memory of the
    delete, must carry its attempt over a restart."""
    deleted = DeletedJobs({(REV, None): {"a": 0}, ("old", None): {"b": 4}})
    out = assign([], {}, REV, None, inputs("a", "b").get, deleted)
    assert out.status == record(("a", 1))["nodeAttempts"]


def test_the_same_state_gives_the_same_name_whether_or_not_the_delete_is_remembered() -> None:
    """A restart between recording and creating, or a second pass on a lagging cache."""
    remembered = assign(
        [create("a")], record(("a", 1)), REV, None, inputs("a").get, DeletedJobs({(REV, None): {"a": 0}})
    )
    forgotten = assign([create("a")], record(("a", 1)), REV, None, inputs("a").get)
    assert [c.name for c in remembered.creates] == [c.name for c in forgotten.creates]
    assert forgotten.creates[0].follows is None


def test_a_finished_job_still_terminating_moves_the_attempt_on() -> None:
    jobs = {"a": (view(1),)}
    out = assign([create("a")], record(("a", 1)), REV, None, inputs("a", jobs=jobs).get)
    assert out.creates == [] and out.status == record(("a", 2))["nodeAttempts"]


def test_the_record_keeps_only_nodes_that_still_exist() -> None:
    known: Inputs = {"a": (node("a"), ()), "gone": (None, (view(1),))}
    out = assign([], record(("a", 1), ("gone", 2), ("unknown", 3)), REV, None, known.get)
    assert out.status == record(("a", 1))["nodeAttempts"]
    assert assign([], record(("gone", 2)), REV, None, known.get).status is None


def test_a_recorded_attempt_leaves_the_record_once_its_job_is_in_the_cache() -> None:
    """The Job carries its attempt from then on: the record holds only re-runs under way."""
    jobs = {"a": (view(1),), "b": (view(5, "other"),)}
    out = assign([], record(("a", 1), ("b", 1)), REV, None, inputs("a", "b", jobs=jobs).get)
    assert out.status == record(("b", 1))["nodeAttempts"], "another rollout's Job carries nothing of this one"


def test_a_node_whose_recorded_success_stands_for_its_let_go_job_is_not_recorded() -> None:
    """spec.results.deleteSucceededJobs deletes every node's Job once recorded: a record per
    let-go node would grow the status with the cluster. A node whose record went re-runs under
    the next attempt still, from the delete seen."""
    standin = JobView("j0", "u", "a", REV, "succeeded", NOW, NOW, standin=True)
    deleted = DeletedJobs({(REV, None): {"a": 0, "b": 0}})
    out = assign([], {}, REV, None, inputs("a", "b", jobs={"a": (standin,)}).get, deleted)
    assert out.status == record(("b", 1))["nodeAttempts"]
    other = dataclasses.replace(standin, revision="other")
    assert (
        assign([], {}, REV, None, inputs("a", jobs={"a": (other,)}).get, deleted).status
        == record(("a", 1))["nodeAttempts"]
    )
    rerun = assign([create("a")], {}, REV, None, inputs("a").get, deleted)  # the record gone: next attempt
    assert rerun.creates == [] and rerun.recording == ("a",)


# -- the whole decision ------------------------------------------------------------------------
def decision(dj: dict[str, Any], jobs: list[dict[str, Any]], deleted: DeletedJobs | None = None) -> Any:
    seen = deleted or DeletedJobs()
    plan = KeptPlan.of(jobs, nodes("node-1", "node-2"))
    return decide(DecisionInput(dj, plan, NOW, deleted=seen))


def test_a_deleted_nodes_job_is_rerun_under_the_next_attempt_in_two_passes() -> None:
    other = job(DJ, "node-2", "succeeded")
    first = decision(DJ, [other], DeletedJobs({(REV, None): {"node-1": 0}}))
    assert first.creates == [] and first.status["pendingNodes"] == 1
    assert first.status["nodeAttempts"] == {"rollout": REV, "nodes": [{"node": "node-1", "attempt": 1}]}

    recorded = daemonjob(status=first.status)
    second = decision(recorded, [other])  # a restart in between: the delete is forgotten
    (c,) = second.creates
    assert c.name == job_name("audit", "node-1", REV, None, 1) and c.body["metadata"]["labels"][LABEL_ATTEMPT] == "1"


def test_a_lost_status_reruns_no_node_that_has_a_job() -> None:
    jobs = [job(DJ, "node-2", "succeeded"), build_job(DJ, "node-1", REV, attempt=1)]
    jobs[1]["metadata"].update(creationTimestamp="2024-03-01T11:00:00Z", uid="u1")
    out = decision(DJ, jobs)
    assert out.creates == [] and "nodeAttempts" not in out.status and out.status["activeNodes"] == 1


def test_a_new_revision_starts_every_node_at_attempt_zero() -> None:
    edited = daemonjob(status={"nodeAttempts": {"rollout": REV, "nodes": [{"node": "node-1", "attempt": 3}]}})
    edited["spec"]["jobTemplate"]["metadata"] = {"annotations": {"run": "2"}}
    edited["metadata"]["generation"] = 2
    out = decision(edited, [job(DJ, "node-1", "succeeded"), job(DJ, "node-2", "succeeded")])
    assert "nodeAttempts" not in out.status
