"""Per-node results: the record, its grouping, its chunks, and the recorder's batches and restarts."""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from types import SimpleNamespace
from typing import Any

import pytest

from daemonjob import defaults
from daemonjob.controller.results.recorder import ResultRecorder
from daemonjob.controller.results.status import recorded_success, wire_recorded
from daemonjob.controller.runtime.specs import SpecCache
from daemonjob.domain.jobs.owners import owner_id
from daemonjob.domain.results.noderesult import NOT_JSON, cut_message, outcome_of, result_of
from daemonjob.domain.results.outcomes import Outcomes, summary
from daemonjob.domain.results.reports import append_patch, pack, report_name, result_size
from daemonjob.domain.shared.apinames import LABEL_ATTEMPT
from daemonjob.domain.spec.validate import read_spec
from daemonjob.machinery.client.apierror import ApiError
from daemonjob.machinery.process.clock import FakeClock
from daemonjob.testing.doubles.builders import daemonjob, job, revision_of


def owner(dj: Mapping[str, Any]) -> str:
    """The recorder names a DaemonJob by its owner id."""
    return owner_id(dj["metadata"]["namespace"], dj["metadata"]["uid"])


def pod_for(j: Mapping[str, Any], code: int = 0, message: str = "", reason: str = "") -> dict[str, Any]:
    terminated = {"exitCode": code, "reason": reason or ("Completed" if code == 0 else "Error")}
    terminated |= {"startedAt": "2026-01-01T00:00:01Z", "finishedAt": "2026-01-01T00:00:09Z"}
    if message:
        terminated["message"] = message
    return {
        "metadata": {
            "name": j["metadata"]["name"] + "-abcde",
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "labels": {"controller-uid": j["metadata"]["uid"]},
        },
        "status": {"containerStatuses": [{"name": "main", "state": {"terminated": terminated}}]},
    }


# -- the record ------------------------------------------------------------------------------
def test_a_result_holds_the_pods_exit_code_reason_message_and_times() -> None:
    dj = daemonjob()
    j = job(dj, "n1", "failed", finished="2026-01-01T00:00:10Z")
    r = result_of(j, pod_for(j, 3, "disk full\n"))
    assert r is not None
    assert (r["node"], r["state"], r["exitCode"], r["reason"], r["message"]) == (
        "n1",
        "failed",
        3,
        "Error",
        "disk full\n",
    )
    assert (r["startTime"], r["finishTime"], r["job"]) == (
        "2026-01-01T00:00:01Z",
        "2026-01-01T00:00:09Z",
        j["metadata"]["name"],
    )
    assert r["jobUID"] == j["metadata"]["uid"] and r["revision"] and "attempt" not in r


def test_a_result_without_its_pod_says_what_the_job_says() -> None:
    dj = daemonjob()
    j = job(dj, "n1", "failed")
    j["status"]["conditions"][0] |= {
        "reason": "BackoffLimitExceeded",
        "message": "Job has reached the specified backoff limit",
    }
    r = result_of(j, None)
    assert r is not None and "exitCode" not in r and r["reason"] == "BackoffLimitExceeded"
    assert result_of(job(dj, "n2", "active"), None) is None


def test_the_attempt_label_is_recorded() -> None:
    j = job(daemonjob(), "n1", "succeeded")
    j["metadata"]["labels"][LABEL_ATTEMPT] = "2"
    assert (result_of(j, None) or {})["attempt"] == 2


def test_a_message_is_cut_to_4_kib_on_a_character_boundary() -> None:
    assert len(cut_message("é" * 3000).encode()) == 4096
    assert cut_message("x" * 10) == "x" * 10


# -- grouping --------------------------------------------------------------------------------
def results(**by_message: int) -> list[dict[str, Any]]:
    out, i = [], 0
    for message, count in by_message.items():
        for _ in range(count):
            out.append({"node": f"n-{i}", "state": "succeeded", "exitCode": 0, "message": message})
            i += 1
    return out


