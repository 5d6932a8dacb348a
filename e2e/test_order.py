"""Order across DaemonJobs against the API server: an exclusion group never has two members'
Jobs active on one node (counted from a watch of every member's Jobs), `after` starts a node
only once its dependencies succeeded there, a missing dependency is Stalled, and a restart of
the controller while DaemonJobs wait keeps the order.

"In order" is read from the objects' own times (a Job's creationTimestamp against the
completionTime of the Job it waited for, both in seconds), never from how long the test took."""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timezone
from typing import Any

from harness import Cluster, JobWatcher, Nodes, Workload, condition, daemonjob, job_node, sleep, wait_for


def _time(text: str) -> datetime:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)


def _by_node(api: Cluster, name: str) -> dict[str, dict[str, Any]]:
    return {job_node(j): j for j in api.jobs(name)}


def _starts_after(api: Cluster, later: str, earlier: str) -> None:
    """On every node, `later`'s Job was created once `earlier`'s Job there had finished."""
    first, second = _by_node(api, earlier), _by_node(api, later)
    assert first.keys() == second.keys(), (first.keys(), second.keys())
    for node, job in second.items():
        done = _time(first[node]["status"]["completionTime"])
        assert _time(job["metadata"]["creationTimestamp"]) >= done, f"{later} started on {node} before {earlier} ended"


def _reconciling(api: Cluster, name: str, reason: str) -> dict[str, Any]:
    dj = api.wait_status(
        name, lambda d: (condition(d, "Reconciling") or {}).get("reason") == reason, f"Reconciling {reason}"
    )
    return condition(dj, "Reconciling")


def test_an_exclusion_group_runs_one_member_per_node_across_a_restart(
    api: Cluster, nodes: Nodes, group: str, controller: Any
) -> None:
    names = nodes(3)
    with JobWatcher(api.kube, api.namespace, "maint-a,maint-b") as watcher:
        api.apply(daemonjob("maint-a", group, sleep(4), exclusionGroup="maint"))
        api.wait_status("maint-a", lambda d: (d.get("status") or {}).get("activeNodes") == 3, "a active on 3 nodes")
        api.apply(daemonjob("maint-b", group, sleep(1), exclusionGroup="maint"))
        cond = _reconciling(api, "maint-b", "WaitingForExclusionGroup")
        assert "DaemonJob maint-a" in cond["message"] and all(n in cond["message"] for n in names), cond
        controller.restart()  # while b waits: the new controller reads the group from the caches
        api.wait_complete("maint-a", 3)
        api.wait_complete("maint-b", 3)
    assert max(watcher.max_active_per_node.values()) == 1, watcher.summary()
    assert Counter(c.node for c in watcher.created) == Counter({n: 2 for n in names}), watcher.summary()
    _starts_after(api, "maint-b", "maint-a")


def test_an_after_chain_completes_in_order_per_node_across_a_restart(
    api: Cluster, nodes: Nodes, group: str, controller: Any
) -> None:
    nodes(2)
    with JobWatcher(api.kube, api.namespace, "prepare,upgrade,verify") as watcher:
        api.apply(daemonjob("prepare", group, sleep(3), maxParallel=1))
        api.apply(daemonjob("upgrade", group, sleep(1), after=["prepare"]))
        api.apply(daemonjob("verify", group, after=["upgrade"]))
        cond = _reconciling(api, "verify", "WaitingForDependencies")
        assert "DaemonJob upgrade" in cond["message"], cond
        controller.restart()  # mid-way: what succeeded where is read from the Jobs
        for name in ("prepare", "upgrade", "verify"):
            api.wait_complete(name, 2)
    _starts_after(api, "upgrade", "prepare")
    _starts_after(api, "verify", "upgrade")
    assert len(watcher.created) == 6, watcher.summary()  # each node once per DaemonJob


def test_a_missing_dependency_is_stalled_until_it_exists(
    api: Cluster, nodes: Nodes, group: str, controller: Any
) -> None:
    nodes(1)
    api.apply(daemonjob("upgrade", group, after=["prepare"]))
    dj = api.wait_status(
        "upgrade",
        lambda d: (condition(d, "Stalled") or {}).get("reason") == "DependencyNotFound",
        "Stalled DependencyNotFound",
    )
    assert "spec.after" in condition(dj, "Stalled")["message"] and "prepare" in condition(dj, "Stalled")["message"]
    assert api.jobs("upgrade") == []
    api.apply(daemonjob("prepare", group))
    api.wait_complete("upgrade", 1)
    _starts_after(api, "upgrade", "prepare")


def test_a_member_that_fails_lets_the_next_one_start_where_it_waited_without_a_resync(
    api: Cluster, nodes: Nodes, group: str, controller: Any
) -> None:
    """The older member stops at its first failure (maxFailedNodes 0), which only its status says.
    The younger one, on the node the older one waited for (and on no other, so no Job of its own
    wakes it), starts there once that status is written, not at the periodic resync (600 s, far
    past this test's waits)."""
    first, second = nodes(2)
    fails_later = Workload(("sh", "-c", "sleep 8; exit 3"), exit_code=3, duration=8)
    with JobWatcher(api.kube, api.namespace, "older,younger") as watcher:
        api.apply(daemonjob("older", group, fails_later, exclusionGroup="maint", maxParallel=1, maxFailedNodes=0))
        wait_for(lambda: api.job_nodes("older") == [first], 90, "the older member's first Job")
        only_second = {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": [second]}]}
        api.apply(daemonjob("younger", group, exclusionGroup="maint", node_selector=only_second))
        cond = _reconciling(api, "younger", "WaitingForExclusionGroup")
        assert second in cond["message"] and "DaemonJob older" in cond["message"], cond
        dj = api.wait_status("older", lambda d: (condition(d, "Failed") or {}).get("status") == "True", "older Failed")
        assert condition(dj, "Failed")["reason"] == "FailureThresholdExceeded", condition(dj, "Failed")
        api.wait_complete("younger", 1)
    assert api.job_nodes("older") == [first], "the older member started another node after its failure"
    assert max(watcher.max_active_per_node.values()) == 1, watcher.summary()
