"""Scheduled runs on the local cluster: ticks on every node, Forbid, Replace, run-now, a
controller killed across a tick, no requests between ticks, and re-runs on ConfigMap edits.

Cron has minute resolution, so the tick test lines up with the wall clock and waits for two
minute boundaries (two to three minutes in all); it checks every policy at once, on three
DaemonJobs over the same nodes. The other tests need no tick.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any

from harness import (
    EXTERNAL,
    OK,
    Cluster,
    JobWatcher,
    Nodes,
    condition,
    daemonjob,
    holds,
    is_true,
    job_active,
    job_node,
    job_revision,
    job_run,
    sleep,
    wait_for,
)

from daemonjob.machinery.client.kube import PATCH_MERGE, path_for
from daemonjob.testing.prom import metric_value

EVERY_MINUTE = "* * * * *"
# Time before the first tick for the DaemonJobs to start their run-now runs and go idle.
LEAD_TIME = 25
# The controller is killed this long before the first tick; its successor waits out the lease.
KILL_BEFORE_TICK = 3
DJ_RESOURCES = ("jobs", "daemonjobs", "daemonjobs/status")


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


def next_minute(after: datetime) -> datetime:
    return after.replace(second=0, microsecond=0) + timedelta(minutes=1)


def sleep_until(when: datetime) -> None:
    delay = (when - utcnow()).total_seconds()
    if delay > 0:
        time.sleep(delay)


def run_id(tick: datetime) -> str:
    return tick.astimezone(timezone.utc).strftime("%Y%m%dt%H%M%Sz")


def runs_by_node(watcher: JobWatcher) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for node, run in watcher.uids_per_node_run():
        out.setdefault(node, set()).add(run)
    return out


def once_per_node_and_run(watcher: JobWatcher) -> bool:
    return all(len(uids) == 1 for uids in watcher.uids_per_node_run().values())


def jobs_of_run(api: Cluster, name: str, run: str) -> list[dict[str, Any]]:
    return [j for j in api.jobs(name) if job_run(j) == run]


def succeeded_on(api: Cluster, name: str, run: str, nodes: list[str]) -> Callable[[], bool]:
    def check() -> bool:
        done = {job_node(j) for j in jobs_of_run(api, name, run) if is_true(j, "Complete")}
        return done == set(nodes)

    return check


def writes_and_reads(metrics: str) -> float:
    """Requests about Jobs and DaemonJobs other than watches (those stay open between ticks)."""
    total = 0.0
    for verb in ("get", "list", "create", "update", "patch", "delete"):
        for resource in DJ_RESOURCES:
            total += metric_value(metrics, "daemonjob_api_requests_total", {"verb": verb, "resource": resource}) or 0
    return total


def test_ticks_run_everywhere_forbid_skips_replace_replaces_and_a_restart_runs_a_tick_once(
    api: Cluster, nodes: Nodes, group: str, controller: Any
) -> None:
    names = nodes(2)
    now = utcnow()
    if (next_minute(now) - now).total_seconds() < LEAD_TIME:
        sleep_until(next_minute(now) + timedelta(seconds=1))
        now = utcnow()
    t1 = next_minute(now)
    t2 = t1 + timedelta(minutes=1)
    # Forbid's run-now run is still active when the restarted controller handles the first
    # tick (after the lease of the killed one expires), and over before the second.
    slow = int((t1 - now).total_seconds()) + 40
    run1, run2 = run_id(t1), run_id(t2)

    with (
        JobWatcher(api.kube, api.namespace, "ticks") as ticks,
        JobWatcher(api.kube, api.namespace, "forbid") as forbid,
        JobWatcher(api.kube, api.namespace, "replace") as replace,
    ):
        api.apply(daemonjob("ticks", group, OK, schedule=EVERY_MINUTE, startingDeadlineSeconds=50, maxParallel=1))
        api.apply(daemonjob("forbid", group, sleep(slow), schedule=EVERY_MINUTE))
        api.apply(daemonjob("replace", group, sleep(600), schedule=EVERY_MINUTE, concurrencyPolicy="Replace"))
        api.wait_status(
            "ticks",
            lambda d: d["status"].get("nextScheduleTime") == t1.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "the next tick in the status",
        )
        assert api.jobs("ticks") == [], "a scheduled DaemonJob starts nothing before its first tick"
        assert condition(api.get("ticks"), "Complete")["reason"] == "WaitingForSchedule"

        # Run now: one run on every node, before any tick.
        api.run_now("forbid", "first")
        api.run_now("replace", "first")
        for name in ("forbid", "replace"):
            dj = api.wait_status(name, lambda d: d["status"].get("activeNodes") == 2, "the run-now run active")
            assert dj["status"]["currentRun"].startswith("now-first-"), dj["status"]
        started = {
            "forbid": api.get("forbid")["status"]["currentRun"],
            "replace": api.get("replace")["status"]["currentRun"],
        }

        # Idle until the tick: no request about Jobs or DaemonJobs, only the open watches.
        time.sleep(2)
        before = writes_and_reads(controller.metrics())
        sleep_until(t1 - timedelta(seconds=KILL_BEFORE_TICK + 1))
        assert writes_and_reads(controller.metrics()) == before, "requests were made between ticks"

        # Killed before the tick, restarted after it: the tick runs once all the same.
        sleep_until(t1 - timedelta(seconds=KILL_BEFORE_TICK))
        controller.kill(signal.SIGKILL)
        assert not controller.alive() or EXTERNAL
        controller.restart()

        wait_for(
            succeeded_on(api, "ticks", run1, names), 50, "the first tick's run on every node", describe=ticks.summary
        )
        skipped = api.wait_status(
            "forbid",
            lambda d: d["status"].get("lastSkipReason") == "ConcurrencyForbid",
            "Forbid to skip the first tick",
        )
        assert skipped["status"]["lastSkippedTime"] == t1.strftime("%Y-%m-%dT%H:%M:%SZ")
        assert skipped["status"]["currentRun"] == started["forbid"]
        api.wait_event("forbid", lambda e: e["reason"] == "ConcurrencyForbid", "the skip's Event")
        wait_for(
            lambda: {job_node(j) for j in jobs_of_run(api, "replace", run1)} == set(names),
            50,
            "Replace to start the first tick's run",
            describe=replace.summary,
        )

        # The second tick: everyone runs (Forbid's earlier run is over by now).
        wait_for(
            succeeded_on(api, "ticks", run2, names), 100, "the second tick's run on every node", describe=ticks.summary
        )
        wait_for(
            lambda: {job_node(j) for j in jobs_of_run(api, "forbid", run2)} == set(names),
            30,
            "Forbid to run the second tick",
            describe=forbid.summary,
        )
        wait_for(
            lambda: {job_node(j) for j in jobs_of_run(api, "replace", run2)} == set(names),
            30,
            "Replace to replace the first tick's run",
            describe=replace.summary,
        )
        done = api.wait_status(
            "ticks",
            lambda d: is_true(d, "Complete") and d["status"].get("currentRun") == run2,
            "the second run to complete",
        )
        wait_for(
            lambda: [j for j in api.jobs("replace") if job_run(j) != run2 and job_active(j)] == [],
            30,
            "the replaced runs' Jobs gone",
            describe=replace.summary,
        )

    assert runs_by_node(ticks) == {n: {run1, run2} for n in names}, ticks.summary()
    assert once_per_node_and_run(ticks), ticks.summary()
    assert ticks.max_active <= 1, ticks.summary()  # maxParallel applies to every run
    assert done["status"]["lastScheduleTime"] == t2.strftime("%Y-%m-%dT%H:%M:%SZ")
    assert done["status"]["lastSuccessfulTime"] >= t2.strftime("%Y-%m-%dT%H:%M:%SZ")
    assert done["status"]["nextScheduleTime"] > t2.strftime("%Y-%m-%dT%H:%M:%SZ")

    assert runs_by_node(forbid) == {n: {started["forbid"], run2} for n in names}, forbid.summary()
    assert once_per_node_and_run(forbid), forbid.summary()
    assert runs_by_node(replace) == {n: {started["replace"], run1, run2} for n in names}, replace.summary()
    assert once_per_node_and_run(replace), replace.summary()
    assert all(v <= 1 for v in replace.max_active_per_node.values()), replace.summary()

    text = controller.metrics()  # the restarted process saw both ticks
    ns = api.namespace
    assert metric_value(text, "daemonjob_runs_started_total", {"namespace": ns, "name": "ticks"}) == 2
    assert (
        metric_value(text, "daemonjob_runs_finished_total", {"namespace": ns, "name": "ticks", "result": "succeeded"})
        == 2
    )
    assert (
        metric_value(
            text, "daemonjob_runs_skipped_total", {"namespace": ns, "name": "forbid", "reason": "ConcurrencyForbid"}
        )
        == 1
    )
    assert metric_value(text, "daemonjob_runs_started_total", {"namespace": ns, "name": "replace"}) == 2


def test_editing_a_referenced_configmap_reruns_every_node(
    api: Cluster, nodes: Nodes, group: str, controller: Any
) -> None:
    """rerunOnConfigChange: a missing ConfigMap is named, its creation starts the nodes, an edit re-runs them."""
    names = nodes(2)
    cm_path = path_for("v1", "configmaps", api.namespace)
    volume = {"volumes": [{"name": "script", "configMap": {"name": "node-script"}}]}
    api.apply(daemonjob("scripted", group, OK, pod_spec=volume, rerunOnConfigChange=True))
    dj = api.wait_status(
        "scripted",
        lambda d: condition(d, "Stalled").get("reason") == "ConfigMapMissing",
        "Stalled naming the missing ConfigMap",
    )
    assert "node-script" in condition(dj, "Stalled")["message"]
    assert api.jobs("scripted") == []

    api.kube.create(
        cm_path,
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "node-script"}, "data": {"run.sh": "echo one"}},
    )
    rev1 = api.wait_complete("scripted", 2)["status"]["currentRevision"]

    api.kube.patch(
        path_for("v1", "configmaps", api.namespace, "node-script"),
        {"metadata": {"labels": {"touched": "yes"}}},
        content_type=PATCH_MERGE,
    )
    holds(lambda: len(api.jobs("scripted")) == 2, 3, "a label edit re-runs nothing")

    api.kube.patch(
        path_for("v1", "configmaps", api.namespace, "node-script"),
        {"data": {"run.sh": "echo two"}},
        content_type=PATCH_MERGE,
    )
    done = api.wait_status(
        "scripted",
        lambda d: d["status"]["currentRevision"] != rev1 and is_true(d, "Complete"),
        "the edited script to run everywhere",
    )
    rev2 = done["status"]["currentRevision"]
    by_node = {n: sorted(job_revision(j) for j in jobs) for n, jobs in api.jobs_by_node("scripted").items()}
    assert by_node == {n: sorted([rev1, rev2]) for n in names}


def test_a_bad_schedule_or_zone_is_refused_with_the_parsers_message(
    api: Cluster, nodes: Nodes, group: str, controller: Any
) -> None:
    nodes(1)
    api.apply(daemonjob("badcron", group, OK, schedule="0 25 * * *"))
    api.apply(daemonjob("badzone", group, OK, schedule="@daily", timeZone="Mars/Olympus_Mons"))
    cron = api.wait_status("badcron", lambda d: is_true(d, "Stalled"), "Stalled")
    assert condition(cron, "Stalled")["reason"] == "InvalidSchedule"
    assert 'spec.schedule: Invalid value: "0 25 * * *"' in condition(cron, "Stalled")["message"]
    zone = api.wait_status("badzone", lambda d: is_true(d, "Stalled"), "Stalled")
    assert condition(zone, "Stalled")["reason"] == "InvalidTimeZone"
    assert "Mars/Olympus_Mons" in condition(zone, "Stalled")["message"]
    assert api.jobs("badcron") == [] and api.jobs("badzone") == []