def test_outcomes_are_most_common_first_with_a_few_names_each() -> None:
    o = Outcomes(names=2).extend(results(a=5, b=2, c=1))
    groups = o.groups()
    assert [(g.message, g.count) for g in groups] == [("a", 5), ("b", 2), ("c", 1)]
    assert groups[0].nodes == ["n-0", "n-1"]


def test_a_json_field_groups_nodes() -> None:
    rs = [
        {"node": "a", "message": '{"kernel": "6.1.0-18", "cpu": 4}'},
        {"node": "b", "message": '{"kernel": "6.1.0-18", "cpu": 8}'},
        {"node": "c", "message": '{"kernel": "6.1.0-17"}'},
        {"node": "d", "message": "not json"},
    ]
    groups = Outcomes(".kernel").extend(rs).groups()
    assert [(g.message, g.count) for g in groups] == [("6.1.0-18", 2), (NOT_JSON, 1), ("6.1.0-17", 1)]
    assert outcome_of(rs[0], ".cpu") == (None, "4")


def test_nodes_ending_alike_share_one_record_and_a_group_made_again_is_not_mistaken_for_the_old() -> None:
    o = Outcomes()
    done = {"state": "succeeded", "exitCode": 0, "message": "ok", "finishTime": "2026-11-28T10:00:00Z"}
    o.extend(
        [{**done, "node": "a"}, {**done, "node": "b"}, {**done, "node": "c", "finishTime": "2026-11-28T10:00:01Z"}]
    )
    assert o._latest["a"] is o._latest["b"] and o._latest["c"] is not o._latest["a"]
    o.add({**done, "node": "a", "attempt": 1, "message": "other"})
    o.add({**done, "node": "b", "attempt": 1, "message": "other"})
    o.add({**done, "node": "c", "attempt": 1, "message": "other"})  # the group "ok" emptied: gone
    o.add({**done, "node": "d"})  # "ok" again: a new group, not the record of the old one
    ok = next(g for g in o.groups() if g.message == "ok")
    assert o._latest["d"][2] is ok and (ok.count, ok.nodes) == (1, ["d"])
    assert [(g.message, g.count) for g in o.groups()] == [("other", 3), ("ok", 1)] and o.total == 4


def test_a_retried_node_counts_once_by_its_latest_attempt() -> None:
    o = Outcomes()
    o.add({"node": "a", "state": "failed", "exitCode": 1, "message": "boom"})
    o.add({"node": "a", "state": "succeeded", "exitCode": 0, "message": "ok", "attempt": 1})
    o.add({"node": "a", "state": "failed", "exitCode": 1, "message": "boom"})  # the older one, seen late
    assert [(g.message, g.count) for g in o.groups()] == [("ok", 1)] and o.failed == 0 and o.total == 1


def test_the_summary_is_bounded_and_names_the_odd_ones_out() -> None:
    s = summary(Outcomes().extend(results(common=40, rare=2, x1=1, x2=1, x3=1, x4=1, x5=1)), "r1", None, limit=3)
    assert [g["count"] for g in s["groups"]] == [40, 2, 1]
    assert (s["outcomes"], s["otherGroups"], s["otherNodes"], s["recorded"]) == (7, 4, 4, 47)
    assert s["summary"].startswith("7 outcomes; odd ones: ") and "(+4)" in s["summary"]
    assert summary(Outcomes().extend(results(same=3)), "r1", None)["summary"] == "1 outcome on 3 nodes"


# -- chunks ----------------------------------------------------------------------------------
def test_results_fill_the_last_chunk_then_new_ones() -> None:
    rs = [{"node": f"n{i}", "message": "x" * 100} for i in range(10)]
    size = result_size(rs[0])
    packed = pack(rs, 0, size * 8, limit=size * 10)
    assert [(c, len(p)) for c, p in packed] == [(0, 2), (1, 8)]
    assert [(c, len(p)) for c, p in pack(rs, -1, 0, limit=size * 4)] == [(0, 4), (1, 4), (2, 2)]


