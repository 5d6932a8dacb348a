"""Rollout control: maxParallel bounds the nodes running at once, suspend starts nothing new."""

from __future__ import annotations

from typing import Any

from harness import (
    OK,
    Cluster,
    JobWatcher,
    Nodes,
    condition,
    daemonjob,
    holds,
    is_true,
    job_active,
    job_finished,
    job_node,
    job_revision,
    sleep,
    wait_for,
    with_workload,
)


def test_max_parallel_one_runs_nodes_one_at_a_time_in_name_order(
    api: Cluster, nodes: Nodes, group: str, controller: Any
) -> None:
    names = nodes(3)
    with JobWatcher(api.kube, api.namespace, "serial") as watcher:
        api.apply(daemonjob("serial", group, sleep(2), maxParallel=1))
        api.wait_complete("serial", 3)
    assert watcher.max_active == 1, watcher.summary()
    assert watcher.creation_order() == sorted(names)


def test_max_parallel_percentage_rounds_up_and_is_never_exceeded(
    api: Cluster, nodes: Nodes, group: str, controller: Any
) -> None:
    """ "50%" of 3 nodes is 2 at once (rounded up, as a DaemonSet's maxUnavailable)."""
    names = nodes(3)
    with JobWatcher(api.kube, api.namespace, "half") as watcher:
        api.apply(daemonjob("half", group, sleep(3), maxParallel="50%"))
        busy = api.wait_status("half", lambda d: d["status"].get("activeNodes") == 2, "two nodes running")
        assert busy["status"]["pendingNodes"] == 1
        api.wait_complete("half", 3)
    assert watcher.max_active == 2, watcher.summary()
    order = watcher.creation_order()
    assert sorted(order) == sorted(names) and len(order) == 3
    assert set(order[:2]) == set(names[:2]) and order[2] == names[2], "started in node-name order"


def test_suspend_starts_nothing_and_running_jobs_finish(
    api: Cluster, nodes: Nodes, group: str, controller: Any
) -> None:
    """Suspended, nothing starts, not even a new revision; a running Job finishes rather than being replaced."""
    names = nodes(3)
    body = daemonjob("paused", group, sleep(4), maxParallel=1, suspend=True)
    api.apply(body)
    dj = api.wait_status("paused", lambda d: d["status"].get("desiredNodes") == 3, "the suspended DaemonJob seen")
    assert (dj["status"]["pendingNodes"], dj["status"]["activeNodes"]) == (3, 0)
    assert condition(dj, "Complete")["status"] == "False"
    holds(lambda: not api.jobs("paused"), 3, "no Job while suspended")

    # Unsuspended, the first node starts...
    api.patch("paused", {"suspend": False})
    wait_for(lambda: api.job_nodes("paused") == [names[0]], 30, "the first node to start")
    [first] = api.jobs("paused")
    rev1 = job_revision(first)
    # ...suspended again with a new template while it runs: it still runs to completion...
    suspended = with_workload(body, OK)
    suspended["spec"]["suspend"] = True
    api.apply(suspended)
    assert job_active(api.jobs("paused")[0])
    wait_for(
        lambda: [job_finished(j) for j in api.jobs("paused")] == ["Complete"],
        30,
        "the running Job to finish while suspended",
        describe=lambda: [
            (job_node(j), job_finished(j), j["metadata"].get("deletionTimestamp")) for j in api.jobs("paused")
        ],
    )
    assert [j["metadata"]["uid"] for j in api.jobs("paused")] == [first["metadata"]["uid"]]
    # ...and nothing new starts.
    holds(
        lambda: api.job_nodes("paused") == [names[0]],
        3,
        "no new Job while suspended",
        describe=lambda: api.job_nodes("paused"),
    )

    api.patch("paused", {"suspend": False, "maxParallel": None})
    dj = api.wait_complete("paused", 3)
    rev2 = dj["status"]["currentRevision"]
    assert rev2 != rev1
    assert {n: sorted(job_revision(j) for j in jobs) for n, jobs in api.jobs_by_node("paused").items()} == {
        names[0]: sorted([rev1, rev2]),
        names[1]: [rev2],
        names[2]: [rev2],
    }


def test_unlimited_parallelism_runs_all_nodes_at_once(api: Cluster, nodes: Nodes, group: str, controller: Any) -> None:
    """Without maxParallel every eligible node starts at once."""
    nodes(4)
    with JobWatcher(api.kube, api.namespace, "wide") as watcher:
        api.apply(daemonjob("wide", group, sleep(4)))
        api.wait_status("wide", lambda d: d["status"].get("activeNodes") == 4, "all four running")
        api.wait_complete("wide", 4)
    assert watcher.max_active == 4
    assert all(v == 1 for v in watcher.max_active_per_node.values())


def test_max_parallel_counts_nodes_running_an_older_revision(
    api: Cluster, nodes: Nodes, group: str, controller: Any
) -> None:
    """maxParallel 2 over 6 nodes, the template changed while two nodes run revision 1 and two
    finished it: the two running keep their slots (their Jobs are replaced in them), so no more
    than 2 nodes ever run a Job of the DaemonJob, whatever its revision ("at most N nodes
    disrupted at a time"), and every node then runs the new revision once."""
    names = nodes(6)
    body = daemonjob("gated", group, sleep(6), maxParallel=2)
    with JobWatcher(api.kube, api.namespace, "gated") as watcher:
        api.apply(body)
        rev1 = api.wait_status(
            "gated",
            lambda d: d["status"].get("succeededNodes") == 2 and d["status"].get("activeNodes") == 2,
            "two nodes done and two running",
            timeout=90,
        )["status"]["currentRevision"]
        running = sorted(job_node(j) for j in api.jobs("gated") if job_active(j))
        api.rerun("gated", "2")
        assert len(running) == 2, f"two nodes ran revision 1 when the template changed: {watcher.summary()}"
        dj = api.wait_status(
            "gated",
            lambda d: d["status"]["currentRevision"] != rev1 and is_true(d, "Complete"),
            "the new revision to complete on every node",
            timeout=120,
        )
    rev2 = dj["status"]["currentRevision"]
    assert watcher.max_active_nodes == 2, watcher.summary()
    assert watcher.max_active == 2, watcher.summary()
    assert dj["status"]["succeededNodes"] == 6
    per_node_rev2 = {n: uids for (n, r), uids in watcher.uids_per_node_revision().items() if r == rev2}
    assert per_node_rev2.keys() == set(names) and all(len(u) == 1 for u in per_node_rev2.values()), watcher.summary()
    assert {job_node(j) for j in api.jobs("gated") if job_revision(j) == rev2 and job_finished(j) == "Complete"} == set(
        names
    )
