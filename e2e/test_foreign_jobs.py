"""Ownership is namespace-local, against the real control plane.

Anyone who may create Jobs in some namespace can write one carrying a DaemonJob's uid, labels
and node annotation. Here Jobs like that, active and finished, named as the DaemonJob's own,
are re-created in a loop (the garbage collector deletes them: their owner is not in their
namespace) in a namespace that sorts before the DaemonJob's, from before its rollout starts,
through a controller restart, to its end. The maintenance rollout, its nodes, its status and
its results come out exactly as those of the same DaemonJob run without them, and the
controller writes nothing in that namespace."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from typing import Any

import pytest
import test_node_maintenance as maintenance
from harness import CONTROLLER_NS, EXTERNAL, Cluster, Nodes, metric_value, wait_for
from test_node_maintenance import _maintained, _uncordoned_without_record

from daemonjob.domain.jobs.contract import job_node
from daemonjob.domain.jobs.jobbody import build_job
from daemonjob.domain.shared.apinames import API_VERSION
from daemonjob.machinery.client.kube import ApiError, Kube, path_for
from daemonjob.testing.audit import AuditLog
from daemonjob.testing.doubles.builders import revision_of
from daemonjob.testing.sim.nodewatch import NodeWatcher

pytestmark = pytest.mark.skipif(EXTERNAL, reason="runs a controller of its own over every namespace")

maintenance_rbac = maintenance.maintenance_rbac
watch = maintenance.watch
SA_USER = f"system:serviceaccount:{CONTROLLER_NS}:daemonjob-controller"
FOREIGN = "daemonjob_foreign_owner_jobs_total"
COUNTS = ("desiredNodes", "activeNodes", "succeededNodes", "failedNodes", "pendingNodes")
NEVER = {"e2e.daemonjob.io/never": "scheduled"}  # no node has it: a forged Job's pod stays Pending


class Forger(threading.Thread):
    """Keeps, every half second, two active Jobs and a finished one per node in `namespace`
    that carry DaemonJob `name`'s uid, revision label and node annotation (an active one under
    the very name of its own Job there), re-creating what the garbage collector deleted."""

    def __init__(self, kube: Kube, namespace: str, target: Cluster, name: str, nodes: list[str]) -> None:
        super().__init__(name="forger", daemon=True)
        self.kube, self.namespace, self.target, self.dj_name, self.nodes = kube, namespace, target, name, nodes
        self.halt = threading.Event()
        self.made: dict[str, set[str]] = {"active": set(), "finished": set()}  # uids of the Jobs created
        self.errors: list[str] = []

    def run(self) -> None:
        while not self.halt.is_set():
            try:
                self.forge()
            except Exception as exc:  # the API server busy, a Job deleted under a patch: the next round
                self.errors.append(repr(exc))
            self.halt.wait(0.5)

    def stop(self) -> None:
        self.halt.set()
        self.join(timeout=30)
        assert not self.is_alive(), "the forger did not stop"

    def forge(self) -> None:
        dj = self.target.get(self.dj_name)
        revision = (dj.get("status") or {}).get("currentRevision") or revision_of(dj)
        path = path_for("batch/v1", "jobs", self.namespace)
        present = {j["metadata"]["name"] for j in self.kube.get(path)["items"]}
        for node in self.nodes:
            body = build_job(dj, node, revision)
            body["metadata"]["namespace"] = self.namespace
            body["spec"]["template"]["spec"]["nodeSelector"] = NEVER
            real = body["metadata"]["name"]
            for state, name in (("active", real), ("active", f"y{real[1:]}"), ("finished", f"x{real[1:]}")):
                if name in present:
                    continue
                made = self.kube.create(path, {**body, "metadata": {**body["metadata"], "name": name}})
                self.made[state].add(made["metadata"]["uid"])
                if state == "finished":
                    now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
                    done = {"type": "Complete", "status": "True", "lastTransitionTime": now}
                    status = {"conditions": [done], "startTime": now, "completionTime": now, "succeeded": 1}
                    self.kube.patch(path_for("batch/v1", "jobs", self.namespace, name, "status"), {"status": status})

    def forged(self) -> int:
        return sum(len(uids) for uids in self.made.values())


@pytest.fixture
def elsewhere(kube: Kube) -> Iterator[str]:
    """A namespace that sorts before the test's own ("t-..."): its Jobs are listed first."""
    name = f"a-forged-{uuid.uuid4().hex[:6]}"
    kube.create(path_for("v1", "namespaces"), {"metadata": {"name": name, "labels": {"daemonjob.io/test": "true"}}})
    yield name
    try:
        kube.delete(path_for("v1", "namespaces", name=name))
    except ApiError as exc:
        if not exc.not_found:
            raise


