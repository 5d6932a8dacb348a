"""spec.nodeParameters: each node's Job gets its node's label and annotation values, and its
name; relabelling a node makes no new revision, and a node joining later gets its own values."""

from __future__ import annotations

from typing import Any

from harness import GROUP_LABEL, OK, Cluster, daemonjob, job_node

ZONE = "topology.kubernetes.io/zone"
RACK = "example.com/rack"
PARAMETERS = [
    {"env": "ZONE", "fromLabel": ZONE},
    {"env": "RACK", "fromAnnotation": RACK, "default": "no-rack"},
]


def env_by_node(api: Cluster, name: str) -> dict[str, list[dict[str, Any]]]:
    return {job_node(j): j["spec"]["template"]["spec"]["containers"][0].get("env") for j in api.jobs(name)}


def expected(node: str, zone: str, rack: str) -> list[dict[str, str]]:
    """The env of a node's container, as the API server returns it (an empty value left out)."""
    env = [("DAEMONJOB_NODE_NAME", node), ("ZONE", zone), ("RACK", rack), ("WHERE", "$(ZONE)/$(RACK)")]
    return [{"name": k, **({"value": v} if v else {})} for k, v in env]


def test_node_jobs_carry_their_nodes_values_and_a_relabel_makes_no_new_revision(
    api: Cluster, nodes: Any, make_nodes: Any, group: str, controller: Any
) -> None:
    # The annotated node joins the group in the write that annotates it: the controller's node
    # cache cannot hold it selected but not yet annotated (a Job with the default, as written).
    (zoned,) = make_nodes(1, labels={ZONE: "zone-a"})
    (bare,) = nodes(1)
    api.patch_node(zoned, {"metadata": {"annotations": {RACK: "r7"}, "labels": {GROUP_LABEL: group}}})
    body = daemonjob(
        "params",
        group,
        OK,
        container={"env": [{"name": "WHERE", "value": "$(ZONE)/$(RACK)"}]},
        nodeParameters=PARAMETERS,
    )
    api.apply(body)
    revision = api.wait_complete("params", 2)["status"]["currentRevision"]
    assert env_by_node(api, "params") == {
        zoned: expected(zoned, "zone-a", "r7"),
        bare: expected(bare, "", "no-rack"),  # no label: empty; no annotation: the default
    }
    first = {j["metadata"]["uid"] for j in api.jobs("params")}

    # A node's label changes: no new revision, nothing re-runs; a node joining gets its values.
    api.patch_node(zoned, {"metadata": {"labels": {ZONE: "zone-b"}}})
    (late,) = nodes(1, labels={ZONE: "zone-c"})
    dj = api.wait_complete("params", 3)
    assert dj["status"]["currentRevision"] == revision
    jobs = api.jobs("params")
    assert {j["metadata"]["uid"] for j in jobs if job_node(j) != late} == first
    assert len(jobs) == 3
    assert env_by_node(api, "params")[late] == expected(late, "zone-c", "no-rack")
    assert env_by_node(api, "params")[zoned] == expected(zoned, "zone-a", "r7")  # as it ran

    # Changing the entries is a change of what runs: a new revision, every node again.
    api.patch("params", {"nodeParameters": [*PARAMETERS[:1], {**PARAMETERS[1], "default": "unknown"}]})
    dj = api.wait_status(
        "params",
        lambda d: d["status"].get("currentRevision") != revision and d["status"].get("succeededNodes") == 3,
        "a new revision on every node",
    )
    current = [j for j in api.jobs("params") if j["metadata"]["labels"]["daemonjob.io/revision"] != revision]
    by_node = {job_node(j): j["spec"]["template"]["spec"]["containers"][0]["env"] for j in current}
    assert by_node[zoned] == expected(zoned, "zone-b", "r7")  # the node's value now
    assert by_node[bare] == expected(bare, "", "unknown")