def test_an_append_leaves_a_chunk_within_the_append_limit_and_new_chunks_take_up_to_the_limit() -> None:
    rs = [{"node": f"n{i}", "message": "x" * 100} for i in range(10)]
    size = result_size(rs[0])
    # The last chunk has room for 8 more under the chunk limit, for 2 under the append limit.
    packed = pack(rs, 3, size * 2, limit=size * 10, append_limit=size * 4)
    assert [(c, len(p)) for c, p in packed] == [(3, 2), (4, 8)]
    # At or past the append limit (a large first write): nothing more is appended to it.
    assert [(c, len(p)) for c, p in pack(rs[:3], 0, size * 9, limit=size * 100, append_limit=size * 4)] == [(1, 3)]
    # No chunk yet: the first one takes up to the chunk limit, the append limit aside.
    assert [(c, len(p)) for c, p in pack(rs, -1, 0, limit=size * 6, append_limit=size * 2)] == [(0, 6), (1, 4)]
    # An append limit above the chunk limit (a low --result-chunk-bytes): the chunk limit holds.
    assert [(c, len(p)) for c, p in pack(rs, 0, size, limit=size * 3, append_limit=size * 50)] == [
        (0, 2),
        (1, 3),
        (2, 3),
        (3, 2),
    ]


def test_an_append_is_guarded_by_the_count() -> None:
    ops = append_patch(7, [{"node": "a"}])
    assert ops[0] == {"op": "test", "path": "/count", "value": 7} and ops[-1]["value"] == 8


def test_report_names_stay_within_253_characters() -> None:
    name = report_name("d" * 253, "abcdef1234", 12)
    assert len(name) <= 253 and name.endswith("-abcdef1234-12")


# -- the recorder ----------------------------------------------------------------------------
class FakeStore:
    def __init__(self) -> None:
        self.reports: dict[str, dict[str, Any]] = {}
        self.pods: list[dict[str, Any]] = []
        self.calls: list[str] = []
        self.fail_next: str | None = None

    def may_write(self) -> bool:
        return True

    def list_reports(self, namespace: str, daemonjob: str) -> list[Mapping[str, Any]]:
        self.calls.append("list_reports")
        return [copy.deepcopy(r) for r in self.reports.values()]

    def list_pods(self, namespace: str, job_uids: Sequence[str]) -> list[Mapping[str, Any]]:
        self.calls.append(f"list_pods {len(job_uids)}")
        return [p for p in self.pods if p["metadata"]["labels"]["controller-uid"] in job_uids]

    def create_report(self, namespace: str, body: Mapping[str, Any]) -> Mapping[str, Any]:
        self.calls.append("create")
        name = body["metadata"]["name"]
        if name in self.reports:
            raise ApiError(409, "AlreadyExists", "exists")
        made = copy.deepcopy(dict(body))
        made["metadata"]["creationTimestamp"] = f"2026-01-01T00:00:{len(self.reports):02d}Z"
        self.reports[name] = made
        return made

    def append(self, namespace: str, name: str, patch: Sequence[Mapping[str, Any]]) -> None:
        self.calls.append("append")
        report = self.reports[name]
        if report["count"] != patch[0]["value"]:
            raise ApiError(422, "Invalid", "testing value /count failed")
        report["results"].extend(op["value"] for op in patch[1:-1])
        report["count"] = patch[-1]["value"]
        if self.fail_next == "append-lost":  # written, but the answer never came
            self.fail_next = None
            raise TimeoutError("read timed out")

    def delete_report(self, namespace: str, name: str) -> None:
        self.calls.append("delete")
        del self.reports[name]

    def recorded(self) -> list[str]:
        return sorted(r["node"] for rep in self.reports.values() for r in rep["results"])


@pytest.fixture
def dj() -> dict[str, Any]:
    return daemonjob(historyLimit=1)


def recorder(store: FakeStore, dj: dict[str, Any], **kw: Any) -> tuple[ResultRecorder, list[str]]:
    woken: list[str] = []
    rec = ResultRecorder(store, lambda key: dj, lambda uid: False, woken.append, clock=FakeClock(), **kw)
    return rec, woken


