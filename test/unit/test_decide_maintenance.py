"""The decision's node maintenance step: cordon before the Job, the slots it holds, when a node
is released, drain timeouts recorded before the release, the namespace allowance."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

from daemonjob.domain.decision.decide import Decision
from daemonjob.domain.jobs.jobbody import CORDON_TOLERATION
from daemonjob.domain.nodework.allowance import NODE_MAINTENANCE_NOT_ALLOWED
from daemonjob.domain.nodework.maintenance import DrainProgress, MaintenanceInput
from daemonjob.domain.nodework.releases import ANNOTATION_RELEASE, release_text
from daemonjob.domain.nodework.releasing import (
    DRAIN_TIMED_OUT,
    JOB_FAILED,
    JOB_SUCCEEDED,
    OFF,
    OLDER_ROLLOUT,
    RELEASE_ASKED,
    STOPPED,
)
from daemonjob.domain.shared.noderecord import ANNOTATION_MAINTENANCE, DrainOutcome, NodeRecord, outcomes_of
from daemonjob.domain.shared.timestamps import format_time
from daemonjob.testing.doubles.builders import NS, UID, daemonjob, job, job_template, node, revision_of
from daemonjob.testing.doubles.decisions import Given, decide_over

NOW = datetime(2026, 11, 25, 12, 0, 0, tzinfo=timezone.utc)
ALLOWED = frozenset({NS})


def cordoning(**maintenance: Any) -> dict[str, Any]:
    """Two nodes at a time, each cordoned while its Job runs; `maintenance` adds to spec.nodeMaintenance."""
    return daemonjob(maxParallel=2, nodeMaintenance={"cordon": True, **maintenance})


def _record(
    dj: dict[str, Any], *, revision: str | None = None, since: datetime = NOW, cordoned: bool = True, kept: bool = False
) -> NodeRecord:
    meta = dj["metadata"]
    return NodeRecord(
        f"{meta['namespace']}/{meta['name']}",
        meta["uid"],
        revision or revision_of(dj),
        None,
        cordoned,
        format_time(since),
        kept,
    )


def _held(name: str, record: NodeRecord) -> dict[str, Any]:
    n = node(name, unschedulable=record.cordoned)
    n["metadata"]["annotations"] = {ANNOTATION_MAINTENANCE: record.text()}
    return n


def _decide(
    dj: dict[str, Any],
    nodes: list[dict[str, Any]],
    jobs: list[dict[str, Any]] = (),
    *,
    drains: dict[str, DrainProgress] | None = None,
    allowed: frozenset[str] = ALLOWED,
    now: datetime = NOW,
) -> Decision:
    records, outcomes = {}, {}
    for n in nodes:
        text = (n["metadata"].get("annotations") or {}).get(ANNOTATION_MAINTENANCE)
        if text:
            records[n["metadata"]["name"]] = NodeRecord.parse(text)
        for outcome in outcomes_of(n):
            if outcome.uid == dj["metadata"]["uid"]:
                outcomes[n["metadata"]["name"]] = outcome
    mi = MaintenanceInput(records, drains or {}, allowed, outcomes)
    return decide_over(Given(dj, list(jobs), nodes, now, maintenance=mi))


def test_a_turn_cordons_first_and_creates_no_job() -> None:
    dj = cordoning(drain={"timeout": "5m"})
    d = _decide(dj, [node("a"), node("b"), node("c")])
    assert d.creates == []
    assert [c.node for c in d.node_work.cordons] == ["a", "b"]  # maxParallel 2
    assert all(c.record.uid == UID and c.record.cordoned for c in d.node_work.cordons)
    assert d.node_work.add_finalizer


def test_nodes_in_maintenance_hold_their_slots() -> None:
    dj = cordoning(drain={"timeout": "5m"})
    a, b = _held("a", _record(dj)), _held("b", _record(dj))
    d = _decide(dj, [a, b, node("c")])
    assert d.node_work.cordons == [] and d.creates == []
    assert sorted(x.node for x in d.node_work.drains) == ["a", "b"]
    assert d.status["nodeMaintenance"]["drainingNodes"] == 2


def test_a_drained_node_gets_its_job_tolerating_the_cordon() -> None:
    dj = cordoning(drain={"timeout": "5m"})
    d = _decide(dj, [_held("a", _record(dj)), node("b")], drains={"a": DrainProgress(drained=True)})
    assert [c.node for c in d.creates] == ["a"]
    assert CORDON_TOLERATION in d.creates[0].body["spec"]["template"]["spec"]["tolerations"]
    assert [c.node for c in d.node_work.cordons] == ["b"]


def test_cordon_only_creates_right_after_the_cordon() -> None:
    dj = cordoning()
    d = _decide(dj, [_held("a", _record(dj))])
    assert [c.node for c in d.creates] == ["a"] and d.node_work.drains == []


def test_a_finished_job_releases_its_node_and_a_kept_failure_stays() -> None:
    dj = cordoning()
    nodes = [_held("a", _record(dj)), _held("b", _record(dj))]
    jobs = [job(dj, "a", "succeeded"), job(dj, "b", "failed")]
    d = _decide(dj, nodes, jobs)
    assert {(r.node, r.why) for r in d.node_work.releases} == {("a", JOB_SUCCEEDED), ("b", JOB_FAILED)}
    kept = cordoning(keepFailedCordoned=True)
    d = _decide(kept, [_held("b", _record(kept))], [job(kept, "b", "failed")])
    assert d.node_work.releases == []
    assert d.status["nodeMaintenance"]["keptCordonedNodes"] == ["b"]


def test_a_running_job_keeps_its_node_whatever_changed() -> None:
    dj = cordoning()
    dj["spec"]["suspend"] = True
    d = _decide(dj, [_held("a", _record(dj)), _held("b", _record(dj))], [job(dj, "a", "active")])
    assert [(r.node, r.why) for r in d.node_work.releases] == [("b", STOPPED)]


def test_a_record_of_an_older_revision_is_released() -> None:
    dj = cordoning()
    d = _decide(dj, [_held("a", _record(dj, revision="old"))])
    assert [(r.node, r.why) for r in d.node_work.releases] == [("a", OLDER_ROLLOUT)]
    assert d.node_work.cordons == [], "a node is released before it takes a new turn"


def _released(name: str, outcome: DrainOutcome | None) -> dict[str, Any]:
    """The node after its release: uncordoned, the drain's outcome on it."""
    n = node(name)
    if outcome is not None:
        n["metadata"]["annotations"] = {outcome.annotation: outcome.text()}
    return n


