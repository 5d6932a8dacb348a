"""Re-running a node: its Job deleted by hand (or by `kubectl daemonjob rerun`) is replaced
under a name no earlier Job had, at once, and the replacement gets its pod.

The Job controller keys its pod expectations by namespace/name: a Job re-created under the
name of one deleted while its pod was being created waited 5 minutes for a pod, or for good
(kubernetes/kubernetes#131917, #142142). Against the real API server and Job controller.
"""

from __future__ import annotations

from typing import Any

from harness import (
    LABEL_NAME,
    OK,
    Cluster,
    ControllerProcess,
    Nodes,
    daemonjob,
    holds,
    job_finished,
    job_node,
    sleep,
    wait_for,
)

LABEL_ATTEMPT = "daemonjob.io/attempt"


def successor(api: Cluster, name: str, node: str, gone: set[str]) -> dict[str, Any] | None:
    """The node's only Job once it is none of the `gone` uids."""
    jobs = api.jobs_by_node(name).get(node, [])
    return jobs[0] if len(jobs) == 1 and jobs[0]["metadata"]["uid"] not in gone else None


def test_a_job_deleted_while_its_pod_starts_is_replaced_under_a_new_name_and_gets_its_pod(
    api: Cluster, nodes: Nodes, group: str, controller: Any
) -> None:
    (node,) = nodes(1)
    api.apply(daemonjob("again", group, sleep(2)))
    first = wait_for(lambda: next(iter(api.jobs("again")), None), 60, "the node's Job")
    api.delete_job(first["metadata"]["name"])  # at once: its pod create may be in flight

    fresh = wait_for(lambda: successor(api, "again", node, {first["metadata"]["uid"]}), 30, "the replacement")
    assert fresh["metadata"]["name"] != first["metadata"]["name"], "a deleted Job's name is never reused"
    assert fresh["metadata"]["labels"][LABEL_ATTEMPT] == "1"
    assert fresh["metadata"]["labels"][LABEL_NAME] == "again"
    wait_for(lambda: api.pods(fresh["metadata"]["name"]), 30, "the Job controller to create its pod")
    dj = api.wait_complete("again", 1, timeout=60)
    assert "nodeAttempts" not in dj["status"], "recorded until its Job is seen, which carries the attempt"
    assert job_finished(api.jobs("again")[0]) == "Complete"


def test_a_restart_after_a_rerun_keeps_one_job_per_node_and_the_next_rerun_counts_on(
    api: Cluster, nodes: Nodes, group: str, controller_process: ControllerProcess
) -> None:
    names = nodes(2)
    api.apply(daemonjob("kept", group, OK))
    api.wait_complete("kept", 2)
    first = api.jobs_by_node("kept")[names[0]][0]
    api.delete_job(first["metadata"]["name"])
    second = wait_for(lambda: successor(api, "kept", names[0], {first["metadata"]["uid"]}), 30, "the replacement")
    api.wait_complete("kept", 2)
    before = {j["metadata"]["uid"] for j in api.jobs("kept")}

    controller_process.restart()  # forgets the delete it saw: the status and the Jobs carry the attempt
    holds(
        lambda: {j["metadata"]["uid"] for j in api.jobs("kept")} == before,
        4,
        "no Job created or deleted after the restart",
        describe=lambda: [(job_node(j), j["metadata"]["name"]) for j in api.jobs("kept")],
    )

    api.delete_job(second["metadata"]["name"])
    third = wait_for(
        lambda: successor(api, "kept", names[0], {first["metadata"]["uid"], second["metadata"]["uid"]}),
        30,
        "the second replacement",
    )
    assert third["metadata"]["labels"][LABEL_ATTEMPT] == "2"
    assert len({first["metadata"]["name"], second["metadata"]["name"], third["metadata"]["name"]}) == 3
    api.wait_complete("kept", 2)
    assert len(api.jobs("kept")) == 2
