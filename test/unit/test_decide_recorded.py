"""spec.results.deleteSucceededJobs as decisions: a node's recorded success stands for its
deleted Job (the node is done, canary, the failure budget and completion count it), and a
succeeded Job goes once its result is recorded, never before."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from daemonjob.domain.decision.decide import Decision
from daemonjob.domain.jobs.standins import standin_of
from daemonjob.domain.results.noderesult import result_of
from daemonjob.domain.rollout.keptplan import KeptPlan, node_views
from daemonjob.domain.rollout.plan import HISTORY, RECORDED, PlanContext
from daemonjob.domain.spec.validate import validate
from daemonjob.testing.doubles.builders import daemonjob, job, nodes, revision_of
from daemonjob.testing.doubles.decisions import Given, decide_over

NOW = datetime(2024, 3, 6, 12, 0, 0, tzinfo=timezone.utc)
LET_GO = {"results": {"deleteSucceededJobs": True}}


def let_go(**spec: Any) -> dict[str, Any]:
    return daemonjob(**LET_GO, **spec)


def recorded(dj: dict[str, Any], *names: str, state: str = "succeeded", **kw: Any) -> list[dict[str, Any]]:
    """The results the reports hold of `names`' Jobs (the Jobs themselves may be gone)."""
    out = []
    for name in names:
        result = result_of(job(dj, name, state, **kw), None)
        assert result is not None
        out.append(result)
    return out


def created(decision: Decision) -> list[str]:
    return [c.node for c in decision.creates]


def deletes(decision: Decision) -> dict[str, str]:
    return {d.node or d.name: d.reason for d in decision.deletes}


def condition(decision: Decision, kind: str) -> dict[str, Any]:
    (found,) = [c for c in decision.status["conditions"] if c["type"] == kind]
    return found


def test_a_node_with_a_recorded_success_and_no_job_is_not_run_again() -> None:
    dj = let_go(maxParallel=5)
    decision = decide_over(Given(dj, [], nodes("n1", "n2", "n3"), NOW, recorded=recorded(dj, "n1", "n2")))
    assert created(decision) == ["n3"]
    assert decision.status["succeededNodes"] == 2 and decision.status["desiredNodes"] == 3


def test_every_node_recorded_is_complete_with_no_job_left() -> None:
    dj = let_go()
    decision = decide_over(Given(dj, [], nodes("n1", "n2"), NOW, recorded=recorded(dj, "n1", "n2")))
    assert created(decision) == [] and decision.deletes == []
    assert condition(decision, "Complete")["status"] == "True"


def test_a_record_of_an_earlier_revision_does_not_count() -> None:
    dj = let_go(maxParallel=5)
    decision = decide_over(Given(dj, [], nodes("n1", "n2"), NOW, recorded=recorded(dj, "n1", revision="older")))
    assert created(decision) == ["n1", "n2"]


def test_a_succeeded_job_goes_once_its_result_is_recorded_and_not_before() -> None:
    dj = let_go(maxParallel=5)
    jobs = [job(dj, "n1", "succeeded"), job(dj, "n2", "succeeded"), job(dj, "n3", "failed")]
    given = Given(
        dj, jobs, nodes("n1", "n2", "n3"), NOW, recorded=recorded(dj, "n1") + recorded(dj, "n3", state="failed")
    )
    decision = decide_over(given)
    assert deletes(decision) == {"n1": RECORDED}  # n2 not recorded yet; a failed Job stays
    (gone,) = decision.deletes
    assert gone.uid == jobs[0]["metadata"]["uid"]  # deleted under a uid precondition
    assert decision.status["succeededNodes"] == 2 and decision.status["failedNodes"] == 1


def test_without_the_field_a_recorded_job_stays() -> None:
    dj = daemonjob()
    jobs = [job(dj, "n1", "succeeded")]
    assert decide_over(Given(dj, jobs, nodes("n1"), NOW)).deletes == []


def test_a_recorded_job_being_deleted_leaves_its_node_succeeded() -> None:
    dj = let_go()
    jobs = [job(dj, "n1", "terminating")]
    jobs[0]["status"]["completionTime"] = jobs[0]["metadata"]["creationTimestamp"]
    decision = decide_over(Given(dj, jobs, nodes("n1"), NOW, recorded=recorded(dj, "n1")))
    assert created(decision) == [] and decision.deletes == []
    assert decision.status["succeededNodes"] == 1 and condition(decision, "Complete")["status"] == "True"


def test_a_deleted_node_with_a_record_deletes_nothing() -> None:
    dj = let_go()
    decision = decide_over(Given(dj, [], nodes("n2"), NOW, recorded=recorded(dj, "n1", "n2")))
    assert decision.deletes == [] and decision.status["desiredNodes"] == 1