def _one_at_a_time(name: str, group: str) -> dict[str, Any]:
    """Cordon, drain, run, uncordon, a node at a time: a forged active Job would hold the slot."""
    body = _maintained(name, group)
    body["spec"]["maxParallel"] = 1
    return body


def _released(api: Cluster, nodes: list[str]) -> None:
    wait_for(lambda: all(_uncordoned_without_record(api, n) for n in nodes), 60, "every node released")


def _outcome(api: Cluster, name: str, nodes: list[str]) -> dict[str, Any]:
    """What a run of `name` left: its status counts and results, each node's Jobs and results."""
    dj = api.wait_complete(name, len(nodes), timeout=240)
    _released(api, nodes)
    summary = wait_for(
        lambda: s if (s := api.status(name).get("results") or {}).get("recorded") == len(nodes) else None,
        90,
        f"status.results of {name} to count every node",
    )
    reports = api.kube.get(
        path_for(API_VERSION, "daemonjobreports", api.namespace), labelSelector=f"daemonjob.io/name={name}"
    )
    results = sorted(
        (r["node"], r["state"], r["exitCode"], r.get("message")) for rep in reports["items"] for r in rep["results"]
    )
    jobs = {
        node: [(j["status"].get("succeeded"), j["metadata"]["namespace"]) for j in js]
        for node, js in api.jobs_by_node(name).items()
    }
    return {
        "counts": {k: dj["status"].get(k) for k in COUNTS},
        "failedNodeNames": dj["status"].get("failedNodeNames"),
        "conditions": sorted((c["type"], c["status"]) for c in dj["status"]["conditions"]),
        "summary": {k: v for k, v in summary.items() if k != "revision"},
        "results": results,
        "jobs": jobs,
    }


def test_forged_jobs_elsewhere_leave_a_maintenance_rollout_as_without_them(
    api: Cluster,
    kube: Kube,
    nodes: Nodes,
    group: str,
    elsewhere: str,
    spawn_controller: Callable[..., Any],
    maintenance_rbac: None,
    watch: NodeWatcher,
    audit_log: AuditLog,
) -> None:
    names = nodes(2)
    controller = spawn_controller(
        extra_args=[
            "--namespace=",  # every namespace: the Job informer sees the forged ones
            f"--node-maintenance-namespaces={api.namespace}",
            "--max-unavailable-nodes=100%",
        ]
    )
    api.apply(_one_at_a_time("clean", group))
    without = _outcome(api, "clean", names)
    assert without["counts"]["succeededNodes"] == 2 and without["results"], without

    mark = audit_log.mark()
    body = _one_at_a_time("maint", group)
    body["spec"]["suspend"] = True  # the forged Jobs first, then the rollout
    api.apply(body)
    forger = Forger(kube, elsewhere, api, "maint", names)
    forger.start()
    try:
        wait_for(lambda: all(forger.made.values()) and forger.forged() >= 9, 60, "forged Jobs, active and finished")
        api.patch("maint", {"suspend": False})
        api.wait_status("maint", lambda d: d["status"].get("succeededNodes", 0) >= 1, "one node done", timeout=180)
        controller.restart()  # its caches listed anew, the forged Jobs among them
        with_them = _outcome(api, "maint", names)
        restarted = controller.metrics()
    finally:
        forger.stop()
    assert with_them == without
    assert all(watch.cordons[n] == 2 and watch.uncordons[n] == 2 for n in names), watch.summary()  # once a run
    assert audit_log.writes(user=SA_USER, namespace=elsewhere, since=mark) == []
    assert kube.get(path_for(API_VERSION, "daemonjobreports", elsewhere))["items"] == []
    assert (metric_value(restarted, FOREIGN, {"namespace": elsewhere}) or 0) >= 1
    logged = [
        line for line in controller.log_text().splitlines() if '"job_uid"' in line and "another namespace" in line
    ]
    by_uid: dict[str, int] = {}
    for line in logged:
        uid = json.loads(line)["job_uid"]
        by_uid[uid] = by_uid.get(uid, 0) + 1
    assert logged and max(by_uid.values()) <= 2, by_uid  # once by each of the two processes at most
    assert set(by_uid) <= forger.made["active"] | forger.made["finished"]
    assert all(job_node(j) in names for j in api.jobs("maint"))
