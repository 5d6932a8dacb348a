"""Results that cannot be read or recorded (the DaemonJobReport CRD missing, RBAC, the API
server failing): the status says why, the recorder tries again on its own and wakes the
DaemonJob when that changes; with deleteSucceededJobs nothing is decided meanwhile, without
it the rollout goes on."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pytest

from daemonjob import defaults
from daemonjob.domain.results.unreadable import (
    REPORTS_CRD_MISSING,
    RESULTS_RECORDED,
    RESULTS_UNREADABLE,
    ResultsUnread,
    with_results_unread,
    with_unread_conditions,
)
from daemonjob.domain.rollout.condition import RECONCILING, STALLED
from daemonjob.machinery.client.apierror import ApiError
from daemonjob.testing.doubles.actbed import ActBed
from daemonjob.testing.doubles.builders import daemonjob

LET_GO = {"results": {"deleteSucceededJobs": True}}
NOW = "2026-01-01T00:00:00Z"


class Store:
    """Reports that cannot be listed while `refusal` is set; written ones kept otherwise."""

    def __init__(self) -> None:
        self.refusal: ApiError | None = ApiError(404, "NotFound", "the server could not find the requested resource")
        self.reports: list[dict[str, Any]] = []

    def may_write(self) -> bool:
        return True

    def list_reports(self, namespace: str, daemonjob: str) -> list[Mapping[str, Any]]:
        if self.refusal is not None:
            raise self.refusal
        return list(self.reports)

    def list_pods(self, namespace: str, job_uids: Sequence[str]) -> list[Mapping[str, Any]]:
        return []

    def create_report(self, namespace: str, body: Mapping[str, Any]) -> Mapping[str, Any]:
        made = {**body, "metadata": {**body["metadata"], "creationTimestamp": NOW}}
        self.reports.append(made)
        return made

    def append(self, namespace: str, name: str, patch: Sequence[Mapping[str, Any]]) -> None:
        raise AssertionError("one chunk is enough here")

    def delete_report(self, namespace: str, name: str) -> None:
        pass


@pytest.fixture
def store() -> Store:
    return Store()


@pytest.fixture
def bed(store: Store) -> Iterator[ActBed]:
    bed = ActBed.start(result_store=store)
    yield bed
    bed.stop()


def conditions(status: Mapping[str, Any]) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in status.get("conditions") or ()}


def recorder_round(bed: ActBed) -> float | None:
    """One round of the recorder's thread now; how long until it wants the next."""
    rec = bed.ctl.results
    assert rec is not None
    due, wait = rec._due(bed.clock.now())
    rec.flush_due(due)
    return wait if not due else 0.0


def woken(bed: ActBed) -> bool:
    bed.settle()  # a pass that came due on the clock's step counts for this round, not the next
    woke = len(bed.ctl.queue) > 0
    bed.drain()
    return woke


def test_a_let_go_daemonjob_whose_reports_cannot_be_read_says_so_and_goes_on_once_they_can(
    bed: ActBed, store: Store
) -> None:
    bed.add_nodes(2)
    bed.add_dj(daemonjob(**LET_GO))
    assert bed.ctl.reconcile(bed.key) is None  # waits for the reports: a read is asked for
    assert bed.statuses() == [] and bed.created() == []
    bed.drain()
    recorder_round(bed)  # the list answers 404: the CRD is not installed
    assert woken(bed)  # the DaemonJob's pass is told
    assert bed.ctl.reconcile(bed.key) is None and bed.created() == []
    status = bed.last_status()
    assert conditions(status)[RECONCILING] == ("True", REPORTS_CRD_MISSING)
    assert conditions(status)[STALLED] == ("True", REPORTS_CRD_MISSING)
    assert conditions(status)[RESULTS_RECORDED] == ("False", REPORTS_CRD_MISSING)
    (message,) = bed.events(REPORTS_CRD_MISSING)
    assert "404" in message and "daemonjobreports.daemonjob.io CRD" in message
    assert "kubectl apply -f manifests/reports-crd.yaml" in message
    bed.sync()
    assert bed.ctl.reconcile(bed.key) is None
    assert len(bed.events(REPORTS_CRD_MISSING)) == 1  # said once
    # Tried again after RESULT_RETRY_DELAY, with nothing else to wake the recorder.
    assert recorder_round(bed) == pytest.approx(defaults.RESULT_RETRY_DELAY)
    assert not woken(bed)  # the same answer again: nothing new to say
    store.refusal = None  # the CRD is installed
    bed.clock.step(defaults.RESULT_RETRY_DELAY)
    recorder_round(bed)
    assert woken(bed)
    assert bed.ctl.results is not None and bed.ctl.results.unread(f"ops/{bed.dj()['metadata']['uid']}") is None
    assert bed.ctl.reconcile(bed.key) is not None
    assert len(bed.created()) == 2
    assert conditions(bed.last_status()).get(STALLED, ("False", ""))[0] == "False"
    assert conditions(bed.last_status())[RECONCILING][1] != REPORTS_CRD_MISSING
    bed.sync()
    assert RESULTS_RECORDED not in conditions(bed.dj()["status"])  # said only while they cannot be


