"""Which nodes run a DaemonJob: it follows nodes joining, leaving, and changing eligibility."""

from __future__ import annotations

from typing import Any

from harness import (
    GROUP_LABEL,
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

from daemonjob.testing.sim.kubelet import SimKubelet

ZONE = "e2e.daemonjob.io/zone"
SKIP = "e2e.daemonjob.io/skip"
UNREACHABLE = "node.kubernetes.io/unreachable"


def test_nodes_joining_get_a_job_and_nodes_leaving_lose_theirs(
    api: Cluster, nodes: Nodes, group: str, kubelet: SimKubelet, controller: Any
) -> None:
    """A joining node runs the current revision (Complete turns False meanwhile); a deleted node's Jobs go."""
    names = nodes(2)
    api.apply(daemonjob("follow", group, sleep(3)))
    revision = api.wait_complete("follow", 2)["status"]["currentRevision"]

    joined = nodes(1)[0]
    dj = api.wait_status("follow", lambda d: d["status"].get("desiredNodes") == 3, "the new node counted")
    assert condition(dj, "Complete")["status"] == "False", dj["status"]
    api.wait_complete("follow", 3)
    jobs = api.jobs_by_node("follow")
    assert [job_revision(j) for j in jobs[joined]] == [revision]

    kubelet.delete_node(names[0])
    wait_for(
        lambda: names[0] not in api.jobs_by_node("follow"),
        60,
        f"the Jobs of deleted node {names[0]} to go",
        describe=lambda: api.job_nodes("follow"),
    )
    dj = api.wait_complete("follow", 2)
    assert dj["status"]["succeededNodes"] == 2
    assert api.job_nodes("follow") == sorted([names[1], joined])


def test_a_node_joining_a_daemonjob_with_expressions_and_tolerations_gets_its_job(
    api: Cluster, nodes: Nodes, group: str, controller: Any
) -> None:
    """The common "all but these nodes" form (matchExpressions) with a toleration, as in the examples."""
    nodes(1)
    selector = {
        "matchExpressions": [
            {"key": GROUP_LABEL, "operator": "In", "values": [group]},
            {"key": SKIP, "operator": "DoesNotExist"},
        ]
    }
    tolerations = [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}]
    api.apply(daemonjob("expressions", group, OK, node_selector=selector, pod_spec={"tolerations": tolerations}))
    api.wait_complete("expressions", 1)

    [joined] = nodes(1, taints=[{"key": "dedicated", "value": "e2e", "effect": "NoSchedule"}])
    api.wait_complete("expressions", 2, timeout=60)
    assert joined in api.job_nodes("expressions")


def test_only_eligible_nodes_run(api: Cluster, nodes: Nodes, group: str, controller: Any) -> None:
    """DaemonSet rules: selectors, template nodeSelector and affinity, taints, tolerations, cordons."""
    [zone_a] = nodes(1, labels={ZONE: "a"})
    [zone_b] = nodes(1, labels={ZONE: "b"})
    [cordoned] = nodes(1, labels={ZONE: "a"}, unschedulable=True)
    [no_schedule] = nodes(1, labels={ZONE: "a"}, taints=[{"key": "dedicated", "value": "e2e", "effect": "NoSchedule"}])
    [no_execute] = nodes(1, labels={ZONE: "a"}, taints=[{"key": "dedicated", "value": "e2e", "effect": "NoExecute"}])
    [unselected] = nodes(1, labels={ZONE: "a", SKIP: "true"})
    selector = {
        "matchExpressions": [
            {"key": GROUP_LABEL, "operator": "In", "values": [group]},
            {"key": SKIP, "operator": "DoesNotExist"},
        ]
    }
    not_zone_a = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": ZONE, "operator": "NotIn", "values": ["a"]}]}]
            }
        }
    }
    cases: dict[str, tuple[dict[str, Any], set[str]]] = {
        "plain": ({}, {zone_a, zone_b}),
        "tolerates-dedicated": (
            {"tolerations": [{"key": "dedicated", "operator": "Equal", "value": "e2e", "effect": "NoSchedule"}]},
            {zone_a, zone_b, no_schedule},
        ),
        "tolerates-cordon": (
            {
                "tolerations": [
                    {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}
                ]
            },
            {zone_a, zone_b, cordoned},
        ),
        "tolerates-everything": (
            {"tolerations": [{"operator": "Exists"}]},
            {zone_a, zone_b, cordoned, no_schedule, no_execute},
        ),
        "zone-a": ({"nodeSelector": {ZONE: "a"}}, {zone_a}),
        "not-zone-a": ({"affinity": not_zone_a}, {zone_b}),
    }
    for name, (pod_spec, _) in cases.items():
        api.apply(daemonjob(name, group, OK, pod_spec=pod_spec, node_selector=selector))

    for name, (_, expected) in cases.items():
        dj = api.wait_complete(name, len(expected))
        assert dj["status"]["succeededNodes"] == len(expected)
        assert set(api.job_nodes(name)) == expected, name
        assert unselected not in api.job_nodes(name)
        for job in api.jobs(name):
            assert job_finished(job) == "Complete", (name, job_node(job))

    # Relabelled to match the selector, the unselected node joins; the others keep their Jobs.
    before = {j["metadata"]["uid"] for j in api.jobs("plain")}
    api.patch_node(unselected, {"metadata": {"labels": {SKIP: None}}})
    api.wait_complete("plain", 3, timeout=60)
    assert set(api.job_nodes("plain")) == {zone_a, zone_b, unselected}
    assert before < {j["metadata"]["uid"] for j in api.jobs("plain")}


