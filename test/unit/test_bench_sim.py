"""`make bench-sim` at a tiny size, so the bench cannot rot; and the simulated API it runs on."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from daemonjob.controller.results.store import KubeResultStore
from daemonjob.controller.runtime.jobcontrol import KubeJobControl
from daemonjob.machinery.client.kube import ApiError
from daemonjob.testing.doubles.builders import daemonjob
from daemonjob.testing.sim.memapi import MemKube
from daemonjob.testing.sim.simcluster import SimCluster
from daemonjob.testing.sim.simjobs import job_uid, node_name

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "hack" / "bench_sim.py"


def _bench(*extra: str) -> dict[str, Any]:
    argv = ["--nodes", "50", "--daemonjobs", "2", "--joins", "3", "--join-interval", "0.1", "--job-seconds", "0.2"]
    proc = subprocess.run(
        [sys.executable, str(BENCH), *argv, *extra, "--timeout", "60", "--log-level", "warning", "--json"],
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    return dict(orjson.loads(proc.stdout.decode().strip().splitlines()[-1]))


@pytest.fixture(scope="module")
def figures() -> dict[str, Any]:
    return _bench()


def test_every_node_gets_its_job_and_the_figures_are_plausible(figures: dict[str, Any]) -> None:
    assert "not_measured_further" not in figures
    assert figures["requests_per_rollout"]["create jobs"] == 50  # one Job per node, per DaemonJob
    assert figures["duplicate_creates"] == 0 and figures["unexpected_requests"] == {}
    assert figures["job_events"] == 2 * 50 * 3  # added, started, ended
    assert 0 < figures["cpu_us_per_job_event"] < 100_000
    assert figures["writes_per_rollout"] >= 50
    assert 0 < figures["peak_rss_mb"] < 2048
    threads = figures["rollout_thread_cpu_s"]
    assert set(threads) <= {"informer-jobs", "worker", "api-writer", "results", "MainThread", "manager"}, threads


def test_with_delete_succeeded_jobs_every_job_is_deleted_once_recorded_and_joins_run_on_the_records() -> None:
    """The mode the joins of DaemonJobs whose Jobs are gone are measured in: a rollout ends
    with its Jobs deleted, no node runs twice, and each join still gets its Jobs."""
    figures = _bench("--delete-succeeded-jobs")
    assert "not_measured_further" not in figures and figures["delete_succeeded_jobs"] is True
    assert figures["requests_per_rollout"]["create jobs"] == 50 and figures["duplicate_creates"] == 0
    assert figures["requests_per_rollout"]["delete jobs"] == 50
    assert figures["unexpected_requests"] == {}
    assert figures["job_events"] == 2 * 50 * 5  # added, started, ended, terminating, deleted
    assert len(figures["join_latencies"]) == 3


def test_each_join_is_measured(figures: dict[str, Any]) -> None:
    assert len(figures["join_latencies"]) == 3
    assert 0 < figures["join_p50_s"] <= figures["join_p99_s"] < 10
    assert figures["join_cpu_s"] > 0 and figures["join_passes"] >= 2  # a pass per DaemonJob at least


def test_the_figures_are_printed_one_size_and_as_a_table(figures: dict[str, Any], capsys: Any) -> None:
    sys.path.insert(0, str(BENCH.parent))
    try:
        import bench_sim  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(BENCH.parent))
    bench_sim.print_one(figures)
    bench_sim.print_table([figures, figures])
    out = capsys.readouterr().out
    for label, _, _ in bench_sim.ROWS:
        assert out.count(label) == 2, label  # once for the size, once in the table
    assert "NOT MEASURED" not in out and " - |" not in out
    assert "CPU per Job event: 50 / 50 = 1.00" in out


# -- the simulated API ------------------------------------------------------------------------
def _cluster(nodes: int = 3) -> tuple[SimCluster, MemKube]:
    sim = SimCluster(nodes, job_seconds=0.0, start_seconds=0.0)
    sim.add_daemonjob(daemonjob("audit", "ops", uid="dj-uid"))
    return sim, MemKube(sim)


def _job(name: str, node: str) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "labels": {"daemonjob.io/name": "audit"},
            "annotations": {"daemonjob.io/node": node},
        },
        "spec": {"template": {"spec": {"affinity": {"nodeAffinity": {"values": [node]}}}}},
    }


def test_a_job_created_is_read_fresh_as_the_api_server_holds_it() -> None:
    """The controller checks a cache that is late against a fresh read: a Job it created must
    be there (a 404 would tell it to create the Job again)."""
    sim, kube = _cluster()
    control = KubeJobControl(kube)  # type: ignore[arg-type]
    control.create_job("ops", _job("audit-node-000001-abc", node_name(1)))
    fresh = control.get_job("ops", "audit-node-000001-abc")
    assert fresh["metadata"]["uid"] == job_uid(0, 1)
    assert fresh["metadata"]["annotations"]["daemonjob.io/node"] == node_name(1)
    assert fresh["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]["values"] == [node_name(1)]
    with pytest.raises(ApiError) as err:
        control.get_job("ops", "audit-node-000002-abc")
    assert err.value.status == 404


def test_a_second_create_for_a_node_is_refused_and_counted() -> None:
    sim, kube = _cluster()
    control = KubeJobControl(kube)  # type: ignore[arg-type]
    control.create_job("ops", _job("audit-node-000000-abc", node_name(0)))
    with pytest.raises(ApiError) as err:
        control.create_job("ops", _job("audit-node-000000-abc", node_name(0)))
    assert err.value.already_exists and sim.duplicates == 1


def test_jobs_are_sent_added_started_and_ended_on_the_watch() -> None:
    sim, kube = _cluster()
    stream = iter(kube.watch("/apis/batch/v1/jobs", {"resourceVersion": "0"}, read_timeout=5))
    KubeJobControl(kube).create_job("ops", _job("audit-node-000002-abc", node_name(2)))  # type: ignore[arg-type]
    sim.start()
    try:
        assert sim.wait(lambda: sim.finished == 1, 5)
        events = [next(stream) for _ in range(3)]
    finally:
        sim.stop()
    assert [e["type"] for e in events] == ["ADDED", "MODIFIED", "MODIFIED"]
    assert [e["object"]["status"].get("active") for e in events] == [None, 1, None]
    assert events[-1]["object"]["status"]["conditions"][0]["type"] == "Complete"
    assert {e["object"]["metadata"]["name"] for e in events} == {"audit-node-000002-abc"}
    assert events[0]["object"]["metadata"]["managedFields"]  # as the API server sends a Job
    pods = KubeResultStore(kube).list_pods("ops", [job_uid(0, 2), job_uid(0, 1)])  # type: ignore[arg-type]
    assert [p["metadata"]["labels"]["controller-uid"] for p in pods] == [job_uid(0, 2)]  # finished ones only


def test_a_finished_jobs_delete_is_sent_terminating_then_deleted_and_then_not_found() -> None:
    sim, kube = _cluster()
    control = KubeJobControl(kube)  # type: ignore[arg-type]
    stream = iter(kube.watch("/apis/batch/v1/jobs", {"resourceVersion": "0"}, read_timeout=5))
    control.create_job("ops", _job("audit-node-000001-abc", node_name(1)))
    control.create_job("ops", _job("audit-node-000002-abc", node_name(2)))
    sim.start()
    try:
        assert sim.wait(lambda: sim.finished == 2, 5)
        control.delete_job("ops", "audit-node-000001-abc", job_uid(0, 1))
        assert sim.wait(lambda: sim.deleted == 1, 5)
        events = [next(stream) for _ in range(8)]
    finally:
        sim.stop()
    mine = [e for e in events if e["object"]["metadata"]["name"] == "audit-node-000001-abc"]
    assert [e["type"] for e in mine] == ["ADDED", "MODIFIED", "MODIFIED", "MODIFIED", "DELETED"]
    assert "deletionTimestamp" not in mine[2]["object"]["metadata"]
    assert mine[3]["object"]["metadata"]["deletionTimestamp"] and mine[4]["object"]["metadata"]["finalizers"]
    assert mine[4]["object"]["status"]["succeeded"] == 1
    with pytest.raises(ApiError) as err:
        control.get_job("ops", "audit-node-000001-abc")
    assert err.value.status == 404
    with pytest.raises(ApiError) as err:
        control.delete_job("ops", "audit-node-000001-abc", job_uid(0, 1))  # gone already
    assert err.value.status == 404
    assert control.get_job("ops", "audit-node-000002-abc")["status"]["succeeded"] == 1
    assert sim.deleted == 1 and sim.unexpected == {}


def test_nodes_are_listed_in_pages_and_joins_sent() -> None:
    sim, kube = _cluster(nodes=5)
    first = kube.get("/api/v1/nodes", limit=2)
    assert [n["metadata"]["name"] for n in first["items"]] == [node_name(0), node_name(1)]
    rest = kube.get("/api/v1/nodes", limit=10, **{"continue": first["metadata"]["continue"]})
    assert len(rest["items"]) == 3 and "continue" not in rest["metadata"]
    stream = kube.watch("/api/v1/nodes", {"resourceVersion": first["metadata"]["resourceVersion"]}, read_timeout=5)
    assert sim.join_node() == 5
    stream.close()
    assert [e["object"]["metadata"]["name"] for e in stream] == []  # closed before it was read
    assert kube.requests[("list", "nodes")] == 2 and kube.server_cpu() > 0