def test_a_drain_timeout_releases_the_node_with_its_outcome_on_it() -> None:
    dj = cordoning(drain={"timeout": "1m", "onTimeout": "Fail"})
    late = NOW + timedelta(minutes=2)
    a = _held("a", _record(dj))
    d = _decide(dj, [a, node("b")], drains={"a": DrainProgress(waiting=("ns/p",), blocked="PDB ns/pdb")}, now=late)
    [release] = d.node_work.releases
    assert (release.node, release.why) == ("a", DRAIN_TIMED_OUT) and release.outcome.on_timeout == "Fail"
    assert release.outcome.of_rollout(revision_of(dj), None) and d.node_work.drains == []
    assert d.status["nodeMaintenance"]["drainFailedNodes"] == ["a"] and d.status["failedNodes"] == 1
    assert d.requeue_at is None, "the release's Node event brings the next pass"
    assert any(e.reason == "DrainTimedOut" and "PDB ns/pdb" in e.message for e in d.events)
    # released with its outcome: no new turn in this revision, whatever the status lists
    for status in (d.status, {}):
        dj["status"] = status
        d = _decide(dj, [_released("a", release.outcome), node("b")], now=late)
        assert [c.node for c in d.node_work.cordons] == ["b"] and d.status["failedNodes"] == 1
        assert d.status["nodeMaintenance"]["drainFailedNodes"] == ["a"]


def test_a_drain_outcome_of_an_older_revision_does_not_hold_the_node() -> None:
    dj = cordoning(drain={"timeout": "1m", "onTimeout": "Skip"})
    old = DrainOutcome(f"{NS}/{dj['metadata']['name']}", UID, "older", None, "Skip")
    d = _decide(dj, [_released("a", old)])
    assert [c.node for c in d.node_work.cordons] == ["a"] and d.status["nodeMaintenance"]["skippedNodes"] == []


