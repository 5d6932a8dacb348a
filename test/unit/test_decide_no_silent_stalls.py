"""A rollout either progresses or says why, and kstatus reads the right verdict (decide layer)."""

from __future__ import annotations

import copy
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from daemonjob.domain.decision.decide import Decision
from daemonjob.domain.shared.apinames import LABEL_REVISION, LABEL_TEMPLATE_HASH
from daemonjob.domain.spec.revision import template_revision
from daemonjob.testing.doubles import builders
from daemonjob.testing.doubles.builders import EARLIER, job, job_template, node, nodes
from daemonjob.testing.doubles.decisions import Given, decide_over
from daemonjob.testing.doubles.decisions import apply as apply_decision
from daemonjob.testing.kstatus import CURRENT, FAILED, IN_PROGRESS, verdict

NOW = datetime(2024, 3, 1, 12, 0, 0, tzinfo=timezone.utc)


def make_dj(
    annotation: str = "1", generation: int = 1, status: dict[str, Any] | None = None, **spec: Any
) -> dict[str, Any]:
    """A template without backoffLimit; `annotation` picks its revision."""
    return builders.daemonjob(
        generation=generation,
        resource_version=None,
        status=status or {},
        template=job_template(annotation, backoff_limit=None),
        **spec,
    )


def cond(d: Decision, kind: str) -> dict[str, Any]:
    (found,) = [c for c in d.status["conditions"] if c["type"] == kind]
    return found


def with_status(dj: dict[str, Any], d: Decision, generation: int | None = None, **spec: Any) -> dict[str, Any]:
    dj = copy.deepcopy(dj)
    dj["status"] = d.status
    dj["spec"].update(spec)
    if generation is not None:
        dj["metadata"]["generation"] = generation
    return dj


def seen(dj: dict[str, Any], d: Decision) -> dict[str, Any]:
    """The DaemonJob as a kstatus-aware tool reads it after the status write."""
    return with_status(dj, d)


def finish(jobs: list[dict[str, Any]], state: str = "succeeded") -> list[dict[str, Any]]:
    out = []
    for j in jobs:
        if j["metadata"].get("deletionTimestamp"):
            continue
        j = copy.deepcopy(j)
        kind = "Complete" if state == "succeeded" else "Failed"
        j["status"] = {"conditions": [{"type": kind, "status": "True", "lastTransitionTime": EARLIER}]}
        out.append(j)
    return out


# ---------------------------------------------------------------- a Job on a node no longer eligible


INELIGIBLE = {
    "cordoned": node("a", unschedulable=True),
    "tainted": node("a", taints=[{"key": "maintenance", "effect": "NoSchedule"}]),
    "not-ready": node("a", taints=[{"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"}]),
}


@pytest.mark.parametrize("how", sorted(INELIGIBLE))
def test_job_on_a_node_turned_ineligible_holds_its_slot_is_counted_and_named(how: str) -> None:
    dj = make_dj(maxParallel=1)
    pending = job(dj, "a")  # created before the node turned; its pod may never be scheduled
    d = decide_over(Given(dj, [pending], [INELIGIBLE[how], *nodes("b", "c")], NOW))
    assert d.creates == [] and d.deletes == []
    s = d.status
    assert (s["desiredNodes"], s["activeNodes"], s["pendingNodes"]) == (3, 1, 2)
    rec = cond(d, "Reconciling")
    assert (rec["status"], rec["reason"]) == ("True", "WaitingForIneligibleNodes")
    for message in (rec["message"], cond(d, "Complete")["message"]):
        assert pending["metadata"]["name"] in message and "node a" in message
    assert verdict(seen(dj, d)).status == IN_PROGRESS
    # once it finishes, the node leaves the rollout and its slot goes to the next node
    d2 = decide_over(Given(with_status(dj, d), finish([pending]), [INELIGIBLE[how], *nodes("b", "c")], NOW))
    assert [c.node for c in d2.creates] == ["b"]
    assert (d2.status["desiredNodes"], d2.status["activeNodes"]) == (2, 0)


def test_cordon_reason_is_in_the_message() -> None:
    dj = make_dj(maxParallel=1)
    d = decide_over(Given(dj, [job(dj, "a")], [INELIGIBLE["cordoned"], node("b")], NOW))
    assert "cordoned" in cond(d, "Reconciling")["message"]


