"""Bad input the CRD schema cannot catch: Stalled with a clear message and a Warning Event,
no Jobs, the other DaemonJobs unaffected, and a fixed spec clears it."""

from __future__ import annotations

from typing import Any

from harness import (
    GROUP_LABEL,
    OK,
    Cluster,
    Nodes,
    condition,
    daemonjob,
    holds,
    is_true,
)


def assert_stalled(api: Cluster, name: str, *phrases: str) -> dict[str, Any]:
    dj = api.wait_status(name, lambda d: is_true(d, "Stalled"), "Stalled=True")
    stalled = condition(dj, "Stalled")
    for phrase in phrases:
        assert phrase in stalled["message"], stalled
    assert condition(dj, "Complete")["status"] == "False"
    api.wait_event(
        name,
        lambda e: e["type"] == "Warning" and all(p in e["message"] for p in phrases),
        f"a Warning saying {phrases}",
    )
    holds(lambda: not api.jobs(name), 3, f"{name} creates no Job")
    return dj


def test_ttl_seconds_after_finished_is_refused(api: Cluster, nodes: Nodes, group: str, controller: Any) -> None:
    """A TTL would delete the record of what ran where, so the controller refuses it."""
    nodes(2)
    api.apply(daemonjob("ttl", group, OK, job_spec={"ttlSecondsAfterFinished": 60}))
    dj = assert_stalled(api, "ttl", "ttlSecondsAfterFinished")
    assert dj["status"]["desiredNodes"] == 2

    api.patch("ttl", {"jobTemplate": {"spec": {"ttlSecondsAfterFinished": None}}})
    dj = api.wait_complete("ttl", 2)
    assert condition(dj, "Stalled")["status"] == "False"
    assert all("ttlSecondsAfterFinished" not in j["spec"] for j in api.jobs("ttl"))


def test_invalid_selector_is_reported(api: Cluster, nodes: Nodes, group: str, controller: Any) -> None:
    """A label value the API server would reject, which the schema lets through."""
    nodes(2)
    api.apply(daemonjob("bad-selector", group, OK, node_selector={"matchLabels": {GROUP_LABEL: "no spaces, please"}}))
    assert_stalled(api, "bad-selector", "spec.nodeSelector", "no spaces, please")

    api.patch("bad-selector", {"nodeSelector": {"matchLabels": {GROUP_LABEL: group}}})
    dj = api.wait_complete("bad-selector", 2)
    assert condition(dj, "Stalled")["status"] == "False"
    assert controller.alive()


def test_template_the_api_server_rejects_stalls_only_its_daemonjob(
    api: Cluster, nodes: Nodes, group: str, controller: Any
) -> None:
    """The API server's own message surfaces; another DaemonJob in the namespace still runs."""
    nodes(2)
    api.apply(daemonjob("rejected", group, OK, container={"name": "Bad_Name"}))
    api.apply(daemonjob("fine", group, OK))

    assert_stalled(api, "rejected", "spec.template.spec.containers[0].name", "Bad_Name")
    dj = api.wait_complete("fine", 2)
    assert condition(dj, "Stalled")["status"] == "False"
    assert controller.alive()

    api.apply(daemonjob("rejected", group, OK))
    dj = api.wait_complete("rejected", 2)
    assert condition(dj, "Stalled")["status"] == "False"
    assert len(api.jobs("rejected")) == 2
