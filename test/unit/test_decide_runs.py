"""Runs in decide: scheduled ticks, run-now, Forbid/Replace per node, suspend, config changes.

A small world: a DaemonJob, its Jobs and nodes; each decision's status is written back
and its Job writes applied, as the act layer and the API server would.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

from daemonjob.domain.decision.decide import RUN_SUCCEEDED, Decision
from daemonjob.domain.jobs.contract import job_node, job_run
from daemonjob.domain.rollout.plan import HISTORY, OLD_REVISION, OLD_RUN
from daemonjob.domain.schedule.runids import tick_run_id
from daemonjob.domain.schedule.runs import ANNOTATION_RUN_NOW, SKIP_FORBID, SKIP_SUSPENDED
from daemonjob.domain.shared.apinames import LABEL_RUN
from daemonjob.domain.shared.timestamps import format_time
from daemonjob.testing.doubles import builders
from daemonjob.testing.doubles.builders import node
from daemonjob.testing.doubles.decisions import Given, decide_over
from daemonjob.testing.doubles.decisions import apply as apply_decision

CREATED = datetime(2024, 3, 1, 11, 58, 0, tzinfo=timezone.utc)
TICK1 = datetime(2024, 3, 1, 12, 0, 0, tzinfo=timezone.utc)  # "*/5 * * * *" ticks every 5 minutes
TICK2 = TICK1 + timedelta(minutes=5)
TICK3 = TICK2 + timedelta(minutes=5)
SCRIPT = "script"


def make_dj(**spec: Any) -> dict[str, Any]:
    """Every five minutes, created at CREATED."""
    return builders.daemonjob(
        "nightly", resource_version=None, status={}, created=format_time(CREATED), **{"schedule": "*/5 * * * *", **spec}
    )


def with_script(dj: dict[str, Any]) -> dict[str, Any]:
    dj = copy.deepcopy(dj)
    dj["spec"]["rerunOnConfigChange"] = True
    dj["spec"]["jobTemplate"]["spec"]["template"]["spec"]["volumes"] = [{"name": "s", "configMap": {"name": SCRIPT}}]
    return dj


def configmap(data: str) -> dict[str, Any]:
    return {"metadata": {"name": SCRIPT, "namespace": "ops"}, "data": {"run.sh": data}}


@dataclass
class World:
    dj: dict[str, Any]
    nodes: list[dict[str, Any]]
    jobs: list[dict[str, Any]] = field(default_factory=list)
    configmaps: dict[str, Any] | None = None

    def step(self, now: datetime) -> Decision:
        """Decide at `now`, write the status, apply the Job writes (deletes start terminating)."""
        decision = decide_over(Given(self.dj, self.jobs, self.nodes, now, configmaps=self.configmaps))
        self.dj["status"] = decision.status
        self.jobs = apply_decision(decision, self.jobs, now)
        return decision

    def finish(self, state: str = "Complete", at: datetime = TICK1) -> None:
        """Every active Job finishes; deleted ones are gone."""
        out = []
        for j in self.jobs:
            if j["metadata"].get("deletionTimestamp"):
                continue
            j = copy.deepcopy(j)
            conds = j.setdefault("status", {}).setdefault("conditions", [])
            if not conds:
                conds.append({"type": state, "status": "True", "lastTransitionTime": format_time(at)})
                if state == "Complete":
                    j["status"]["completionTime"] = format_time(at)
            out.append(j)
        self.jobs = out

    def drop_terminating(self) -> None:
        self.jobs = [j for j in self.jobs if not j["metadata"].get("deletionTimestamp")]

    def runs_by_node(self) -> dict[str, list[str | None]]:
        out: dict[str, list[str | None]] = {}
        for j in self.jobs:
            out.setdefault(job_node(j) or "", []).append(job_run(j))
        return out


def world(count: int = 3, **spec: Any) -> World:
    return World(make_dj(**spec), [node(f"n{i}") for i in range(count)])


def cond(decision: Decision, kind: str) -> dict[str, Any]:
    return next(c for c in decision.status["conditions"] if c["type"] == kind)


def reasons(decision: Decision) -> list[str]:
    return [e.reason for e in decision.events]


def test_before_its_first_tick_a_scheduled_daemonjob_starts_nothing_and_says_when() -> None:
    w = world()
    d = w.step(TICK1 - timedelta(seconds=30))
    assert d.creates == [] and d.run_started is None
    assert d.requeue_at == TICK1
    assert d.status["nextScheduleTime"] == format_time(TICK1)
    assert "currentRun" not in d.status
    assert cond(d, "Complete")["reason"] == "WaitingForSchedule" and cond(d, "Complete")["status"] == "False"
    assert cond(d, "Reconciling")["status"] == "False"  # nothing in progress: kstatus reads it as Current
    assert cond(d, "Stalled")["status"] == "False"
    assert "RevisionStarted" not in reasons(d)


def test_each_tick_starts_a_run_on_every_node_with_its_label_and_its_own_job_names() -> None:
    w = world()
    first = w.step(TICK1 + timedelta(seconds=1))
    run1 = tick_run_id(TICK1)
    assert sorted(c.node for c in first.creates) == ["n0", "n1", "n2"]
    assert {c.body["metadata"]["labels"][LABEL_RUN] for c in first.creates} == {run1}
    assert {c.body["spec"]["template"]["metadata"]["labels"][LABEL_RUN] for c in first.creates} == {run1}
    assert first.run_started == run1 and "RunStarted" in reasons(first)
    assert first.status["currentRun"] == run1
    assert first.status["lastScheduleTime"] == format_time(TICK1)
    assert first.requeue_at == TICK2 and first.status["nextScheduleTime"] == format_time(TICK2)
    assert all(len(c.name) <= 63 for c in first.creates)

    again = w.step(TICK1 + timedelta(seconds=2))  # the status was written: the same tick never starts twice
    assert again.creates == [] and again.run_started is None

    w.finish()
    done = w.step(TICK1 + timedelta(seconds=30))
    assert cond(done, "Complete")["status"] == "True" and run1 in cond(done, "Complete")["message"]
    assert done.run_finished == RUN_SUCCEEDED
    assert done.status["lastSuccessfulTime"] == format_time(TICK1 + timedelta(seconds=30))
    assert w.step(TICK1 + timedelta(seconds=40)).run_finished is None  # finished once

    second = w.step(TICK2)
    run2 = tick_run_id(TICK2)
    assert sorted(c.node for c in second.creates) == ["n0", "n1", "n2"]
    assert {c.run for c in second.creates} == {run2}
    assert not {c.name for c in first.creates} & {c.name for c in second.creates}
    assert cond(second, "Complete")["status"] == "False"  # Complete refers to the current run
    assert second.status["lastSuccessfulTime"] == format_time(TICK1 + timedelta(seconds=30))  # the last run's
    assert second.deletes == []  # the first run's Jobs are history (historyLimit 1)

    w.finish(at=TICK2)
    w.step(TICK2 + timedelta(seconds=30))
    third = w.step(TICK3)
    w.finish(at=TICK3)
    assert {d.reason for d in third.deletes} == {HISTORY}
    assert {d.node for d in third.deletes} == {"n0", "n1", "n2"}  # each node's first run goes
    w.drop_terminating()
    assert {n: sorted(r or "" for r in runs) for n, runs in w.runs_by_node().items()} == {
        n: sorted([run2, tick_run_id(TICK3)]) for n in ("n0", "n1", "n2")
    }


def test_forbid_skips_a_tick_while_the_run_is_active_with_an_event_and_a_status_note() -> None:
    w = world()
    w.step(TICK1)
    d = w.step(TICK2 + timedelta(seconds=1))  # the first run's Jobs are still active
    assert d.creates == [] and d.deletes == [] and d.run_started is None
    assert d.ticks_skipped == [(SKIP_FORBID, 1)]
    assert SKIP_FORBID in reasons(d)
    assert d.status["lastSkipReason"] == SKIP_FORBID and d.status["lastSkippedTime"] == format_time(TICK2)
    assert d.status["currentRun"] == tick_run_id(TICK1)
    w.finish()
    later = w.step(TICK2 + timedelta(seconds=30))
    assert later.creates == []  # a skipped tick does not start late
    assert w.step(TICK3).run_started == tick_run_id(TICK3)


def test_replace_deletes_the_old_runs_active_jobs_within_max_parallel_then_starts_the_new_run() -> None:
    w = world(concurrencyPolicy="Replace", maxParallel=1)
    w.step(TICK1)  # n0 runs the first run; n1 and n2 wait for the slot
    d = w.step(TICK2)  # n0's first-run Job is still active
    assert d.run_started == tick_run_id(TICK2) and "RunStarted" in reasons(d)
    assert [(x.node, x.reason) for x in d.deletes] == [("n0", OLD_RUN)]  # the replacement takes the one slot
    assert d.creates == []
    w.drop_terminating()
    d = w.step(TICK2 + timedelta(seconds=1))
    assert [(c.node, c.run) for c in d.creates] == [("n0", tick_run_id(TICK2))]
    w.finish(at=TICK2)
    d = w.step(TICK2 + timedelta(seconds=2))
    assert [(c.node, c.run) for c in d.creates] == [("n1", tick_run_id(TICK2))]  # n1 never ran the first run


def test_replace_never_runs_two_jobs_on_one_node() -> None:
    w = world(concurrencyPolicy="Replace")
    w.step(TICK1)
    d = w.step(TICK2)
    assert {x.reason for x in d.deletes} == {OLD_RUN} and d.creates == []  # delete first, create next pass
    d = w.step(TICK2 + timedelta(seconds=1))
    assert d.creates == []  # the old Jobs are still terminating
    w.drop_terminating()
    d = w.step(TICK2 + timedelta(seconds=2))
    assert sorted(c.node for c in d.creates) == ["n0", "n1", "n2"]


def test_a_node_waits_for_its_job_of_another_run_under_forbid() -> None:
    w = world(concurrencyPolicy="Replace")
    w.step(TICK1)
    w.jobs = [j for j in w.jobs if job_node(j) != "n2"]
    w.finish()
    w.jobs.append(copy.deepcopy(w.jobs[0]))  # n0's job, made active again and moved to n2
    stray = w.jobs[-1]
    stray["metadata"]["annotations"]["daemonjob.io/node"] = "n2"
    stray["metadata"]["name"] = "stray"
    stray["status"] = {}
    stray["metadata"]["labels"][LABEL_RUN] = "older"
    w.dj["spec"]["concurrencyPolicy"] = "Forbid"
    d = w.step(TICK1 + timedelta(seconds=5))
    assert d.creates == [] and d.deletes == []  # n2 waits for its active Job of another run
    w.finish()
    d = w.step(TICK1 + timedelta(seconds=10))
    assert [c.node for c in d.creates] == ["n2"]


def test_run_now_starts_exactly_one_run_scheduled_or_not() -> None:
    w = world(schedule=None)
    d = w.step(TICK1)
    assert d.run_started is None and sorted(c.node for c in d.creates) == ["n0", "n1", "n2"]
    assert {c.run for c in d.creates} == {None}  # an unscheduled DaemonJob's Jobs carry no run
    w.finish()
    w.step(TICK1 + timedelta(seconds=5))
    w.dj["metadata"]["annotations"] = {ANNOTATION_RUN_NOW: "please"}
    d = w.step(TICK1 + timedelta(seconds=10))
    assert d.run_started is not None and d.run_started.startswith("now-please-")
    assert sorted(c.node for c in d.creates) == ["n0", "n1", "n2"]
    assert {c.run for c in d.creates} == {d.run_started}
    assert d.status["lastRunNowTrigger"] == "please" and d.status["currentRun"] == d.run_started
    assert d.requeue_at is None and "nextScheduleTime" not in d.status
    for t in (11, 12):
        again = w.step(TICK1 + timedelta(seconds=t))
        assert again.run_started is None and again.creates == []


def test_run_now_waits_under_forbid_while_a_run_is_active() -> None:
    w = world()
    w.step(TICK1)
    w.dj["metadata"]["annotations"] = {ANNOTATION_RUN_NOW: "x"}
    d = w.step(TICK1 + timedelta(seconds=5))
    assert d.run_started is None and "RunNowWaiting" in reasons(d)
    w.finish()
    d = w.step(TICK1 + timedelta(seconds=6))
    assert d.run_started is not None and len(d.creates) == 3


def test_suspended_ticks_are_skipped_and_not_run_on_resume() -> None:
    w = world(suspend=True)
    d = w.step(TICK1 + timedelta(seconds=1))
    assert d.creates == [] and d.ticks_skipped == [(SKIP_SUSPENDED, 1)]
    assert "nextScheduleTime" not in d.status and d.requeue_at == TICK2  # woken at each tick, to consume it
    w.dj["spec"]["suspend"] = False
    d = w.step(TICK1 + timedelta(seconds=20))
    assert d.creates == [] and d.run_started is None
    assert d.status["nextScheduleTime"] == format_time(TICK2)
    assert w.step(TICK2).run_started == tick_run_id(TICK2)


def test_an_invalid_schedule_is_stalled_with_the_parsers_message() -> None:
    w = world(schedule="0 25 * * *")
    d = w.step(TICK1)
    stalled = cond(d, "Stalled")
    assert stalled["status"] == "True" and stalled["reason"] == "InvalidSchedule"
    assert 'spec.schedule: Invalid value: "0 25 * * *"' in stalled["message"]
    assert d.creates == [] and d.requeue_at is None
    w2 = world(timeZone="Mars/Olympus")
    assert cond(w2.step(TICK1), "Stalled")["reason"] == "InvalidTimeZone"


def test_template_change_mid_run_reruns_the_current_run_with_the_new_template() -> None:
    w = world()
    w.step(TICK1)
    w.dj["spec"]["jobTemplate"]["metadata"] = {"annotations": {"edit": "1"}}
    w.dj["metadata"]["generation"] = 2
    d = w.step(TICK1 + timedelta(seconds=4))
    assert d.creates == [] and d.deletes == []  # the new revision is recorded first
    d = w.step(TICK1 + timedelta(seconds=5))
    assert {x.reason for x in d.deletes} == {OLD_REVISION} and len(d.deletes) == 3
    w.drop_terminating()
    d = w.step(TICK1 + timedelta(seconds=6))
    assert len(d.creates) == 3 and {c.run for c in d.creates} == {tick_run_id(TICK1)}
    assert d.status["currentRun"] == tick_run_id(TICK1)


def test_template_change_with_rerun_never_waits_for_the_next_run() -> None:
    w = world(rerunPolicy="Never")
    w.step(TICK1)
    w.finish()
    w.dj["spec"]["jobTemplate"]["metadata"] = {"annotations": {"edit": "1"}}
    w.dj["metadata"]["generation"] = 2
    d = w.step(TICK1 + timedelta(seconds=5))
    assert d.creates == [] and d.deletes == []
    d = w.step(TICK2)
    assert len(d.creates) == 3 and {c.revision for c in d.creates} == {d.status["currentRevision"]}


def test_a_node_joining_between_runs_gets_the_current_run() -> None:
    w = world(2)
    w.step(TICK1)
    w.finish()
    w.step(TICK1 + timedelta(seconds=5))
    w.nodes.append(node("n9"))
    d = w.step(TICK1 + timedelta(seconds=60))
    assert [(c.node, c.run) for c in d.creates] == [("n9", tick_run_id(TICK1))]


def test_a_config_change_reruns_every_node_and_a_missing_configmap_is_named() -> None:
    w = World(with_script(make_dj(schedule=None)), [node("n0"), node("n1")], configmaps={SCRIPT: None})
    d = w.step(TICK1)
    stalled = cond(d, "Stalled")
    assert stalled["status"] == "True" and stalled["reason"] == "ConfigMapMissing" and SCRIPT in stalled["message"]
    assert d.creates == [] and "ConfigMapMissing" in reasons(d)

    w.configmaps = {SCRIPT: configmap("echo 1")}  # it appears: the controller re-decides
    assert w.step(TICK1 + timedelta(milliseconds=500)).creates == []  # the new revision is recorded first
    d = w.step(TICK1 + timedelta(seconds=1))
    assert cond(d, "Stalled")["status"] == "False" and len(d.creates) == 2
    w.finish()
    first = w.step(TICK1 + timedelta(seconds=2)).status["currentRevision"]
    assert w.step(TICK1 + timedelta(seconds=3)).creates == []  # unchanged: nothing re-runs

    w.configmaps = {SCRIPT: {**configmap("echo 1"), "metadata": {"name": SCRIPT, "labels": {"a": "b"}}}}
    assert w.step(TICK1 + timedelta(seconds=4)).creates == []  # labels do not count

    w.configmaps = {SCRIPT: configmap("echo 2")}
    assert w.step(TICK1 + timedelta(seconds=4, milliseconds=500)).creates == []  # recorded first
    d = w.step(TICK1 + timedelta(seconds=5))
    assert len(d.creates) == 2 and d.status["currentRevision"] != first
    w.finish()
    w.step(TICK1 + timedelta(seconds=6))
    w.configmaps = {SCRIPT: configmap("echo 1")}  # back to the first content: a new revision again
    w.step(TICK1 + timedelta(seconds=6, milliseconds=500))
    d = w.step(TICK1 + timedelta(seconds=7))
    assert len(d.creates) == 2 and d.status["currentRevision"] not in (first,)


def test_without_the_configmaps_read_the_revision_is_the_templates() -> None:
    dj = with_script(make_dj(schedule=None))
    plain = decide_over(Given(dj, [], [node("n0")], TICK1))
    assert cond(plain, "Stalled")["status"] == "False" and len(plain.creates) == 1


def test_past_its_bounds_a_daemonjob_stalls_with_every_problem_and_starts_nothing() -> None:
    from daemonjob import defaults

    w = world(historyLimit=defaults.HISTORY_LIMIT_MAX + 1, schedule="0 25 * * *", concurrencyPolicy="Allow")
    w.dj["spec"]["jobTemplate"]["metadata"] = {"annotations": {"x": "y" * defaults.JOB_TEMPLATE_MAX_BYTES}}
    d = w.step(TICK1)
    stalled = cond(d, "Stalled")
    assert stalled["status"] == "True" and stalled["reason"] == "TemplateTooLarge"
    fields = [part.split(":")[0] for part in stalled["message"].split("; ")]
    assert fields == ["spec.jobTemplate", "spec.historyLimit", "spec.concurrencyPolicy", "spec.schedule"]
    assert len(stalled["message"]) < 2000  # the refused values are not repeated whole
    assert d.creates == []
