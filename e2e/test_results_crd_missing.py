"""The controller installed without the DaemonJobReport CRD (manifests/crd.yaml alone, as one
README line once said), against the real API server: results that cannot be written hold
nothing else up. History stays within historyLimit (the Jobs beyond it go unrecorded after
--history-result-wait, counted in daemonjob_jobs_deleted_unrecorded_total), the DaemonJob says
why its results are missing (ResultsRecorded=False and one Warning Event, reason
ReportsCRDMissing), the controller logs it once, and `kubectl daemonjob results` names the CRD
and the command that installs it. Once the CRD is applied the recorder's own retry records the
results (no restart, no resync) and the condition goes.

The CRD is deleted for the test and installed again whatever happens (the suite's other tests
use it); its deletion removes every DaemonJobReport of the cluster."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from harness import EXTERNAL, Cluster, ControllerProcess, Nodes, is_true, job_revision, wait_for
from test_results import audit, plugin, wait_recorded

from daemonjob.testing.crd import REPORTS_CRD_NAME, delete_reports_crd, install_crd
from daemonjob.testing.prom import metric_value

pytestmark = pytest.mark.skipif(EXTERNAL, reason="starts its own controller with --history-result-wait")

ROOT_CRD = Path(__file__).resolve().parents[1] / "manifests" / "crd.yaml"
REASON = "ReportsCRDMissing"
WAIT = 8  # --history-result-wait, seconds
INSTALL = "kubectl apply -f manifests/reports-crd.yaml"
SAID_ONCE = "the DaemonJobReport CRD (daemonjobreports.daemonjob.io) is not installed"


@pytest.fixture
def only_the_daemonjob_crd(api: Cluster, kubectl_command: list[str]) -> Iterator[None]:
    """The cluster as `kubectl apply -f manifests/crd.yaml` leaves it; both CRDs again after."""
    delete_reports_crd(kubectl_command)
    install_crd(kubectl_command, ROOT_CRD, reports=False)
    try:
        yield
    finally:
        install_crd(kubectl_command, ROOT_CRD)


def condition(dj: dict[str, Any], kind: str) -> dict[str, Any]:
    return next((c for c in (dj.get("status") or {}).get("conditions") or () if c["type"] == kind), {})


def revisions_by_node(api: Cluster, name: str) -> dict[str, list[str]]:
    return {node: sorted(job_revision(j) for j in jobs) for node, jobs in api.jobs_by_node(name).items()}


def test_without_the_reports_crd_history_keeps_its_limit_and_results_come_once_it_is_applied(
    api: Cluster,
    nodes: Nodes,
    group: str,
    only_the_daemonjob_crd: None,
    spawn_controller: Callable[..., ControllerProcess],
    kubectl_command: list[str],
    admin_kubeconfig: Path,
) -> None:
    controller = spawn_controller(extra_args=["--history-result-wait", str(WAIT)])
    names = nodes(2)
    facts = {n: f"fact of {n}" for n in names}
    api.apply(audit("audit", group, facts, historyLimit=1))
    revisions = [api.wait_complete("audit", 2)["status"]["currentRevision"]]
    for rerun in ("2", "3", "4"):
        api.rerun("audit", rerun)
        dj = api.wait_status(
            "audit",
            lambda d: d["status"]["currentRevision"] not in revisions and is_true(d, "Complete"),
            f"revision {rerun} complete",
        )
        revisions.append(dj["status"]["currentRevision"])

    # History within its limit: the current revision and one earlier one per node, although
    # no result could be recorded (two earlier revisions' Jobs went unrecorded). Which earlier
    # one is kept is not asserted: revisions that finish within the same second (these do)
    # tie on the Jobs' one-second timestamps.
    def within_limit() -> bool:
        kept = revisions_by_node(api, "audit")
        return set(kept) == set(names) and all(len(r) == 2 and revisions[-1] in r for r in kept.values())

    wait_for(
        within_limit,
        3 * WAIT + 30,
        "history trimmed to the current and one earlier revision per node",
        describe=lambda: revisions_by_node(api, "audit"),
    )
    wait_for(
        lambda: metric_value(controller.metrics(), "daemonjob_jobs_deleted_unrecorded_total") == 4.0,
        30,
        "4 Jobs counted as deleted unrecorded",
        describe=lambda: metric_value(controller.metrics(), "daemonjob_jobs_deleted_unrecorded_total"),
    )

    # Why results are missing: the DaemonJob's condition and status.results, one Event, one log line.
    dj = api.get("audit")
    recorded = condition(dj, "ResultsRecorded")
    assert (recorded.get("status"), recorded.get("reason")) == ("False", REASON), dj["status"]
    assert REPORTS_CRD_NAME in recorded["message"] and INSTALL in recorded["message"]
    assert INSTALL in dj["status"]["results"]["error"]
    assert not is_true(dj, "Stalled") and not is_true(dj, "Reconciling")  # kstatus: Current
    event = api.wait_event("audit", lambda e: e.get("reason") == REASON, REASON)
    assert event["type"] == "Warning" and INSTALL in event["message"]
    assert sum(int(e.get("count") or 1) for e in api.events("audit") if e.get("reason") == REASON) == 1
    assert controller.log_text().count(SAID_ONCE) == 1
    shown = plugin(admin_kubeconfig, api.namespace, "results", "audit")
    assert shown.returncode == 1 and REPORTS_CRD_NAME in shown.stderr and INSTALL in shown.stderr, shown.stderr

    # The CRD applied: the Jobs the cluster still holds are recorded, the condition goes.
    install_crd(kubectl_command, ROOT_CRD)
    got = wait_recorded(api, "audit", 2, revision=revisions[-1])
    assert {n: r["message"] for n, r in got.items()} == facts
    wait_for(
        lambda: (
            not condition(d := api.get("audit"), "ResultsRecorded")
            and (d["status"].get("results") or {}).get("recorded") == 2
            and "error" not in d["status"]["results"]
        ),
        60,
        "ResultsRecorded gone and status.results filled",
        describe=lambda: api.status("audit"),
    )
    assert "results are recorded again" in controller.log_text()
    shown = plugin(admin_kubeconfig, api.namespace, "results", "audit")
    assert shown.returncode == 0 and all(n in shown.stdout for n in names), shown.stderr