# ---------------------------------------------------------------- kstatus verdicts


def test_failure_budget_exhausted_reads_failed() -> None:
    dj = make_dj(maxFailedNodes=0)
    d = decide_over(Given(dj, [job(dj, "a", "failed"), job(dj, "b", "active")], nodes("a", "b", "c"), NOW))
    assert d.creates == []
    stalled = cond(d, "Stalled")
    assert (stalled["status"], stalled["reason"]) == ("True", "FailureThresholdExceeded")
    assert "a" in stalled["message"]
    assert cond(d, "Reconciling")["status"] == "False"
    assert verdict(seen(dj, d)).status == FAILED
    # announced once, by the Failed condition's Event, not twice
    assert [e.reason for e in d.events if e.type == "Warning"] == ["FailureThresholdReached"]


def test_failed_nodes_in_a_finished_rollout_read_failed() -> None:
    dj = make_dj()
    d = decide_over(Given(dj, [job(dj, "a", "succeeded"), job(dj, "b", "failed")], nodes("a", "b"), NOW))
    stalled = cond(d, "Stalled")
    assert (stalled["status"], stalled["reason"]) == ("True", "NodesFailed") and "b" in stalled["message"]
    assert cond(d, "Reconciling")["status"] == "False"
    assert verdict(seen(dj, d)).status == FAILED
    assert [e.reason for e in d.events if e.type == "Warning"] == ["NodesFailed"]


def test_refused_spec_reads_failed() -> None:
    dj = make_dj(nodeSelector={"matchExpressions": [{"key": "x", "operator": "In"}]})
    d = decide_over(Given(dj, [], nodes("a"), NOW))
    assert verdict(seen(dj, d)).status == FAILED


def test_work_in_progress_reads_in_progress_and_completion_current() -> None:
    dj = make_dj()
    d = decide_over(Given(dj, [job(dj, "a", "succeeded")], nodes("a", "b"), NOW))
    assert (cond(d, "Reconciling")["status"], cond(d, "Stalled")["status"]) == ("True", "False")
    assert verdict(seen(dj, d)).status == IN_PROGRESS
    done = decide_over(
        Given(with_status(dj, d), [job(dj, "a", "succeeded"), job(dj, "b", "succeeded")], nodes("a", "b"), NOW)
    )
    assert cond(done, "Complete")["status"] == "True"
    assert (cond(done, "Reconciling")["status"], cond(done, "Stalled")["status"]) == ("False", "False")
    assert verdict(seen(dj, done)).status == CURRENT


def test_a_generation_not_yet_observed_reads_in_progress() -> None:
    dj = make_dj()
    d = decide_over(Given(dj, [job(dj, "a", "succeeded")], nodes("a"), NOW))
    edited = with_status(dj, d, generation=2)
    assert verdict(edited).status == IN_PROGRESS
    assert (
        verdict(seen(edited, decide_over(Given(edited, [job(dj, "a", "succeeded")], nodes("a"), NOW)))).status
        == CURRENT
    )


# ---------------------------------------------------------------- rerunPolicy Never: the current revision's failures


def test_never_earlier_revisions_failures_do_not_spend_the_budget() -> None:
    old, new = make_dj(annotation="1"), make_dj(annotation="2", rerunPolicy="Never", maxFailedNodes=0)
    d = decide_over(Given(new, [job(old, "a", "failed")], nodes("a", "b"), NOW))
    assert [c.node for c in d.creates] == ["b"]  # the fixed template reaches new nodes
    assert cond(d, "Failed")["status"] == "False"
    assert d.status["failedNodes"] == 1  # the node keeps its failed Job, and shows it


def test_never_current_revision_failures_spend_the_budget() -> None:
    dj = make_dj(rerunPolicy="Never", maxFailedNodes=0)
    d = decide_over(Given(dj, [job(dj, "a", "failed")], nodes("a", "b"), NOW))
    assert d.creates == []
    assert cond(d, "Failed")["reason"] == "FailureThresholdExceeded"


# ---------------------------------------------------------------- template nodeName


def test_template_node_name_makes_only_that_node_eligible() -> None:
    dj = make_dj()
    dj["spec"]["jobTemplate"]["spec"]["template"]["spec"]["nodeName"] = "b"
    d = decide_over(Given(dj, [], nodes("a", "b", "c"), NOW))
    assert [c.node for c in d.creates] == ["b"]
    assert d.status["desiredNodes"] == 1