def test_a_403_stalls_too_and_a_server_error_only_reconciles() -> None:
    old = {"conditions": [{"type": STALLED, "status": "False", "reason": "Progressing", "message": ""}]}
    status, events = with_unread_conditions(old, ResultsUnread(403, "403 Forbidden: no"), NOW, 3)
    assert conditions(status) == {
        STALLED: ("True", RESULTS_UNREADABLE),
        RECONCILING: ("True", RESULTS_UNREADABLE),
        RESULTS_RECORDED: ("False", RESULTS_UNREADABLE),
    }
    assert "RBAC" in events[0].message and all(c["observedGeneration"] == 3 for c in status["conditions"])
    status, events = with_unread_conditions(old, ResultsUnread(500, "500 InternalError: etcd"), NOW, 3)
    assert conditions(status) == {
        STALLED: ("False", "Progressing"),
        RECONCILING: ("True", RESULTS_UNREADABLE),
        RESULTS_RECORDED: ("False", RESULTS_UNREADABLE),
    }
    assert len(events) == 1
    again, events = with_unread_conditions(status, ResultsUnread(500, "500 InternalError: etcd"), NOW, 3)
    assert again == status and events == []


def test_without_let_go_the_rollout_goes_on_and_status_results_says_why(bed: ActBed, store: Store) -> None:
    bed.add_nodes(2)
    bed.add_dj(daemonjob())
    bed.ctl.reconcile(bed.key)
    assert len(bed.created()) == 2  # nothing waits for the reports
    bed.sync()
    bed.finish_jobs()
    bed.drain()
    bed.clock.step(defaults.RESULT_FLUSH_IDLE)
    recorder_round(bed)  # the finished Jobs cannot be recorded
    assert woken(bed)
    bed.ctl.reconcile(bed.key)
    status = bed.last_status()
    assert conditions(status)["Complete"][0] == "True"
    assert RECONCILING not in conditions(status) or conditions(status)[RECONCILING][0] == "False"
    assert status["results"]["summary"].startswith("not recorded: 404")
    assert "CRD" in status["results"]["error"]
    assert conditions(status)[RESULTS_RECORDED] == ("False", REPORTS_CRD_MISSING)  # kstatus does not read it
    bed.sync()
    assert conditions(bed.dj()["status"])[RESULTS_RECORDED] == ("False", REPORTS_CRD_MISSING)
    assert len(bed.events(REPORTS_CRD_MISSING)) == 1
    bed.sync()
    written = len(bed.statuses())
    bed.ctl.reconcile(bed.key)
    assert len(bed.events(REPORTS_CRD_MISSING)) == 1
    assert len(bed.statuses()) == written  # the same status again: nothing written
    store.refusal = None
    bed.clock.step(defaults.RESULT_RETRY_DELAY)
    recorder_round(bed)
    assert woken(bed)
    bed.ctl.reconcile(bed.key)
    results = bed.last_status()["results"]
    assert results["error"] is None and results["recorded"] == 2  # a merge patch removes it by null
    bed.sync()
    assert RESULTS_RECORDED not in conditions(bed.dj()["status"])


def test_status_results_keep_what_was_summed_up_with_the_error() -> None:
    before = {"recorded": 3, "summary": "1 outcome on 3 nodes"}
    out, events = with_results_unread(before, ResultsUnread(None, "ConnectionError()"))
    assert out["recorded"] == 3 and out["summary"] == "not recorded: ConnectionError()"
    assert "retried" in out["error"] and len(events) == 1
    assert with_results_unread(out, ResultsUnread(None, "ConnectionError()"))[1] == []