def finish(store: FakeStore, rec: ResultRecorder, dj: dict[str, Any], nodes: Sequence[str], **kw: Any) -> None:
    for n in nodes:
        j = job(dj, n, "succeeded", **kw)
        store.pods.append(pod_for(j, 0, f"fact of {n}"))
        rec.job_seen(j)


def test_finished_jobs_are_written_in_one_batch_and_summarised(dj: dict[str, Any]) -> None:
    store = FakeStore()
    rec, woken = recorder(store, dj)
    finish(store, rec, dj, [f"n{i}" for i in range(150)])
    assert rec.holds(job(dj, "n3", "succeeded")["metadata"]["uid"])
    assert rec.flush(owner(dj)) == 150
    assert store.calls == ["list_reports", "list_pods 100", "list_pods 50", "create"]
    assert len(store.recorded()) == 150 and woken == ["ops/audit"]
    assert not rec.holds(job(dj, "n3", "succeeded")["metadata"]["uid"])
    status = rec.summary(owner(dj), store.recorded and next(iter(store.reports.values()))["revision"], None)
    assert status is not None and status["recorded"] == 150 and status["outcomes"] == 150


def test_a_restart_records_what_is_missing_and_nothing_twice(dj: dict[str, Any]) -> None:
    store = FakeStore()
    rec, _ = recorder(store, dj)
    finish(store, rec, dj, ["a", "b"])
    rec.flush(owner(dj))
    again, _ = recorder(store, dj)  # a new process: every finished Job is seen again
    finish(store, again, dj, ["a", "b", "c"])
    again.flush(owner(dj))
    assert store.recorded() == ["a", "b", "c"]
    assert store.calls[-1] == "append"


def test_an_append_whose_answer_was_lost_is_not_written_twice(dj: dict[str, Any]) -> None:
    store = FakeStore()
    rec, _ = recorder(store, dj)
    finish(store, rec, dj, ["a"])
    rec.flush(owner(dj))
    finish(store, rec, dj, ["b"])
    store.fail_next = "append-lost"
    with pytest.raises(TimeoutError):
        rec.flush(owner(dj))
    assert rec.flush(owner(dj)) == 0  # tried again: the reports, read again, hold it
    assert store.recorded() == ["a", "b"] and not rec.holds(job(dj, "b", "succeeded")["metadata"]["uid"])


def test_results_cross_into_a_second_chunk(dj: dict[str, Any]) -> None:
    store = FakeStore()
    rec, _ = recorder(store, dj, chunk_bytes=2000)
    finish(store, rec, dj, [f"n{i:02d}" for i in range(30)])
    rec.flush(owner(dj))
    assert len(store.reports) > 1 and len(store.recorded()) == 30
    assert all(r["count"] == len(r["results"]) for r in store.reports.values())


def test_results_that_trickle_in_after_a_large_batch_start_a_small_chunk(dj: dict[str, Any]) -> None:
    """A joined node's result appended to a rollout's large chunk would cost the API server the
    whole chunk (read, checked, rewritten); in a chunk of their own, only what it holds."""
    store = FakeStore()
    rec, _ = recorder(store, dj)
    uid = owner(dj)
    finish(store, rec, dj, [f"n{i:03d}" for i in range(300)])  # the rollout: one create, over the append limit
    rec.flush(uid)
    (big,) = store.reports.values()
    assert len(json.dumps(big["results"])) > defaults.RESULT_APPEND_BYTES
    for i in range(3):  # nodes that join one at a time
        store.calls.clear()
        finish(store, rec, dj, [f"joined-{i}"])
        rec.flush(uid)
        assert store.calls[-1] == ("create" if i == 0 else "append")
    assert len(big["results"]) == 300 and big["count"] == 300  # the large chunk is not rewritten
    small = next(r for r in store.reports.values() if r is not big)
    assert [r["node"] for r in small["results"]] == ["joined-0", "joined-1", "joined-2"] and small["chunk"] == 1
    again, _ = recorder(store, dj)  # a restart reads both chunks: nothing missing, nothing twice
    finish(store, again, dj, ["joined-3"])
    again.flush(uid)
    assert store.calls[-1] == "append" and len(store.recorded()) == 304