# ---------------------------------------------------------------- a revert is a new revision


def test_reverting_the_template_reruns_every_node() -> None:
    names = nodes("a", "b")
    a1 = make_dj(annotation="A", historyLimit=1)
    d1 = decide_over(Given(a1, [], names, NOW))
    first = d1.status["currentRevision"]
    jobs_a = finish(apply_decision(d1, [], NOW))
    b2 = with_status(make_dj(annotation="B", generation=2, historyLimit=1), decide_over(Given(a1, jobs_a, names, NOW)))
    recorded = decide_over(Given(b2, jobs_a, names, NOW))
    assert recorded.creates == [] and recorded.status["currentRevision"] != first  # fixed before any Job
    b2 = with_status(b2, recorded)
    d2 = decide_over(Given(b2, jobs_a, names, NOW))
    assert d2.status["currentRevision"] == recorded.status["currentRevision"] and len(d2.creates) == 2
    jobs_ab = finish(apply_decision(d2, jobs_a, NOW))
    # node a's Job of A was pruned, node b's was kept: a revert must still re-run both
    jobs_ab = [
        j
        for j in jobs_ab
        if not (
            j["metadata"]["annotations"]["daemonjob.io/node"] == "a"
            and j["metadata"]["labels"]["daemonjob.io/revision"] == first
        )
    ]
    a3 = with_status(make_dj(annotation="A", generation=3, historyLimit=1), decide_over(Given(b2, jobs_ab, names, NOW)))
    recorded = decide_over(Given(a3, jobs_ab, names, NOW))
    assert recorded.creates == [] and "RevisionStarted" in [e.reason for e in recorded.events]
    d3 = decide_over(Given(with_status(a3, recorded), jobs_ab, names, NOW))
    assert d3.status["currentRevision"] not in (first, d2.status["currentRevision"])
    assert [c.node for c in d3.creates] == ["a", "b"]
    assert "RevisionStarted" not in [e.reason for e in d3.events]


def test_a_change_outside_the_template_keeps_the_revision() -> None:
    names = nodes("a", "b")
    dj = make_dj(annotation="B", generation=2)
    d = decide_over(Given(dj, [], names, NOW))
    jobs = finish(apply_decision(d, [], NOW))
    edited = with_status(dj, decide_over(Given(dj, jobs, names, NOW)), generation=3, maxParallel=5)
    again = decide_over(Given(edited, jobs, names, NOW))
    assert again.status["currentRevision"] == d.status["currentRevision"] and again.creates == []


def test_a_recreated_daemonjob_with_its_first_template_finds_its_jobs_current() -> None:
    dj = make_dj()
    jobs = [job(dj, "a", "succeeded")]  # left behind by the deleted DaemonJob, adopted
    d = decide_over(Given(make_dj(), jobs, nodes("a"), NOW))
    assert d.creates == [] and cond(d, "Complete")["status"] == "True"


# ---------------------------------------------------------------- a template change within maxParallel


def test_template_change_replaces_running_jobs_within_max_parallel() -> None:
    old, new = make_dj(annotation="1"), make_dj(annotation="2", maxParallel=1)
    names = nodes("a", "b", "c")
    jobs = [job(old, n) for n in "abc"]
    d1 = decide_over(Given(new, jobs, names, NOW))
    assert d1.creates == [] and [(x.node, x.reason) for x in d1.deletes] == [("a", "OldRevision")]
    jobs = apply_decision(d1, jobs, NOW)
    d2 = decide_over(Given(with_status(new, d1), jobs, names, NOW))  # a's old Job still terminating: it holds the slot
    assert d2.creates == [] and d2.deletes == []
    jobs = [j for j in jobs if not j["metadata"].get("deletionTimestamp")]
    d3 = decide_over(Given(with_status(new, d2), jobs, names, NOW))
    # b and c still run the old revision, so a cannot start (2 nodes busy, limit 1); the old work is
    # replaced one node at a time, each in the slot it holds
    assert d3.creates == [] and [(x.node, x.reason) for x in d3.deletes] == [("b", "OldRevision")]
    jobs = apply_decision(d3, jobs, NOW)
    d4 = decide_over(Given(with_status(new, d3), jobs, names, NOW))
    assert d4.creates == [] and d4.deletes == []  # b terminating and c running: over the limit already
    jobs = [j for j in jobs if not j["metadata"].get("deletionTimestamp")]
    d5 = decide_over(Given(with_status(new, d4), jobs, names, NOW))
    assert d5.creates == [] and [(x.node, x.reason) for x in d5.deletes] == [("c", "OldRevision")]
    jobs = [j for j in apply_decision(d5, jobs, NOW) if not j["metadata"].get("deletionTimestamp")]
    d6 = decide_over(Given(with_status(new, d5), jobs, names, NOW))
    assert [c.node for c in d6.creates] == ["a"] and d6.deletes == []


