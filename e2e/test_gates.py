"""Rollout gates (spec.rollout) against the API server: each holds new nodes back, says so in
Reconciling, survives a restart of the controller while it holds (nothing starts early, nothing
runs twice) and lets the rollout go on when it opens.

"Not early" is read from the objects' own times (a Job's creationTimestamp against the
instant the gate named), never from how long the test took."""

from __future__ import annotations

import argparse
import re
from collections import Counter
from datetime import datetime, timedelta, timezone
from typing import Any

from harness import (
    FAIL,
    OK,
    Cluster,
    JobWatcher,
    Nodes,
    condition,
    daemonjob,
    holds,
    job_finished,
    job_node,
    sleep,
    wait_for,
)

from daemonjob.kubectl.cluster.client import Target
from daemonjob.kubectl.commands import promote

_INSTANT = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")


def _time(text: str) -> datetime:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)


def _created(job: dict[str, Any]) -> datetime:
    return _time(job["metadata"]["creationTimestamp"])


def _reconciling(api: Cluster, name: str, reason: str) -> dict[str, Any]:
    dj = api.wait_status(
        name, lambda d: (condition(d, "Reconciling") or {}).get("reason") == reason, f"Reconciling {reason}"
    )
    return condition(dj, "Reconciling")


def _once_per_node(watcher: JobWatcher) -> bool:
    return all(n == 1 for n in Counter(c.node for c in watcher.created).values())


def test_pause_between_nodes_holds_the_slot_across_a_restart(
    api: Cluster, nodes: Nodes, group: str, controller: Any
) -> None:
    first, second = nodes(2)
    with JobWatcher(api.kube, api.namespace, "paced") as watcher:
        api.apply(daemonjob("paced", group, OK, maxParallel=1, rollout={"pauseBetweenNodes": "15s"}))
        cond = _reconciling(api, "paced", "PausingBetweenNodes")
        assert f"after node {first}" in cond["message"], cond
        until = _time(_INSTANT.findall(cond["message"])[-1])
        assert api.job_nodes("paced") == [first]

        controller.restart()  # while the slot is paused: the new controller reads the pause from the Job
        api.wait_complete("paced", 2)

    by_node = {job_node(j): j for j in api.jobs("paced")}
    done = _time(by_node[first]["status"]["completionTime"])
    assert until == done + timedelta(seconds=15)
    assert _created(by_node[second]) >= until, "the second node started before the pause was over"
    assert _once_per_node(watcher) and watcher.max_active == 1, watcher.summary()


def test_window_starts_nodes_only_inside_it_and_goes_on_in_the_next(
    api: Cluster, nodes: Nodes, group: str, controller: Any
) -> None:
    """A window opening every minute for 20 seconds; the first node's Job outlasts it, so the second
    node waits for the next window, across a restart of the controller."""
    first, second = nodes(2)
    window = {"schedule": "* * * * *", "duration": "20s", "timeZone": "Europe/Berlin"}
    with JobWatcher(api.kube, api.namespace, "nightly") as watcher:
        api.apply(daemonjob("nightly", group, sleep(25), maxParallel=1, rollout={"window": window}))
        wait_for(lambda: api.job_nodes("nightly") == [first], 90, "the first node to start in a window")
        cond = _reconciling(api, "nightly", "WaitingForWindow")
        opens = _time(_INSTANT.findall(cond["message"])[-1])
        assert opens.second == 0, cond

        controller.restart()  # while waiting for the window
        api.wait_complete("nightly", 2, timeout=150)

    by_node = {job_node(j): j for j in api.jobs("nightly")}
    assert job_finished(by_node[first]) == "Complete", "the running Job finished after its window closed"
    assert _created(by_node[second]) >= opens, "the second node started before the next window opened"
    assert _once_per_node(watcher) and not watcher.deleted, watcher.summary()


def test_canary_pauses_until_promoted_across_a_restart(api: Cluster, nodes: Nodes, group: str, controller: Any) -> None:
    names = nodes(3)
    with JobWatcher(api.kube, api.namespace, "canaried") as watcher:
        api.apply(daemonjob("canaried", group, OK, rollout={"canary": 1}))
        cond = _reconciling(api, "canaried", "CanaryPaused")
        assert names[0] in cond["message"] and "kubectl daemonjob promote canaried" in cond["message"], cond
        assert api.job_nodes("canaried") == [names[0]]

        controller.restart()  # while paused: the canary is read from the Jobs, the promote from the annotation
        holds(
            lambda: api.job_nodes("canaried") == [names[0]],
            3,
            "nothing past the canary before a promote",
            describe=lambda: api.job_nodes("canaried"),
        )
        assert promote.run(argparse.Namespace(name="canaried"), Target(api.kube, api.namespace)) == 0
        api.wait_complete("canaried", 3)
    assert _once_per_node(watcher) and sorted(c.node for c in watcher.created) == names, watcher.summary()


def test_a_failed_canary_stops_the_rollout(api: Cluster, nodes: Nodes, group: str, controller: Any) -> None:
    names = nodes(3)
    api.apply(daemonjob("doomed", group, FAIL, rollout={"canary": 1}))
    dj = api.wait_status(
        "doomed", lambda d: condition(d, "Failed").get("reason") == "CanaryFailed", "Failed CanaryFailed"
    )
    assert names[0] in condition(dj, "Failed")["message"] and condition(dj, "Stalled")["status"] == "True"
    holds(
        lambda: api.job_nodes("doomed") == [names[0]],
        3,
        "no other node after the canary failed",
        describe=lambda: api.job_nodes("doomed"),
    )