def test_a_round_of_writes_stops_between_two_daemonjobs_when_urgent_passes_come() -> None:
    """A joined node's first Jobs wait for no more than the one DaemonJob's write under way."""
    store = FakeStore()
    djs = {f"ops/{n}": daemonjob(n, uid=f"uid-{n}") for n in ("a", "b", "c")}
    urgent = [False]

    def create_report(namespace: str, body: Mapping[str, Any]) -> Mapping[str, Any]:
        urgent[0] = urgent[0] or not store.reports  # a node joins while the first write is under way
        return FakeStore.create_report(store, namespace, body)

    store.create_report = create_report  # type: ignore[method-assign]
    rec = ResultRecorder(
        store, djs.get, lambda uid: False, lambda key: None, clock=FakeClock(), urgent=lambda: urgent[0]
    )
    for d in djs.values():
        rec.job_seen(job(d, "n1", "succeeded"))
    rec.flush_due([owner(d) for d in djs.values()])
    assert store.calls.count("create") == 1  # a's; b and c wait
    urgent[0] = False
    rec.flush_due(["ops/uid-b", "ops/uid-c"])
    assert store.calls.count("create") == 3 and len(store.recorded()) == 3


def test_a_read_a_pass_waits_for_is_not_held_back_by_urgent_passes() -> None:
    """A let-go DaemonJob's pass for a joined node waits for its reports: the read goes at once."""
    store = FakeStore()
    djs = {f"ops/{n}": daemonjob(n, uid=f"uid-{n}") for n in ("a", "b", "c")}
    rec = ResultRecorder(store, djs.get, lambda uid: False, lambda key: None, clock=FakeClock(), urgent=lambda: True)
    for d in djs.values():
        rec.job_seen(job(d, "n1", "succeeded"))
    assert rec.successes("ops/uid-c", "ops", "c") is None  # a pass asks for c's recorded successes
    rec.flush_due(["ops/uid-a", "ops/uid-b", "ops/uid-c"])
    assert store.calls.count("list_reports") == 2  # a's (first in the round) and c's; b waits
    assert sorted(store.recorded()) == ["n1", "n1"] and rec.successes("ops/uid-c", "ops", "c") is not None


def test_rollouts_beyond_history_limit_are_deleted(dj: dict[str, Any]) -> None:
    store = FakeStore()
    rec, _ = recorder(store, dj)
    for rev in ("r1", "r2", "r3"):
        for n in ("a", "b"):
            j = job(dj, n, "succeeded", revision=rev)
            rec.job_seen(j)
        dj["status"] = {"currentRevision": rev}
        rec.flush(owner(dj))
    assert sorted({r["revision"] for r in store.reports.values()}) == ["r2", "r3"]
    rec.job_seen(job(dj, "c", "succeeded", revision="r1"))  # a Job of the deleted rollout, still there
    rec.flush(owner(dj))
    assert sorted({r["revision"] for r in store.reports.values()}) == ["r2", "r3"]


