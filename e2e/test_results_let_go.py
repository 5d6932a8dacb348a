"""spec.results.deleteSucceededJobs against the real API server: each node's succeeded Job goes
once its result is recorded, and the record is the proof that the node ran. The controller
SIGKILLed after the Jobs went runs no node again, a DaemonJob that comes after it proceeds on
the records alone, and a new revision runs every node again.

What ran is counted from a Job watch on the API server (every Job uid created, per node and
revision), never from the controller under test."""

from __future__ import annotations

import json
import signal
import threading
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Self

import pytest
from harness import Cluster, Nodes, wait_for
from test_results import audit, plugin, reports, wait_recorded

from daemonjob.domain.jobs.contract import job_node, job_revision
from daemonjob.domain.shared.apinames import LABEL_NAME
from daemonjob.machinery.client.kube import Kube, path_for
from daemonjob.testing.follow import Follower

LET_GO = {"results": {"deleteSucceededJobs": True}}


class JobWatch:
    """Every Job of the namespace the API server shows, by (DaemonJob, node, revision): their uids."""

    def __init__(self, kube: Kube, namespace: str) -> None:
        self.kube, self.namespace = kube, namespace
        self.uids: dict[tuple[str, str, str], set[str]] = defaultdict(set)
        self._lock = threading.Lock()
        self._follower = Follower(
            kube, path_for("batch/v1", "jobs", namespace), {}, self._lock, self._list, self._seen, "watch-jobs"
        )

    def __enter__(self) -> Self:
        self._follower.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._follower.stop()

    def _list(self) -> str:
        listed = self.kube.get(path_for("batch/v1", "jobs", self.namespace))
        for job in listed["items"]:
            self._seen("ADDED", job)
        return str(listed["metadata"]["resourceVersion"])

    def _seen(self, kind: str, job: dict[str, Any]) -> None:
        meta = job["metadata"]
        owner = (meta.get("labels") or {}).get(LABEL_NAME) or ""
        self.uids[(owner, job_node(job) or "", job_revision(job) or "")].add(meta["uid"])

    def ran(self, name: str, revision: str) -> dict[str, int]:
        """node -> how many Jobs of `name`'s `revision` were created there."""
        with self._lock:
            return {node: len(u) for (dj, node, rev), u in self.uids.items() if dj == name and rev == revision}


@pytest.fixture
def job_watch(api: Cluster) -> Iterator[JobWatch]:
    with JobWatch(api.kube, api.namespace) as watch:
        yield watch


def no_jobs_left(api: Cluster, name: str) -> bool:
    return not api.jobs(name)


def test_succeeded_jobs_go_the_records_stand_for_them_across_a_sigkill_and_after_proceeds(
    api: Cluster, nodes: Nodes, group: str, controller: Any, job_watch: JobWatch, admin_kubeconfig: Path
) -> None:
    names = nodes(5)
    facts = {n: f"fact of {n}" for n in names}
    api.apply(audit("letgo", group, facts, maxParallel=2, **LET_GO))
    first = api.wait_complete("letgo", 5, timeout=180)["status"]["currentRevision"]
    got = wait_recorded(api, "letgo", 5, first)
    assert {n: r["message"] for n, r in got.items()} == facts
    wait_for(lambda: no_jobs_left(api, "letgo"), 120, "every succeeded Job of letgo deleted")
    assert job_watch.ran("letgo", first) == dict.fromkeys(names, 1)
    status = api.status("letgo")
    assert status["succeededNodes"] == 5 and status["results"]["recorded"] == 5
    shown = plugin(admin_kubeconfig, api.namespace, "results", "letgo", "-o", "json")
    assert shown.returncode == 0, shown.stderr
    assert sorted(r["node"] for r in json.loads(shown.stdout)["results"]) == sorted(names)
    view = plugin(admin_kubeconfig, api.namespace, "status", "letgo", "-o", "json")
    doc = json.loads(view.stdout)
    assert view.returncode == 0 and doc["counts"]["succeeded"] == 5 and doc["counts"]["pending"] == 0, view.stdout
    assert {(r["node"], r["state"], r["message"]) for r in doc["nodes"]} == {(n, "succeeded", facts[n]) for n in names}

    controller.kill(signal.SIGKILL)  # every Job gone: only the reports say where it ran
    controller.restart()
    api.apply(audit("next", group, facts, maxParallel=5, after=["letgo"]))
    api.wait_complete("next", 5, timeout=180)  # it read letgo's records: no Job of letgo is left
    assert len(api.jobs("next")) == 5  # kept: the field is off there
    status = api.wait_complete("letgo", 5)["status"]
    assert status["currentRevision"] == first and status["succeededNodes"] == 5
    assert job_watch.ran("letgo", first) == dict.fromkeys(names, 1)  # no node ran again
    assert not api.jobs("letgo")
    assert len(wait_recorded(api, "letgo", 5, first)) == 5  # each node recorded once (a rerun would record twice)

    one = plugin(admin_kubeconfig, api.namespace, "rerun", "letgo", "--node", names[0], "--yes")
    assert one.returncode == 1 and "deleteSucceededJobs" in one.stderr, one.stderr  # no Job to delete there

    api.patch("letgo", {"jobTemplate": {"metadata": {"annotations": {"edit": "2"}}}})
    second = wait_for(
        lambda: s["currentRevision"] if (s := api.status("letgo")).get("currentRevision") != first else None,
        60,
        "a new revision",
    )
    api.wait_complete("letgo", 5, timeout=180)
    wait_recorded(api, "letgo", 5, second)
    wait_for(lambda: no_jobs_left(api, "letgo"), 120, "the new revision's Jobs deleted")
    assert job_watch.ran("letgo", second) == dict.fromkeys(names, 1)  # every node again, once
    assert job_watch.ran("letgo", first) == dict.fromkeys(names, 1)
    assert {r["revision"] for r in reports(api, "letgo")} == {first, second}


def test_a_failed_job_stays_and_a_restart_reads_the_records_before_deciding(
    api: Cluster, nodes: Nodes, group: str, controller: Any, job_watch: JobWatch
) -> None:
    names = sorted(nodes(3))
    body = audit("mixed", group, {n: "x" for n in names}, maxParallel=3, maxFailedNodes=1, **LET_GO)
    annotations = body["spec"]["jobTemplate"]["spec"]["template"]["metadata"]["annotations"]
    annotations |= {"sim.daemonjob.io/fail-on": names[0], "sim.daemonjob.io/exit-code": "4"}
    body["spec"]["jobTemplate"]["spec"]["backoffLimit"] = 0
    api.apply(body)
    revision = wait_for(
        lambda: s.get("currentRevision") if (s := api.status("mixed")).get("failedNodes") == 1 else None,
        120,
        "the failure on one node",
    )
    wait_recorded(api, "mixed", 3, revision)
    wait_for(lambda: [job_node(j) for j in api.jobs("mixed")] == [names[0]], 120, "only the failed Job left")
    controller.kill(signal.SIGKILL)
    controller.restart()
    wait_for(
        lambda: (s := api.status("mixed")).get("succeededNodes") == 2 and s.get("failedNodes") == 1,
        60,
        "the counts read back after the restart",
    )
    assert job_watch.ran("mixed", revision) == dict.fromkeys(names, 1)
    assert [job_node(j) for j in api.jobs("mixed")] == [names[0]]
