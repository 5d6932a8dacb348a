"""A Job is a DaemonJob's only in the DaemonJob's namespace: a Job elsewhere carrying its uid
(labels, node annotation and all) is ignored by every consumer, counted once and logged once."""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pytest
from structlog.testing import capture_logs

from daemonjob.controller.order.succeeded import SucceededNodes
from daemonjob.controller.runtime.informers import JOB_INDEXERS, NODE_INDEX, OWNER_INDEX, RUNNING_INDEX
from daemonjob.controller.runtime.ownership import ForeignJobs
from daemonjob.domain.jobs.owners import job_owner_id, owner_id
from daemonjob.domain.shared.apinames import ANNOTATION_NODE
from daemonjob.machinery.cache.store import Store
from daemonjob.testing.doubles.actbed import ActBed
from daemonjob.testing.doubles.builders import NS, UID, daemonjob, job, revision_of
from daemonjob.testing.doubles.fakes import fake_informers

KEY = f"{NS}/audit"
ELSEWHERE = "aaa"  # sorts before the DaemonJob's namespace
FOREIGN = "daemonjob_foreign_owner_jobs_total"


def forged(real: Mapping[str, Any], namespace: str = ELSEWHERE) -> dict[str, Any]:
    """`real` as anyone who may create Jobs in `namespace` can write it: its owner reference,
    labels and node annotation, in another namespace."""
    body = copy.deepcopy(dict(real))
    body["metadata"]["namespace"] = namespace
    body["metadata"]["uid"] = f"forged-{body['metadata'].get('uid') or body['metadata']['name']}"
    return body


def test_the_job_indexes_key_a_job_by_its_namespace_and_its_owners_uid() -> None:
    dj = daemonjob()
    store = Store(JOB_INDEXERS)
    real, fake = job(dj, "node-00"), forged(job(dj, "node-00"))
    store.add(real)
    store.add(fake)
    assert job_owner_id(real) == owner_id(NS, UID) and job_owner_id(fake) == owner_id(ELSEWHERE, UID)
    for index in (OWNER_INDEX, RUNNING_INDEX):
        assert [j["metadata"]["uid"] for j in store.by_index(index, owner_id(NS, UID))] == [real["metadata"]["uid"]]
    assert [j["metadata"]["uid"] for j in store.by_index(NODE_INDEX, "node-00", owner_id(NS, UID))] == [
        real["metadata"]["uid"]
    ]


def test_a_foreign_job_is_told_apart_counted_once_and_logged_once() -> None:
    djs = fake_informers().daemonjobs
    counted: list[str] = []
    foreign = ForeignJobs(djs, counted.append)
    dj = daemonjob()
    real, fake = job(dj, "node-00"), forged(job(dj, "node-00"))
    assert not foreign.foreign(fake)  # its DaemonJob not cached yet: nothing to tell it apart by
    djs.add(dj)
    with capture_logs() as logs:
        assert all(foreign.foreign(fake) for _ in range(3))  # an update, a relist: the same Job
        assert not foreign.foreign(real)
        orphan = job(dj, "node-01")
        orphan["metadata"]["ownerReferences"] = []
        assert not foreign.foreign(orphan)
    assert counted == [ELSEWHERE]
    assert [(entry["namespace"], entry["name"], entry["job"]) for entry in logs] == [
        (NS, "audit", f"{ELSEWHERE}/{fake['metadata']['name']}")
    ]


def rollout(bed: ActBed, forge: bool) -> tuple[list[tuple[str, str, str]], list[dict[str, Any]]]:
    """A rollout over three nodes, one at a time, to the end; with `forge`, forged Jobs of the
    DaemonJob in another namespace (active, succeeded, failed, an older revision's, one with
    no controller) are in the cache from the start and come again after each pass. What was
    written (creates, deletes, adoptions, status), in order."""
    bed.add_nodes(3)
    dj = daemonjob(maxParallel=1, historyLimit=0)
    bed.add_dj(dj)
    fakes = [
        forged(job(dj, "node-00", "active")),
        forged(job(dj, "node-01", "succeeded")),
        forged(job(dj, "node-02", "failed")),
        forged(job(dj, "node-01", "succeeded", revision="older")),
    ]
    orphan = forged(job(dj, "node-02", "active"))  # no controller: one the DaemonJob would adopt in its namespace
    orphan["metadata"]["ownerReferences"] = []
    fakes.append(orphan)
    for _ in range(6):
        for fake in fakes if forge else ():
            bed.jobs.add(fake)
        bed.ctl.reconcile(KEY)
        bed.sync()
        bed.finish_jobs()
        bed.sync()
    writes = [(c.verb, c.namespace, c.name) for c in bed.control.calls if c.verb in ("create", "delete", "adopt")]
    return writes, bed.statuses()


def test_forged_jobs_leave_the_rollout_its_status_and_its_history_as_without_them() -> None:
    clean, with_forged = ActBed.start(), ActBed.start()
    try:
        expected, got = rollout(clean, forge=False), rollout(with_forged, forge=True)
        assert len(expected[0]) == 3 and expected[1][-1]["succeededNodes"] == 3
        assert got == expected
        assert with_forged.ctl.metrics.registry.get_sample_value(FOREIGN, {"namespace": ELSEWHERE}) == 4
    finally:
        clean.stop()
        with_forged.stop()