# -- the plugin's pure parts -----------------------------------------------------------------
def test_the_plugin_shows_a_retried_nodes_latest_attempt_and_writes_csv() -> None:
    import io

    from daemonjob.kubectl import cli
    from daemonjob.kubectl.commands import results as verb

    rs = [
        {"node": "b", "state": "failed", "exitCode": 1, "message": "boom"},
        {"node": "b", "state": "succeeded", "exitCode": 0, "message": "ok", "attempt": 1},
        {"node": "a", "state": "succeeded", "exitCode": 0, "message": 'say "hi",\nthere'},
    ]
    latest = verb.latest_per_node(rs)
    assert [(r["node"], r["message"]) for r in latest] == [("a", 'say "hi",\nthere'), ("b", "ok")]
    out = io.StringIO()
    verb.write_csv(latest, out)
    assert out.getvalue().splitlines()[0].endswith(",message") and '"say ""hi"",' in out.getvalue()
    rows = verb.group_rows(
        Outcomes(names=None).extend([*latest, {"node": "c", "message": "ok", "exitCode": 0}]).groups(), 3
    )
    assert rows[0][:2] == ["2", "66.7%"] and rows[0][-1] == "b, c"
    args = cli.parse(["results", "x", "--group-by", "--failed"])
    assert (args.group_by, args.failed) == ("message", True)
    assert cli.parse(["results", "x", "--group-by", ".kernel", "-o", "csv"]).group_by == ".kernel"
    assert cli.parse(["results", "x", "--run", "r1"]).run_name == "r1"


def test_history_cleanup_holds_a_finished_job_until_its_result_is_recorded(dj: dict[str, Any]) -> None:
    from daemonjob.controller.metrics.metrics import Metrics
    from daemonjob.controller.passes.history import HistoryCleaner
    from daemonjob.domain.jobs.changes import DeleteJob
    from daemonjob.testing.doubles.fakes import FakeJobControl

    store = FakeStore()
    rec, _ = recorder(store, dj)
    j = job(dj, "a", "succeeded")
    rec.job_seen(j)
    cleaner = HistoryCleaner(FakeJobControl(), Metrics(), qps=1000, burst=1000, hold=rec.holds)
    delete = DeleteJob(j["metadata"]["name"], "a", "History", j["metadata"]["uid"])
    try:
        assert cleaner.submit("ops", [delete]) == []  # not recorded yet: a later pass asks again
        rec.flush(owner(dj))
        assert cleaner.submit("ops", [delete]) == [delete]
    finally:
        cleaner.stop()


def test_status_results_keep_the_last_written_until_the_reports_are_read(dj: dict[str, Any]) -> None:
    from types import SimpleNamespace

    from daemonjob.controller.results.status import with_results
    from daemonjob.domain.decision.decide import Decision

    rec, _ = recorder(FakeStore(), dj)
    before = {"recorded": 3, "summary": "1 outcome on 3 nodes"}
    observed: Any = SimpleNamespace(**dj["metadata"], cached={"status": {"results": before}})
    decision = Decision(status={"currentRevision": "r1"})
    assert with_results(rec, observed, decision).status["results"] == before  # not read yet: kept
    assert with_results(None, observed, decision) is decision
    rec.job_seen(job(dj, "a", "succeeded", revision="r1"))
    rec.flush(owner(dj))
    assert with_results(rec, observed, decision).status["results"]["recorded"] == 1


def test_status_results_kept_until_the_reports_are_read_write_nothing(dj: dict[str, Any]) -> None:
    """The kept status.results comes from the cache (frozen: lists are tuples) and must compare
    equal to the status as written, or every pass of a restarted controller patches it."""
    from types import SimpleNamespace

    from daemonjob.controller.passes.report import write_status
    from daemonjob.controller.results.status import with_results
    from daemonjob.domain.decision.decide import Decision
    from daemonjob.machinery.cache.frozen import freeze, thaw
    from daemonjob.testing.doubles.fakes import FakeJobControl

    rec, _ = recorder(FakeStore(), dj)
    written = {
        "currentRevision": "r1",
        "results": {"recorded": 2, "groups": [{"count": 2, "message": "", "nodes": ["a", "b"]}], "summary": "x"},
    }
    observed: Any = SimpleNamespace(**dj["metadata"], cached=freeze({"status": written}))
    status = with_results(rec, observed, Decision(status={"currentRevision": "r1"})).status
    control = FakeJobControl()
    assert not write_status(control, dj, thaw(observed.cached["status"]), status)
    assert status == written