def test_max_parallel_counts_nodes_running_any_revision() -> None:
    """2 nodes done and 2 running revision 1 when the template changes: never 4 at once."""
    old = make_dj(annotation="1", maxParallel=2)
    new = make_dj(annotation="2", maxParallel=2)
    names = nodes("a", "b", "c", "d", "e", "f")
    jobs = [job(old, "a", "succeeded"), job(old, "b", "succeeded"), job(old, "c"), job(old, "d")]
    d = decide_over(Given(new, jobs, names, NOW))
    assert d.creates == []  # c and d hold both slots
    assert sorted((x.node, x.reason) for x in d.deletes) == [("c", "OldRevision"), ("d", "OldRevision")]
    jobs = apply_decision(d, jobs, NOW)
    d2 = decide_over(Given(with_status(new, d), jobs, names, NOW))
    assert d2.creates == []  # still terminating: still running as far as anyone knows
    jobs = [j for j in jobs if not j["metadata"].get("deletionTimestamp")]
    d3 = decide_over(Given(with_status(new, d2), jobs, names, NOW))
    assert [c.node for c in d3.creates] == ["a", "b"]


def test_replacing_never_exceeds_the_limit_beside_other_running_nodes() -> None:
    old, new = make_dj(annotation="1"), make_dj(annotation="2", maxParallel=2)
    cur = make_dj(annotation="2", maxParallel=2)
    names = nodes("a", "b", "c")
    first = decide_over(Given(new, [], names, NOW))
    jobs = [job(old, "b"), job(old, "c")] + [job(cur, "a", revision=first.status["currentRevision"])]
    d = decide_over(Given(with_status(new, first), jobs, names, NOW))
    # a runs the current revision, b and c the old one: only one replacement fits beside a
    assert d.creates == [] and [(x.node, x.reason) for x in d.deletes] == [("b", "OldRevision")]


# ---------------------------------------------------------------- a TTL added by an admission policy


def test_a_ttl_injected_into_our_jobs_stalls_naming_the_job() -> None:
    dj = make_dj()
    injected = job(dj, "a", "succeeded")
    injected["spec"]["ttlSecondsAfterFinished"] = 100
    d = decide_over(Given(dj, [injected], nodes("a", "b"), NOW))
    assert d.creates == []
    stalled = cond(d, "Stalled")
    assert (stalled["status"], stalled["reason"]) == ("True", "TTLInjected")
    assert injected["metadata"]["name"] in stalled["message"] and "admission" in stalled["message"]
    assert ("Warning", "TTLInjected") in [(e.type, e.reason) for e in d.events]
    assert verdict(seen(dj, d)).status == FAILED
    # the TTL deletes the Job: the node must not run again in this generation
    later = decide_over(Given(with_status(dj, d), [], nodes("a", "b"), NOW + timedelta(minutes=5)))
    assert later.creates == [] and cond(later, "Stalled")["reason"] == "TTLInjected"
    assert "TTLInjected" not in [e.reason for e in later.events]
    # a change to the spec (after the policy is fixed) resumes
    resumed = decide_over(Given(with_status(dj, later, generation=2), [], nodes("a", "b"), NOW + timedelta(minutes=6)))
    assert [c.node for c in resumed.creates] == ["a", "b"] and cond(resumed, "Stalled")["status"] == "False"


# ---------------------------------------------------------------- a revision fixed before its first Job


NAMES = nodes("a", "b", "c")