@pytest.fixture
def bed() -> Iterator[ActBed]:
    bed = ActBed.start()
    yield bed
    bed.stop()


def test_a_forged_job_satisfies_no_expectation_marks_no_node_and_wakes_no_one(bed: ActBed) -> None:
    bed.add_nodes(2)
    bed.add_dj(daemonjob())
    bed.ctl.reconcile(KEY)  # two creates expected, not in the cache yet
    bed.drain()
    for call in bed.control.of("create"):
        fake = forged(call.body)
        bed.jobs.add(fake)  # the very names the DaemonJob waits for
        bed.jobs.update({**fake, "status": {"active": 1}})
        bed.jobs.delete(fake)
    assert not bed.ctl.expectations.satisfied(UID)
    assert not bed.ctl.plans.marked(UID)
    bed.nodes.update({**bed.nodes.store.get("node-00"), "spec": {"unschedulable": True}})  # type: ignore[dict-item]
    bed.settle()
    queued = set()
    while len(bed.ctl.queue):
        key, _ = bed.ctl.queue.get()
        queued.add(key)
        bed.ctl.queue.done(key)
    assert f"{ELSEWHERE}/audit" not in queued


def test_where_a_daemonjob_succeeded_counts_no_forged_job() -> None:
    dj = daemonjob()
    store = Store(JOB_INDEXERS)
    store.add(job(dj, "node-00", "succeeded"))
    store.add(forged(job(dj, "node-01", "succeeded")))
    kept = SucceededNodes(lambda owner: store.by_index(OWNER_INDEX, owner), lambda _ns, _name: True)
    revision = revision_of(dj)
    assert kept.nodes(dj, revision, None) == {"node-00"}
    kept.job_changed(None, forged(job(dj, "node-02", "succeeded")))  # an event the router let through
    assert kept.nodes(dj, revision, None) == {"node-00"}


class Reports:
    """Report storage keeping what is written, by namespace."""

    def __init__(self) -> None:
        self.reports: list[tuple[str, dict[str, Any]]] = []

    def may_write(self) -> bool:
        return True

    def list_reports(self, namespace: str, daemonjob: str) -> list[Mapping[str, Any]]:
        return [r for ns, r in self.reports if ns == namespace]

    def list_pods(self, namespace: str, job_uids: Sequence[str]) -> list[Mapping[str, Any]]:
        return []

    def create_report(self, namespace: str, body: Mapping[str, Any]) -> Mapping[str, Any]:
        made = {**body, "metadata": {**body["metadata"], "creationTimestamp": "2026-01-01T00:00:00Z"}}
        self.reports.append((namespace, made))
        return made

    def append(self, namespace: str, name: str, patch: Sequence[Mapping[str, Any]]) -> None:
        raise AssertionError("one chunk is enough here")

    def delete_report(self, namespace: str, name: str) -> None:
        pass


def test_a_forged_finished_job_noted_first_neither_takes_nor_blocks_the_results() -> None:
    """Noted before the DaemonJob is cached (a restart: the Jobs list first), a forged finished
    Job is filed under its own namespace; the DaemonJob's results are written where it lives,
    and the forged Job is let go once the cache tells it apart."""
    store = Reports()
    bed = ActBed.start(result_store=store)
    try:
        rec = bed.ctl.results
        assert rec is not None
        bed.add_nodes(2)
        dj = daemonjob()
        fake = forged(job(dj, "node-00", "succeeded"))
        bed.jobs.add(fake)  # before the DaemonJob is cached
        bed.add_dj(dj)
        bed.ctl.reconcile(KEY)
        bed.sync()
        bed.finish_jobs()
        bed.sync()
        for _ in range(3):
            rec.flush_due(rec._due(bed.clock.now() + 3600)[0])
        assert [ns for ns, _ in store.reports] == [NS]
        recorded = [(r["node"], r["jobUID"]) for _, report in store.reports for r in report["results"]]
        real = {f"{NS}/{j['metadata']['name']}": j for j in bed.control.objects.values()}
        assert sorted(recorded) == sorted(
            (j["metadata"]["annotations"][ANNOTATION_NODE], j["metadata"]["uid"]) for j in real.values()
        )
        assert not rec.holds(fake["metadata"]["uid"])
        bed.jobs.update({**fake, "metadata": {**fake["metadata"], "resourceVersion": "2"}})  # seen again: not noted
        assert not rec.holds(fake["metadata"]["uid"])
    finally:
        bed.stop()


def test_the_plugin_reads_a_daemonjobs_jobs_and_pods_in_its_namespace_only() -> None:
    """`kubectl daemonjob` (status, wait, logs, results, plan) reads them with these lists: a
    forged Job elsewhere is never in what it shows."""
    from daemonjob.kubectl.cluster import client

    paths: list[str] = []

    class Kube:
        def get(self, path: str, **params: Any) -> dict[str, Any]:
            paths.append(path)
            return {"items": []}

    target = client.Target(Kube(), NS)  # type: ignore[arg-type]
    client.list_jobs(target, "audit")
    client.list_pods(target, "audit")
    assert paths == [f"/apis/batch/v1/namespaces/{NS}/jobs", f"/api/v1/namespaces/{NS}/pods"]
