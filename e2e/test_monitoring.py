"""The shipped alerts and dashboard against a real Prometheus scraping a real controller.

Prometheus runs as a process beside the cluster (provisioned like the control plane),
scrapes the controller process of this test every second and evaluates the shipped rules
every second, with each alert's `for:` shortened so that it pends, then fires, within the
test. The rules themselves are the shipped ones, unchanged otherwise.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from harness import (
    FAIL,
    GROUP_LABEL,
    OK,
    Cluster,
    ControllerProcess,
    Nodes,
    daemonjob,
    wait_for,
)

from daemonjob.testing.prometheus import JOB, LocalPrometheus, PrometheusError, dashboard_queries

FOR = "8s"  # every alert's `for:` in this test: long enough to see it pending
ROLE_LABEL = "e2e.daemonjob.io/role"


@pytest.fixture
def prometheus(tmp_path: Path, controller_process: ControllerProcess) -> Iterator[LocalPrometheus]:
    prom = LocalPrometheus(
        tmp_path / "prometheus", targets=[f"127.0.0.1:{controller_process.metrics_port}"], for_override=FOR
    )
    prom.start()
    try:
        yield prom
    finally:
        prom.stop()
        assert prom.pid is not None
        with pytest.raises(ProcessLookupError):
            os.kill(prom.pid, 0)


def alert_states(prom: LocalPrometheus, name: str, namespace: str, daemonjob_name: str) -> list[dict]:
    return [
        a
        for a in prom.alerts(name)
        if a["labels"].get("namespace") == namespace and a["labels"].get("name") == daemonjob_name
    ]


def test_failing_node_alert_pends_then_fires_and_every_dashboard_query_has_data(
    api: Cluster, nodes: Nodes, group: str, controller_process: ControllerProcess, prometheus: LocalPrometheus
) -> None:
    nodes(2)
    (bad,) = nodes(1, labels={ROLE_LABEL: "bad"})
    wait_for(lambda: prometheus.targets_up() == 1, 30, "Prometheus to scrape the controller", interval=0.5)

    # A scheduled DaemonJob (its first tick far away) run once now, on all three nodes: runs,
    # a successful run, the next tick. And a DaemonJob whose only node fails.
    api.apply(daemonjob("audit", group, OK, schedule="0 0 1 1 *"))
    api.run_now("audit", "first")
    api.apply(daemonjob("broken", group, FAIL, node_selector={"matchLabels": {GROUP_LABEL: group, ROLE_LABEL: "bad"}}))

    # The alert on the failing node: pending first, then firing once `for:` has passed.
    seen: list[str] = []

    def firing() -> dict | None:
        found = alert_states(prometheus, "DaemonJobNodesFailed", api.namespace, "broken")
        for alert in found:
            if not seen or seen[-1] != alert["state"]:
                seen.append(alert["state"])
        return next((a for a in found if a["state"] == "firing"), None)

    alert = wait_for(
        firing,
        90,
        "DaemonJobNodesFailed to fire for broken",
        interval=0.25,
        describe=lambda: (seen, api.status("broken")),
    )
    assert seen[0] == "pending" and seen[-1] == "firing", seen
    assert alert["labels"]["severity"] == "warning"
    assert f"{api.namespace}/broken" in alert["annotations"]["description"]
    assert alert["annotations"]["runbook_url"] == "https://daemonjob.github.io/daemonjob/runbooks/#daemonjobnodesfailed"
    assert not alert_states(prometheus, "DaemonJobNodesFailed", api.namespace, "audit")
    assert api.status("broken")["failedNodeNames"] == [bad]

    api.wait_status("audit", lambda dj: dj["status"].get("lastSuccessfulTime"), "a successful run")

    # Every query of every panel, variables substituted as Grafana would, evaluates without
    # error and returns data once the rollouts ran.
    queries = dashboard_queries({"job": JOB, "namespace": api.namespace, "daemonjob": ".*"})
    answers: dict[str, list] = {}

    def all_have_data() -> bool:
        for title, expr in queries:
            try:
                answers[expr] = prometheus.query(expr)
            except PrometheusError as exc:  # an error is a failure at once, not something to wait out
                raise AssertionError(f"panel {title!r}: {exc}") from None
        return all(answers.values())

    wait_for(
        all_have_data,
        60,
        "every dashboard query to return data",
        interval=1.0,
        describe=lambda: [(t, e) for t, e in queries if not answers.get(e)],
    )
    by_state = {
        r["metric"]["state"]: float(r["value"][1])
        for r in prometheus.query(f'daemonjob_nodes{{namespace="{api.namespace}", name="audit"}}')
    }
    assert by_state["succeeded"] == 3 and by_state["failed"] == 0, by_state