def test_node_turning_ineligible_keeps_its_running_job(api: Cluster, nodes: Nodes, group: str, controller: Any) -> None:
    """A node cordoned mid-run finishes its Job, is not replaced on a template change, and gets nothing new."""
    names = nodes(2)
    body = daemonjob("cordon", group, sleep(8))
    api.apply(body)
    rev1 = api.wait_status("cordon", lambda d: d["status"].get("activeNodes") == 2, "both nodes running")["status"][
        "currentRevision"
    ]
    [running] = api.jobs_by_node("cordon")[names[0]]

    api.patch_node(names[0], {"spec": {"unschedulable": True}})
    # Its running Job keeps the node counted (it holds a slot) and the status names it.
    api.wait_status(
        "cordon", lambda d: "cordoned" in condition(d, "Reconciling").get("message", ""), "the cordoned node named"
    )
    # A new revision replaces the eligible node's running Job, not the cordoned node's.
    api.apply(with_workload(body, OK))
    dj = api.wait_status(
        "cordon",
        lambda d: d["status"]["currentRevision"] != rev1 and is_true(d, "Complete"),
        "the new revision on the eligible node",
    )
    rev2 = dj["status"]["currentRevision"]
    assert dj["status"]["desiredNodes"] == 1
    mine = api.jobs_by_node("cordon")[names[0]]
    assert [j["metadata"]["uid"] for j in mine] == [running["metadata"]["uid"]]
    assert not mine[0]["metadata"].get("deletionTimestamp")

    def finished() -> str | None:
        jobs = api.jobs_by_node("cordon")[names[0]]
        assert [j["metadata"]["uid"] for j in jobs] == [running["metadata"]["uid"]], "the running Job was kept"
        return job_finished(jobs[0])

    assert wait_for(finished, 60, "the cordoned node's Job to run to completion") == "Complete"
    holds(
        lambda: [job_revision(j) for j in api.jobs_by_node("cordon")[names[0]]] == [rev1],
        3,
        "the cordoned node gets no new Job",
    )
    eligible = api.jobs_by_node("cordon")[names[1]]
    assert [job_revision(j) for j in eligible if not job_finished(j) or job_revision(j) == rev2] == [rev2]
    assert all(job_finished(j) for j in eligible), "its old Job was replaced or had finished; the new one ran"


def test_not_ready_node_gets_no_job_until_it_recovers(
    api: Cluster, nodes: Nodes, group: str, kubelet: SimKubelet, controller: Any
) -> None:
    """No default tolerations: a Job is not started on a NotReady (unreachable) node."""
    names = nodes(3)
    kubelet.stop_heartbeat(names[0])

    def unreachable() -> bool:
        return any(t.get("key") == UNREACHABLE for t in api.node(names[0]).get("spec", {}).get("taints") or [])

    wait_for(unreachable, 90, f"{names[0]} to be marked unreachable")
    with JobWatcher(api.kube, api.namespace, "ready-only") as watcher:
        api.apply(daemonjob("ready-only", group, OK))
        dj = api.wait_complete("ready-only", 2)
        assert dj["status"]["succeededNodes"] == 2
        holds(lambda: names[0] not in api.job_nodes("ready-only"), 3, "no Job on the NotReady node")

        kubelet.resume_heartbeat(names[0])
        api.wait_complete("ready-only", 3, timeout=120)
    assert api.job_nodes("ready-only") == sorted(names)
    assert watcher.creation_order()[-1] == names[0], "the recovered node ran last"
    assert all(not job_active(j) for j in api.jobs("ready-only"))