def test_status_results_group_by_the_specs_json_field_and_regroup_when_it_changes(dj: dict[str, Any]) -> None:
    store = FakeStore()
    rec, _ = recorder(store, dj)
    for n, kernel in (("a", "6.1.0-18"), ("b", "6.1.0-18"), ("c", "6.1.0-17")):
        j = job(dj, n, "succeeded", revision="r1")
        store.pods.append(pod_for(j, 0, json.dumps({"kernel": kernel, "node": n})))
        rec.job_seen(j)
    rec.flush(owner(dj))
    uid = owner(dj)
    assert (rec.summary(uid, "r1", None) or {})["outcomes"] == 3  # whole messages: each names its node
    assert rec.summary(uid, "r1", None, ".kernel") is None  # counted again from the reports first
    dj["spec"]["results"] = {"groupBy": ".kernel"}
    rec.flush(uid)
    s = rec.summary(uid, "r1", None, ".kernel") or {}
    assert [(g["message"], g["count"], g["nodes"]) for g in s["groups"]] == [
        ("6.1.0-18", 2, ["a", "b"]),
        ("6.1.0-17", 1, ["c"]),
    ]
    assert s["summary"] == "2 outcomes; odd ones: c"


def test_recorded_successes_are_read_from_the_reports_when_asked_and_survive_a_restart(dj: dict[str, Any]) -> None:
    uid = owner(dj)
    store = FakeStore()
    rec, woken = recorder(store, dj)
    told: list[tuple[str, list[str] | None]] = []
    rec.told = lambda _uid, key, nodes: told.append((key, nodes))
    assert rec.successes(uid, "ops", "audit") is None  # not read yet: a read is asked for
    assert rec._due(0.0)[0] == [uid]
    rec.flush(uid)
    assert store.calls == ["list_reports"] and told == [("ops/audit", None)] and woken == ["ops/audit"]
    assert rec.successes(uid, "ops", "audit") == {}
    finish(store, rec, dj, ["a", "b"])
    failed = job(dj, "c", "failed")
    store.pods.append(pod_for(failed, 1, "no"))
    rec.job_seen(failed)
    rec.flush(uid)
    assert told[-1] == ("ops/audit", ["a", "b"])  # a failure stands for nothing: its Job stays
    kept = rec.successes(uid, "ops", "audit")
    assert kept is not None and sorted(kept) == ["a", "b"]
    assert kept["a"].standin and kept["a"].uid == job(dj, "a", "succeeded")["metadata"]["uid"]
    again, _ = recorder(store, dj)  # a new process, every Job gone: the reports still say where it ran
    assert again.successes(uid, "ops", "audit") is None
    again.flush(uid)
    kept = again.successes(uid, "ops", "audit")
    assert kept is not None and sorted(kept) == ["a", "b"]


def test_a_result_keeps_the_jobs_template_hash(dj: dict[str, Any]) -> None:
    j = job(dj, "a", "succeeded")
    j["metadata"]["labels"]["daemonjob.io/template-hash"] = "h1"
    result = result_of(j, None)
    assert result is not None and result["templateHash"] == "h1"


def test_after_reads_where_a_dependency_let_go_of_its_jobs_from_its_records() -> None:
    """A DaemonJob that comes after one with deleteSucceededJobs reads its records: none before
    they are read (the read is asked for, then wakes the readers), then the nodes of the
    dependency's revision; the kept plans are told of each change."""
    dep = daemonjob(historyLimit=1, results={"deleteSucceededJobs": True})
    uid, revision = owner(dep), revision_of(dep)
    store = FakeStore()
    rec, _ = recorder(store, dep)
    changed: list[list[str] | None] = []
    readers: list[str] = []
    order = SimpleNamespace(order_index=SimpleNamespace(spec_of=read_spec), recorded=None)
    plans = SimpleNamespace(recorded_changed=lambda _uid, nodes: changed.append(nodes))
    observer = SimpleNamespace(recorded=None)
    wire_recorded(rec, plans, observer, SpecCache(), order, readers.append)  # type: ignore[arg-type]
    assert order.recorded(dep, revision, None) == frozenset()  # not read yet: nothing counts
    rec.flush(uid)
    assert readers == ["ops/audit"] and changed == [None]
    finish(store, rec, dep, ["a", "b"])
    rec.flush(uid)
    assert changed[-1] == ["a", "b"]
    assert order.recorded(dep, revision, None) == {"a", "b"}
    assert order.recorded(dep, "another-revision", None) == frozenset()
    assert order.recorded(daemonjob(historyLimit=1), revision, None) == frozenset()  # the field off: its Jobs tell


