"""Results that cannot be recorded, against the real API server: with the DaemonJobReport CRD
deleted, a DaemonJob with spec.results.deleteSucceededJobs starts nothing and says why
(Reconciling and Stalled, reason ReportsCRDMissing, the API server's 404, one Warning Event),
and one without the field completes its rollout with status.results saying why it is empty.
Once the CRD is installed again both go on without a restart: the recorder's own retry reads
the reports, wakes the DaemonJobs and the conditions clear.

The CRD is deleted for the test and installed again whatever happens (the suite's other
tests use it); its deletion removes every DaemonJobReport of the cluster."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from harness import Cluster, Nodes, wait_for
from test_results import audit, wait_recorded

from daemonjob.testing.crd import REPORTS_CRD_NAME, install_crd

ROOT_CRD = Path(__file__).resolve().parents[1] / "manifests" / "crd.yaml"
LET_GO = {"results": {"deleteSucceededJobs": True}}
REASON = "ReportsCRDMissing"  # the CRD deleted: the resource is not served


@pytest.fixture
def reports_crd_deleted(api: Cluster, kubectl_command: list[str]) -> Iterator[None]:
    """The DaemonJobReport CRD deleted (gone from the API server) for the test, installed again after."""
    out = subprocess.run(
        [*kubectl_command, "delete", "crd", REPORTS_CRD_NAME, "--wait=true", "--timeout=120s"],
        capture_output=True,
        text=True,
        check=False,
        timeout=180,
    )
    assert out.returncode == 0, out.stderr
    try:
        yield
    finally:
        install_crd(kubectl_command, ROOT_CRD)


def condition(dj: dict[str, Any], kind: str) -> dict[str, Any]:
    return next((c for c in (dj.get("status") or {}).get("conditions") or () if c["type"] == kind), {})


def unreadable_events(api: Cluster, name: str) -> int:
    return sum(int(e.get("count") or 1) for e in api.events(name) if e.get("reason") == REASON)


def test_reports_unreadable_are_said_and_the_rollouts_go_on_once_the_crd_is_back(
    api: Cluster, nodes: Nodes, group: str, reports_crd_deleted: None, controller: Any, kubectl_command: list[str]
) -> None:
    names = nodes(2)
    facts = {n: f"fact of {n}" for n in names}
    api.apply(audit("letgo", group, facts, **LET_GO))
    api.apply(audit("plain", group, facts))

    def said(dj: dict[str, Any]) -> bool:
        reconciling, stalled = condition(dj, "Reconciling"), condition(dj, "Stalled")
        return all(c.get("status") == "True" and c.get("reason") == REASON for c in (reconciling, stalled))

    dj = wait_for(lambda: d if said(d := api.get("letgo")) else None, 60, "letgo: Stalled, ReportsCRDMissing")
    message = condition(dj, "Stalled")["message"]
    assert "404" in message and REPORTS_CRD_NAME in message, message
    event = api.wait_event("letgo", lambda e: e.get("reason") == REASON, REASON)
    assert event["type"] == "Warning" and "404" in event["message"]
    assert api.jobs("letgo") == []  # nothing decided without the records

    # Without the field the Jobs are the record: the rollout completes, status.results says why.
    status = api.wait_complete("plain", 2)["status"]
    results = wait_for(
        lambda: r if "error" in (r := api.status("plain").get("results") or {}) else None,
        60,
        "plain: status.results.error",
    )
    assert results["summary"].startswith("not recorded: 404") and REPORTS_CRD_NAME in results["error"]
    assert condition(api.get("plain"), "Stalled").get("status") != "True" and status["succeededNodes"] == 2
    api.wait_event("plain", lambda e: e.get("reason") == REASON, REASON)
    assert len(api.jobs("plain")) == 2

    install_crd(kubectl_command, ROOT_CRD)
    api.wait_complete("letgo", 2, timeout=120)
    wait_recorded(api, "letgo", 2)
    wait_for(lambda: not api.jobs("letgo"), 120, "letgo's succeeded Jobs deleted once recorded")
    dj = api.get("letgo")
    assert condition(dj, "Stalled").get("status") == "False" and condition(dj, "Reconciling").get("reason") != REASON
    results = wait_for(
        lambda: (
            r if (r := api.status("plain").get("results") or {}).get("recorded") == 2 and "error" not in r else None
        ),
        60,
        "plain: its results recorded once the CRD is back, the error gone",
        describe=lambda: api.status("plain").get("results"),
    )
    assert results["outcomes"] == 2
    assert {r["message"] for r in wait_recorded(api, "plain", 2).values()} == set(facts.values())
    assert unreadable_events(api, "letgo") == 1 and unreadable_events(api, "plain") == 1