def test_a_status_patch_removes_a_nested_key_gone_by_null() -> None:
    from daemonjob.controller.passes.report import merge_patch

    old = {"results": {"error": "x", "summary": "s", "groups": [1]}, "gone": 1, "same": {"a": 1}}
    new = {"results": {"summary": "t", "groups": [2]}, "same": {"a": 1}}
    assert merge_patch(old, new) == {
        "gone": None,
        "results": {"error": None, "summary": "t", "groups": [2]},
        "same": {"a": 1},
    }


def test_a_write_refused_after_a_read_is_said_once_not_every_retry(bed: ActBed, store: Store) -> None:
    store.refusal = None
    refused = ApiError(403, "Forbidden", "daemonjobreports.daemonjob.io is forbidden: cannot create")

    def create_report(namespace: str, body: Mapping[str, Any]) -> Mapping[str, Any]:
        raise refused

    store.create_report = create_report  # type: ignore[method-assign]
    bed.add_nodes(1)
    bed.add_dj(daemonjob())
    bed.ctl.reconcile(bed.key)
    bed.sync()
    bed.finish_jobs()
    bed.drain()
    rec = bed.ctl.results
    assert rec is not None
    for attempt in range(3):
        bed.clock.step(defaults.RESULT_RETRY_DELAY)
        recorder_round(bed)
        assert woken(bed) == (attempt == 0)  # the same answer each time: said once
        assert rec.unread(f"ops/{bed.dj()['metadata']['uid']}") == ResultsUnread(403, str(refused))


def test_the_recorder_gives_way_to_the_controllers_urgent_passes_until_a_burst_is_over(bed: ActBed) -> None:
    rec = bed.ctl.results
    assert rec is not None and not rec.urgent()
    bed.ctl.queue.add("ops/joined", urgent=True)  # a joined node's first Jobs
    key, _ = bed.ctl.queue.get()
    assert rec.urgent()
    bed.ctl.queue.done(key)
    assert rec.urgent()  # the next node of the burst may be a moment away
    bed.clock.step(defaults.RESULT_YIELD_QUIET)
    assert not rec.urgent()


def test_the_plugin_names_the_missing_reports_crd_and_how_to_install_it() -> None:
    from daemonjob.kubectl import cli
    from daemonjob.kubectl.cluster.client import PluginError, Target
    from daemonjob.kubectl.commands import results as verb

    class Kube:
        """The DaemonJob is served, its reports are not (only manifests/crd.yaml applied)."""

        def get(self, path: str, **params: Any) -> dict[str, Any]:
            if "/daemonjobreports" in path:
                raise ApiError(404, "NotFound", "404 page not found")
            return daemonjob()

    with pytest.raises(PluginError) as raised:
        verb.run(cli.parse(["results", "audit"]), Target(Kube(), "ops"))  # type: ignore[arg-type]
    message = raised.value.message
    assert "daemonjobreports.daemonjob.io" in message and "kubectl apply -f manifests/reports-crd.yaml" in message


def test_the_missing_crd_is_logged_once_for_the_controller_and_its_return_once(bed: ActBed, store: Store) -> None:
    from structlog.testing import capture_logs

    bed.add_nodes(1)
    for name in ("first", "second"):
        bed.add_dj(daemonjob(name, uid=f"uid-{name}"))
        bed.ctl.reconcile(bed.key)
    bed.sync()
    bed.finish_jobs()
    bed.drain()
    with capture_logs() as logs:
        for _ in range(2):
            bed.clock.step(defaults.RESULT_RETRY_DELAY)
            recorder_round(bed)  # both DaemonJobs' writes answer 404, twice
        store.refusal = None
        bed.clock.step(defaults.RESULT_RETRY_DELAY)
        recorder_round(bed)
    said = [e["event"] for e in logs if "DaemonJobReport CRD" in e["event"]]
    assert len(said) == 2 and "not installed" in said[0] and "manifests/reports-crd.yaml" in said[0]
    assert "recorded again" in said[1]
    assert not [e for e in logs if e["event"] == "recording results failed"]  # not once per DaemonJob