def test_a_deleted_job_is_a_let_go_only_if_it_is_its_nodes_newest_recorded_success() -> None:
    """The router notes a deleted Job as a lost attempt unless its record stands for it."""
    dep = daemonjob(historyLimit=1, results={"deleteSucceededJobs": True})
    uid = owner(dep)
    store = FakeStore()
    rec, _ = recorder(store, dep)
    let_go = recorded_success(rec)
    assert not let_go(job(dep, "a", "succeeded")), "the reports not read yet: nothing stands"
    assert rec.successes(uid, "ops", "audit") is None  # a pass asks for the read
    rec.flush(uid)
    finish(store, rec, dep, ["a"])
    rec.flush(uid)
    assert let_go(job(dep, "a", "succeeded"))
    again = job(dep, "a", "succeeded")
    again["metadata"]["uid"] = "a-later-job-of-node-a"
    assert not let_go(again), "not the Job the record is of"
    assert not let_go(job(dep, "b", "succeeded")), "nothing recorded for node b"
    assert not let_go(job(daemonjob(uid="another-daemonjob", historyLimit=1), "a", "succeeded"))
    assert not recorded_success(None)(job(dep, "a", "succeeded")), "no recorder, nothing recorded"


def test_a_let_go_delete_waiting_longer_than_the_ttl_in_the_cleaners_queue_is_not_queued_again() -> None:
    """A rollout's let-go queues one delete per node; at 10,000 nodes x 10 DaemonJobs they wait
    longer than HISTORY_DELETE_TTL. Every pass meanwhile offers the plan's deletes again: queued
    twice, each stale copy would cost a token and a round trip, and the deletes of nodes
    joined later would wait behind them all."""
    import threading
    import time

    from daemonjob import defaults
    from daemonjob.controller.metrics.metrics import Metrics
    from daemonjob.controller.passes.history import HistoryCleaner
    from daemonjob.domain.jobs.changes import DeleteJob
    from daemonjob.domain.rollout.plan import RECORDED
    from daemonjob.testing.doubles.fakes import FakeJobControl

    gate = threading.Event()
    sent: list[str] = []

    class SlowControl(FakeJobControl):
        def delete_job(self, namespace: str, name: str, uid: str | None, propagation: str = "Foreground") -> None:
            gate.wait(10)
            sent.append(name)

    clock = FakeClock()
    cleaner = HistoryCleaner(SlowControl(), Metrics(), clock=clock)
    deletes = [DeleteJob(f"j-{i}", f"n-{i}", RECORDED, f"uid-{i}") for i in range(3)]
    try:
        assert cleaner.submit("ops", deletes) == deletes
        clock.step(defaults.HISTORY_DELETE_TTL + 1)  # the first is being sent, the others still wait
        assert cleaner.submit("ops", deletes) == []
        gate.set()

        def sent_when(count: int) -> list[str]:
            deadline = time.monotonic() + 5
            while len(sent) < count and time.monotonic() < deadline:
                time.sleep(0.01)
            return sent

        assert sent_when(3) == ["j-0", "j-1", "j-2"]
        assert cleaner.submit("ops", deletes) == []  # sent: the cache may lag for the TTL
        clock.step(defaults.HISTORY_DELETE_TTL + 1)
        assert cleaner.submit("ops", deletes[:1]) == deletes[:1]  # still seen after that: sent again
        assert sent_when(4) == ["j-0", "j-1", "j-2", "j-0"]
    finally:
        gate.set()
        cleaner.stop()