def test_a_skipped_node_leaves_the_rollout() -> None:
    dj = cordoning(drain={"timeout": "1m", "onTimeout": "Skip"})
    d = _decide(dj, [_held("a", _record(dj))], now=NOW + timedelta(minutes=2))
    assert d.status["nodeMaintenance"]["skippedNodes"] == ["a"]
    assert d.status["desiredNodes"] == 0 and d.status["failedNodes"] == 0


def test_a_namespace_not_allowed_is_stalled_and_writes_no_node() -> None:
    dj = cordoning()
    d = _decide(dj, [node("a")], allowed=frozenset({"elsewhere"}))
    stalled = next(c for c in d.status["conditions"] if c["type"] == "Stalled")
    assert stalled["reason"] == NODE_MAINTENANCE_NOT_ALLOWED and f'namespace "{NS}"' in stalled["message"]
    assert not d.node_work.writes and d.creates == []


def test_without_maintenance_nothing_changes() -> None:
    dj = daemonjob()
    d = decide_over(Given(dj, [], [node("a")], NOW))
    assert d.node_work is None and [c.node for c in d.creates] == ["a"] and "nodeMaintenance" not in d.status


def test_without_max_parallel_one_node_at_a_time_is_out_of_service() -> None:
    dj = cordoning()
    del dj["spec"]["maxParallel"]
    d = _decide(dj, [node("a"), node("b"), node("c")])
    assert [c.node for c in d.node_work.cordons] == ["a"]


def test_a_kept_failure_is_marked_on_its_record_once() -> None:
    dj = cordoning(keepFailedCordoned=True)
    d = _decide(dj, [_held("b", _record(dj))], [job(dj, "b", "failed")])
    assert [(k.node, k.record) for k in d.node_work.keeps] == [("b", _record(dj, kept=True))]
    d = _decide(dj, [_held("b", _record(dj, kept=True))], [job(dj, "b", "failed")])
    assert d.node_work.keeps == [] and d.node_work.releases == []


def test_a_kept_node_stays_cordoned_and_out_of_the_next_revision_until_released() -> None:
    dj = cordoning(keepFailedCordoned=True)
    old = revision_of(dj)
    kept = _record(dj, kept=True)
    newer = daemonjob(
        maxParallel=2, template=job_template("v2"), nodeMaintenance={"cordon": True, "keepFailedCordoned": True}
    )
    assert revision_of(newer) != old
    for jobs in ([job(dj, "b", "failed")], []):  # its failed Job kept as history, or gone
        d = _decide(newer, [node("a"), _held("b", kept)], jobs)
        assert d.node_work.releases == [] and d.node_work.keeps == []
        assert [c.node for c in d.node_work.cordons] == ["a"] and d.creates == []
        assert d.status["nodeMaintenance"]["keptCordonedNodes"] == ["b"]
        assert d.status["desiredNodes"] == 1, "out of this rollout, as a skipped node"
    newer["spec"]["suspend"] = True
    assert _decide(newer, [_held("b", kept)]).node_work.releases == [], "a stopped rollout keeps it too"
    newer["spec"]["suspend"] = False
    newer["metadata"]["annotations"] = {ANNOTATION_RELEASE: release_text({"b": "an earlier cordon"})}
    assert _decide(newer, [_held("b", kept)]).node_work.releases == [], "a request names the cordon it ends"
    newer["metadata"]["annotations"] = {ANNOTATION_RELEASE: release_text({"b": kept.since})}
    d = _decide(newer, [node("a"), _held("b", kept)])
    assert [(r.node, r.why) for r in d.node_work.releases] == [("b", RELEASE_ASKED)]
    d = _decide(newer, [node("a"), node("b")])  # released: it takes its turn in this revision
    assert [c.node for c in d.node_work.cordons] == ["a", "b"]


def test_a_kept_node_is_released_when_maintenance_is_no_longer_asked_for() -> None:
    dj = cordoning(keepFailedCordoned=True)
    plain = daemonjob(maxParallel=2, template=job_template("v2"))
    d = _decide(plain, [_held("b", _record(dj, kept=True))])
    assert [(r.node, r.why) for r in d.node_work.releases] == [("b", OFF)]


def test_a_kept_node_whose_failed_job_was_deleted_runs_again_in_the_same_revision() -> None:
    dj = cordoning(keepFailedCordoned=True)
    d = _decide(dj, [_held("b", _record(dj, kept=True))])  # `rerun --failed` deleted its Job
    assert [c.node for c in d.creates] == ["b"] and d.node_work.releases == []