def settled(annotation: str, generation: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A DaemonJob Complete on every node with the template of `annotation`."""
    dj = make_dj(annotation=annotation, generation=generation)
    d = decide_over(Given(dj, [], NAMES, NOW))
    jobs = finish(apply_decision(d, [], NOW))
    done = decide_over(Given(with_status(dj, d), jobs, NAMES, NOW))
    assert cond(done, "Complete")["status"] == "True"
    return with_status(dj, done), jobs


def edited(dj: dict[str, Any], annotation: str, generation: int, **spec: Any) -> dict[str, Any]:
    out = copy.deepcopy(dj)
    out["spec"]["jobTemplate"]["metadata"]["annotations"]["run"] = annotation
    out["spec"].update(spec)
    out["metadata"]["generation"] = generation
    return out


def revisions(jobs: list[dict[str, Any]]) -> set[str]:
    return {j["metadata"]["labels"][LABEL_REVISION] for j in jobs}


def test_a_salted_revision_is_recorded_before_its_first_job() -> None:
    dj, jobs = settled("A", 1)
    b = edited(dj, "B", 2)
    recorded = decide_over(Given(b, jobs, NAMES, NOW))
    assert recorded.creates == [] and recorded.deletes == []
    assert recorded.status["currentRevision"] != dj["status"]["currentRevision"]
    assert recorded.status["templateHash"] == template_revision(b["spec"]["jobTemplate"])
    assert cond(recorded, "Reconciling")["status"] == "True"
    assert "RevisionStarted" in [e.reason for e in recorded.events]


def test_a_spec_edit_after_the_record_keeps_the_revision() -> None:
    dj, jobs = settled("A", 1)
    b = edited(dj, "B", 2)
    recorded = decide_over(Given(b, jobs, NAMES, NOW))
    # maxParallel changes (generation 3) once the revision is recorded: no second revision
    b3 = with_status(b, recorded, generation=3, maxParallel=2)
    d = decide_over(Given(b3, jobs, NAMES, NOW))
    assert {c.revision for c in d.creates} == {recorded.status["currentRevision"]} and len(d.creates) == 2
    jobs = apply_decision(d, jobs, NOW)
    b4 = with_status(b3, d, generation=4, maxParallel=3)
    d = decide_over(Given(b4, jobs, NAMES, NOW))
    assert {c.revision for c in d.creates} == {recorded.status["currentRevision"]} and len(d.creates) == 1


def test_a_spec_edit_before_the_record_salts_a_revision_no_job_has() -> None:
    dj, jobs = settled("A", 1)
    first = decide_over(Given(edited(dj, "B", 2), jobs, NAMES, NOW))  # its status write is refused (stale)
    d = decide_over(Given(edited(dj, "B", 3, maxParallel=2), jobs, NAMES, NOW))
    assert d.creates == [] and d.status["currentRevision"] != first.status["currentRevision"]
    assert revisions(jobs) == {dj["status"]["currentRevision"]}  # nothing was created for either


def test_a_lost_status_is_recovered_from_the_jobs() -> None:
    dj, jobs = settled("A", 1)
    b = edited(dj, "B", 2)
    b = with_status(b, decide_over(Given(b, jobs, NAMES, NOW)))
    rev_b = b["status"]["currentRevision"]
    d = decide_over(Given(b, jobs, NAMES, NOW))
    jobs = finish(apply_decision(d, jobs, NOW))
    assert all(
        j["metadata"]["labels"][LABEL_TEMPLATE_HASH] == b["status"]["templateHash"]
        for j in jobs
        if j["metadata"]["labels"][LABEL_REVISION] == rev_b
    )
    lost = copy.deepcopy(b)
    lost["status"] = {}
    lost["metadata"]["generation"] = 7  # and the spec was edited elsewhere since
    d = decide_over(Given(lost, jobs, NAMES, NOW))
    assert d.status["currentRevision"] == rev_b and d.creates == [] and d.deletes == []
    d = decide_over(Given(with_status(lost, d), jobs, NAMES, NOW))
    assert d.creates == [] and cond(d, "Complete")["status"] == "True"


def test_a_lost_status_without_labelled_jobs_takes_the_template_hash() -> None:
    dj = make_dj(annotation="A")
    d = decide_over(Given(dj, [], NAMES, NOW))
    assert d.status["currentRevision"] == template_revision(dj["spec"]["jobTemplate"])
    assert len(d.creates) == 3  # the plain hash needs no record: creates start at once
