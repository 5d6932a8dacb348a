"""Revisions: a template change re-runs every node (or, with rerunPolicy Never, only new ones)."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from harness import (
    EXTERNAL,
    FAIL,
    LABEL_TEMPLATE_HASH,
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


def revisions_by_node(api: Cluster, name: str) -> dict[str, list[str]]:
    return {node: sorted(job_revision(j) for j in jobs) for node, jobs in api.jobs_by_node(name).items()}


def test_template_change_reruns_every_node_and_keeps_history(
    api: Cluster, nodes: Nodes, group: str, controller: Any
) -> None:
    """An annotation edit is a new revision run everywhere; historyLimit bounds the older Jobs kept."""
    names = nodes(3)
    api.apply(daemonjob("rerun", group, OK))
    rev1 = api.wait_complete("rerun", 3)["status"]["currentRevision"]
    first = {job_node(j): j["metadata"]["uid"] for j in api.jobs("rerun")}

    # An annotation under jobTemplate is enough to re-run everywhere.
    api.rerun("rerun", "2")
    dj = api.wait_status(
        "rerun",
        lambda d: d["status"]["currentRevision"] != rev1 and is_true(d, "Complete"),
        "the second revision to complete",
    )
    rev2 = dj["status"]["currentRevision"]
    assert dj["status"]["succeededNodes"] == 3
    assert revisions_by_node(api, "rerun") == {n: sorted([rev1, rev2]) for n in names}
    kept = {job_node(j): j["metadata"]["uid"] for j in api.jobs("rerun") if job_revision(j) == rev1}
    assert kept == first, "the first revision's Jobs are kept as history (historyLimit 1)"

    # A third revision: only the newest earlier revision is kept per node.
    api.rerun("rerun", "3")
    dj = api.wait_status(
        "rerun",
        lambda d: d["status"]["currentRevision"] not in (rev1, rev2) and is_true(d, "Complete"),
        "the third revision to complete",
    )
    rev3 = dj["status"]["currentRevision"]
    wait_for(
        lambda: revisions_by_node(api, "rerun") == {n: sorted([rev2, rev3]) for n in names},
        30,
        "history trimmed to one earlier revision per node",
        describe=lambda: revisions_by_node(api, "rerun"),
    )

    # historyLimit 0 keeps none; the current revision's Jobs stay (they are the record).
    current = {j["metadata"]["uid"] for j in api.jobs("rerun") if job_revision(j) == rev3}
    api.patch("rerun", {"historyLimit": 0})
    wait_for(
        lambda: revisions_by_node(api, "rerun") == {n: [rev3] for n in names},
        30,
        "no earlier revision kept",
        describe=lambda: revisions_by_node(api, "rerun"),
    )
    assert {j["metadata"]["uid"] for j in api.jobs("rerun")} == current
    assert api.wait_complete("rerun", 3)["status"]["currentRevision"] == rev3


def test_complete_turns_false_while_a_new_revision_runs(
    api: Cluster, nodes: Nodes, group: str, controller: Any
) -> None:
    """Complete describes the current revision: a template change makes it False until done."""
    nodes(2)
    body = daemonjob("flip", group, OK)
    api.apply(body)
    rev1 = api.wait_complete("flip", 2)["status"]["currentRevision"]
    api.apply(with_workload(body, sleep(4)))
    dj = api.wait_status("flip", lambda d: d["status"]["currentRevision"] != rev1, "the new revision")
    assert condition(dj, "Complete")["status"] == "False", dj["status"]
    assert is_true(dj, "Reconciling"), dj["status"]
    done = api.wait_complete("flip", 2)
    assert condition(done, "Reconciling")["status"] == "False"


def test_running_old_revision_is_deleted_before_the_new_one_starts(
    api: Cluster, nodes: Nodes, group: str, controller: Any
) -> None:
    """A node never runs two revisions at once: the running old Job goes first."""
    names = nodes(2)
    body = daemonjob("replace", group, sleep(60))
    with JobWatcher(api.kube, api.namespace, "replace") as watcher:
        api.apply(body)
        rev1 = api.wait_status("replace", lambda d: d["status"].get("activeNodes") == 2, "both nodes running")[
            "status"
        ]["currentRevision"]
        old = {j["metadata"]["uid"] for j in api.jobs("replace")}
        assert all(job_active(j) for j in api.jobs("replace"))

        api.apply(with_workload(body, OK))
        dj = api.wait_status(
            "replace",
            lambda d: d["status"]["currentRevision"] != rev1 and is_true(d, "Complete"),
            "the new revision to complete",
        )
    rev2 = dj["status"]["currentRevision"]
    assert watcher.max_active_per_node == {n: 1 for n in names}, watcher.summary()
    assert watcher.uids_per_node_revision().keys() == {(n, r) for n in names for r in (rev1, rev2)}
    assert all(len(uids) == 1 for uids in watcher.uids_per_node_revision().values()), watcher.summary()
    jobs = api.jobs("replace")
    # The interrupted Jobs never finished, so they are not history: they are gone.
    assert not old & {j["metadata"]["uid"] for j in jobs}
    assert sorted((job_node(j), job_revision(j), job_finished(j)) for j in jobs) == [
        (n, rev2, "Complete") for n in names
    ]


def test_rerun_policy_never_runs_new_templates_only_on_new_nodes(
    api: Cluster, nodes: Nodes, group: str, controller: Any
) -> None:
    """With rerunPolicy Never, nodes keep what they ran; a node that joins gets the current template."""
    names = nodes(2)
    body = daemonjob("once", group, OK, rerunPolicy="Never")
    api.apply(body)
    rev1 = api.wait_complete("once", 2)["status"]["currentRevision"]
    before = {j["metadata"]["uid"] for j in api.jobs("once")}

    api.apply(with_workload(body, FAIL))
    dj = api.wait_status("once", lambda d: d["status"]["currentRevision"] != rev1, "the new revision observed")
    rev2 = dj["status"]["currentRevision"]
    holds(
        lambda: {j["metadata"]["uid"] for j in api.jobs("once")} == before,
        4,
        "no node re-runs",
        describe=lambda: [(job_node(j), job_revision(j)) for j in api.jobs("once")],
    )
    assert is_true(api.get("once"), "Complete")

    joined = nodes(1)[0]
    dj = api.wait_status("once", lambda d: d["status"].get("failedNodes") == 1, "the new node to run and fail")
    status = dj["status"]
    assert (status["desiredNodes"], status["succeededNodes"], status["failedNodes"]) == (3, 2, 1)
    assert status["failedNodeNames"] == [joined]
    assert condition(dj, "Complete")["status"] == "False"
    assert revisions_by_node(api, "once") == {names[0]: [rev1], names[1]: [rev1], joined: [rev2]}


def test_template_change_mid_rollout_keeps_the_gate_and_the_order(
    api: Cluster, nodes: Nodes, group: str, controller: Any
) -> None:
    """A new revision during a maxParallel 1 rollout: the interrupted node's Job goes, the new
    revision starts over in node-name order, one node at a time, never two Jobs on one node."""
    names = nodes(3)
    body = daemonjob("midway", group, sleep(5), maxParallel=1)
    with JobWatcher(api.kube, api.namespace, "midway") as watcher:
        api.apply(body)
        rev1 = api.wait_status(
            "midway",
            lambda d: d["status"].get("succeededNodes") == 1 and d["status"].get("activeNodes") == 1,
            "the second node running",
            timeout=60,
        )["status"]["currentRevision"]
        api.apply(with_workload(body, OK))
        dj = api.wait_status(
            "midway",
            lambda d: d["status"]["currentRevision"] != rev1 and is_true(d, "Complete"),
            "the new revision to complete",
        )
    rev2 = dj["status"]["currentRevision"]
    assert watcher.max_active_per_revision == {rev1: 1, rev2: 1}, watcher.summary()
    assert all(count == 1 for count in watcher.max_active_per_node.values()), watcher.summary()
    assert [c.node for c in watcher.created if c.revision == rev2] == sorted(names)
    assert [c.node for c in watcher.created if c.revision == rev1] == sorted(names)[:2]
    assert revisions_by_node(api, "midway") == {names[0]: sorted([rev1, rev2]), names[1]: [rev2], names[2]: [rev2]}


@pytest.mark.skipif(EXTERNAL, reason="needs a controller of its own held to 5 requests/s; the deployed one acts too")
def test_spec_edit_while_a_revision_starts_keeps_that_revision(
    api: Cluster, nodes: Nodes, group: str, spawn_controller: Callable[..., Any]
) -> None:
    """A controller held to 5 requests/s takes seconds to start a revision on 15 nodes; the
    template changes, then 1 s later maxParallel does. The revision was fixed (recorded in the
    status) before its first Job, so the second edit neither re-salts it nor re-runs a node:
    one new revision label, one create per node, no delete (revision 1's Jobs had finished)."""
    names = nodes(15)
    controller = spawn_controller(extra_args=["--kube-api-qps", "5", "--kube-api-burst", "5"])
    body = daemonjob("salted", group, OK)
    api.apply(body)
    rev1 = api.wait_complete("salted", 15, timeout=120)["status"]["currentRevision"]
    created_before = controller.metric("daemonjob_jobs_created_total")
    with JobWatcher(api.kube, api.namespace, "salted") as watcher:
        api.apply(with_workload(body, sleep(2)))
        time.sleep(1)
        api.patch("salted", {"maxParallel": 100})
        started = sum(1 for c in watcher.created if c.revision != rev1)
        assert started < 15, f"the rollout had started every node before the second edit ({started})"
        dj = api.wait_status(
            "salted",
            lambda d: (
                d["status"]["currentRevision"] != rev1
                and is_true(d, "Complete")
                and d["status"].get("succeededNodes") == 15
            ),
            "the new revision to complete",
            timeout=120,
        )
        holds(
            lambda: len(watcher.created) == 30,
            2,
            "no Job beyond one per node of revisions 1 and 2",
            describe=lambda: (Counter(c.revision for c in watcher.created), watcher.summary()),
        )
    rev2 = dj["status"]["currentRevision"]
    new = [c for c in watcher.created if c.revision != rev1]
    assert {c.revision for c in new} == {rev2}, watcher.summary()
    assert Counter(c.node for c in new) == Counter(names), watcher.summary()
    assert watcher.deleted == [], watcher.summary()
    assert controller.metric("daemonjob_jobs_created_total") - created_before == 15
    assert controller.metric("daemonjob_jobs_deleted_total") == 0
    hashes = {j["metadata"]["labels"].get(LABEL_TEMPLATE_HASH) for j in api.jobs("salted") if job_revision(j) == rev2}
    assert hashes == {dj["status"]["templateHash"]}, "each Job names the template it runs"