def test_older_history_is_still_cleaned_beside_the_records() -> None:
    dj = let_go(historyLimit=0)
    old = job(dj, "n1", "failed", revision="older")
    decision = decide_over(Given(dj, [old], nodes("n1"), NOW, recorded=recorded(dj, "n1")))
    assert deletes(decision) == {"n1": HISTORY} and created(decision) == []


def test_recorded_canaries_pause_the_rollout_as_their_jobs_would() -> None:
    dj = let_go(rollout={"canary": 2})
    decision = decide_over(Given(dj, [], nodes("n1", "n2", "n3", "n4"), NOW, recorded=recorded(dj, "n1", "n2")))
    assert created(decision) == []
    reconciling = condition(decision, "Reconciling")
    assert reconciling["reason"] == "CanaryPaused" and "n1, n2" in reconciling["message"]


def test_the_failure_budget_counts_records_as_successes() -> None:
    dj = let_go(maxParallel=5, maxFailedNodes="50%")
    jobs = [job(dj, "n1", "failed")]
    given = Given(dj, jobs, nodes("n1", "n2", "n3", "n4"), NOW, recorded=recorded(dj, "n2", "n3"))
    decision = decide_over(given)
    assert created(decision) == ["n4"]
    assert condition(decision, "Failed")["status"] == "False"
    assert decision.status["succeededNodes"] == 2 and decision.status["failedNodes"] == 1


def test_a_lost_status_finds_the_revision_of_the_records() -> None:
    dj = let_go(maxParallel=5)
    dj["metadata"]["generation"] = 2
    dj["status"] = {"currentRevision": "first", "templateHash": "not-this-template"}
    status = decide_over(Given(dj, [], nodes("n1"), NOW)).status
    revision = status["currentRevision"]
    assert revision != "first"  # a template edit: a salted revision
    results = recorded(dj, "n1", "n2", revision=revision)
    for r in results:
        r["templateHash"] = status["templateHash"]  # what the Jobs' daemonjob.io/template-hash said
    dj["status"] = {}  # lost, and every Job gone
    decision = decide_over(Given(dj, [], nodes("n1", "n2"), NOW, recorded=results))
    assert decision.status["currentRevision"] == revision
    assert created(decision) == [] and decision.status["succeededNodes"] == 2


def test_runs_count_a_record_of_the_current_run_only() -> None:
    dj = let_go(maxParallel=5)
    dj["metadata"]["annotations"] = {"daemonjob.io/run-now": "go"}
    first = decide_over(Given(dj, [], nodes("n1", "n2"), NOW))
    run = first.status["currentRun"]
    dj["status"] = first.status
    results = recorded(dj, "n1")
    results[0]["run"] = run
    other = recorded(dj, "n2")
    other[0]["run"] = "an-earlier-run"
    decision = decide_over(Given(dj, [], nodes("n1", "n2"), NOW, recorded=results + other))
    assert created(decision) == ["n2"]


def test_the_field_is_a_boolean_and_not_with_never_or_checked_turns() -> None:
    def problems(**spec: Any) -> list[str]:
        return [p.message for p in validate(daemonjob(**spec)).problems]

    assert validate(let_go()).spec.delete_succeeded_jobs
    assert not validate(daemonjob()).spec.delete_succeeded_jobs
    assert "must be a boolean" in problems(results={"deleteSucceededJobs": "yes"})[0]
    assert "rerunPolicy Never" in problems(**LET_GO, rerunPolicy="Never")[0]
    reboot = {"nodeMaintenance": {"reboot": "Expected", "drain": {}}}
    assert any("reboot" in m for m in problems(**LET_GO, **reboot))
    assert not validate(daemonjob(**LET_GO, rerunPolicy="Never")).spec.delete_succeeded_jobs


def test_a_kept_plan_told_of_a_job_let_go_equals_one_made_from_scratch() -> None:
    """The incremental plan (a node's Job deleted, its record standing in) and the full one
    from the caches agree, as the controller's self-check compares them."""
    dj = let_go(maxParallel=5)
    checked = validate(dj)
    ctx = PlanContext(checked.eligibility, revision_of(dj), False, 3, let_go=True)
    names = ("n1", "n2", "n3")
    jobs = [job(dj, n, "succeeded") for n in names]
    records = {v.node: v for r in recorded(dj, *names) if (v := standin_of(r)) is not None and v.node}
    kept = KeptPlan.of(jobs, nodes(*names), recorded=records)
    before = kept.plan_for(ctx)
    assert before.succeeded == 3 and {d.reason for d in before.deletes} == {RECORDED}
    node = nodes("n1")[0]
    kept.set_node("n1", node, node_views(node, [], records["n1"]))
    after = kept.plan_for(ctx)
    fresh = KeptPlan.of(jobs[1:], nodes(*names), recorded=records).plan_for(ctx)
    assert after == fresh and after.succeeded == 3 and len(after.deletes) == 2
