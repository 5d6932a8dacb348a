"""No node left held by a DaemonJob that is gone, with fakes: the finalizer reads the records
from the API server (a cordon the cache has not seen is released), keeps a node whose Job
still runs, the orphan sweep releases records whose DaemonJob no longer exists, a stop on
cordons holds them back, release-nodes releases everything, and the held-node gauge comes
from the Nodes' records."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timezone
from typing import Any

import pytest
import structlog

from daemonjob.controller.nodework.heldnodes import HELD_SINCE, HeldNodesCollector
from daemonjob.controller.nodework.keptdrains import KeptDrains
from daemonjob.controller.nodework.options import NodeMaintenanceOptions
from daemonjob.controller.nodework.orphans import SWEEP_KEY
from daemonjob.controller.nodework.work import NodeActs
from daemonjob.controller.passes.observe import Observation
from daemonjob.controller.runtime.informers import NODE_INDEXERS
from daemonjob.domain.nodework.maintenance import FINALIZER, Cordon, NodeWork
from daemonjob.domain.rollout.inputs import ConfigMapsRead
from daemonjob.domain.shared.noderecord import ANNOTATION_MAINTENANCE, DrainOutcome, NodeRecord, outcomes_of
from daemonjob.machinery.process.clock import FakeClock
from daemonjob.release import release_all
from daemonjob.testing.doubles.actbed import ActBed
from daemonjob.testing.doubles.builders import daemonjob, job, node
from daemonjob.testing.doubles.fakes import FakeInformer
from daemonjob.testing.doubles.nodefakes import FakeNodeControl

NS = "ops"
RECORD = NodeRecord(f"{NS}/upgrade", "uid-1", "r1", None, True, "2026-11-25T12:00:00Z")


def _held_node(name: str, record: NodeRecord = RECORD) -> dict[str, Any]:
    body = node(name)
    body["metadata"]["annotations"] = {ANNOTATION_MAINTENANCE: record.text()}
    body["spec"]["unschedulable"] = record.cordoned
    return body


def _maintained(deleting: bool = True) -> dict[str, Any]:
    dj = daemonjob("upgrade", namespace=NS, uid="uid-1")
    dj["spec"]["nodeMaintenance"] = {"cordon": True}
    dj["metadata"]["finalizers"] = [FINALIZER]
    dj["metadata"]["resourceVersion"] = "7"
    if deleting:
        dj["metadata"]["deletionTimestamp"] = "2026-11-25T12:05:00Z"
    return dj


@pytest.fixture
def control() -> FakeNodeControl:
    return FakeNodeControl({"a": _held_node("a")})


@pytest.fixture
def bed(control: FakeNodeControl) -> Iterator[ActBed]:
    bed = ActBed.start(node_control=control, node_maintenance=NodeMaintenanceOptions(frozenset({NS})))
    bed.nodes.add(node("a"))  # cached before the cordon: no record seen
    yield bed
    bed.stop()


def _uncordoned(control: FakeNodeControl, name: str) -> bool:
    body = control.nodes[name]
    return not body["spec"].get("unschedulable") and ANNOTATION_MAINTENANCE not in body["metadata"]["annotations"]


def test_a_deleted_daemonjob_releases_a_cordon_its_cache_has_not_seen(bed: ActBed, control: FakeNodeControl) -> None:
    bed.add_dj(_maintained())
    bed.ctl.reconcile(bed.key)
    assert _uncordoned(control, "a"), control.node_patches
    assert control.finalizers == [[]]
    assert control.node_lists == 1


def test_a_daemonjob_no_longer_asking_keeps_its_finalizer_until_the_cache_sees_its_record(
    bed: ActBed, control: FakeNodeControl
) -> None:
    dj = _maintained(deleting=False)
    del dj["spec"]["nodeMaintenance"]
    bed.add_dj(dj)
    bed.ctl.reconcile(bed.key)
    assert control.finalizers == [], "the finalizer went while a node still carried the record"
    assert not _uncordoned(control, "a")


def test_a_deleted_daemonjob_keeps_a_node_whose_job_still_runs(bed: ActBed, control: FakeNodeControl) -> None:
    dj = _maintained()
    bed.add_dj(dj)
    running = job(dj, "a")
    running["metadata"]["ownerReferences"] = []  # orphaned by --cascade=orphan: the label still names it
    bed.jobs.add(running)
    bed.ctl.reconcile(bed.key)
    assert not _uncordoned(control, "a") and control.finalizers == []
    assert bed.ready_within(10.5), "no look again while the node is kept"
    bed.jobs.update(job(dj, "a", "succeeded"))
    bed.ctl.reconcile(bed.key)
    assert _uncordoned(control, "a") and control.finalizers == [[]]
    assert control.node_lists == 1, "the Nodes listed again for the same deleted DaemonJob"


def test_the_sweep_releases_records_whose_daemonjob_is_gone(bed: ActBed, control: FakeNodeControl) -> None:
    other = NodeRecord(f"{NS}/kept", "uid-2", "r1", None, True, "2026-11-25T12:00:00Z")
    control.nodes["b"] = _held_node("b", other)
    control.daemonjobs[f"{NS}/kept"] = daemonjob("kept", namespace=NS, uid="uid-2")
    control.nodes["c"] = _held_node("c", NodeRecord("elsewhere/x", "uid-3", "r1"))  # any namespace's, cluster-wide
    for body in control.nodes.values():
        body["metadata"].setdefault("resourceVersion", "1")
    control.daemonjobs[f"{NS}/upgrade"] = daemonjob("upgrade", namespace=NS, uid="uid-0")  # a namesake: not it
    bed.ctl.reconcile(SWEEP_KEY)
    assert _uncordoned(control, "a") and _uncordoned(control, "c")
    assert not _uncordoned(control, "b")
    assert bed.ctl.metrics.registry.get_sample_value("daemonjob_orphaned_node_records_released_total") == 2


def _queued(bed: ActBed) -> list[str]:
    keys = []
    while len(bed.ctl.queue):
        key, _ = bed.ctl.queue.get()
        keys.append(str(key))
        bed.ctl.queue.done(key)
    return keys


def test_the_sweep_runs_at_start_up_and_after_a_delete(bed: ActBed, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bed.ctl.threads, "start", lambda loops=(): None)  # the queue, not the workers
    bed.ctl.start_workers()
    assert SWEEP_KEY in _queued(bed)
    bed.add_dj(_maintained())
    _queued(bed)
    bed.djs.delete(bed.key)
    assert SWEEP_KEY in _queued(bed)


def test_no_sweep_without_node_maintenance() -> None:
    bed = ActBed.start(node_control=FakeNodeControl())
    try:
        assert bed.ctl.orphans is None
    finally:
        bed.stop()


def test_a_stop_on_cordons_holds_them_back_and_the_finalizer() -> None:
    control = FakeNodeControl({"a": {"metadata": {"name": "a"}, "spec": {}}})
    acts = NodeActs(control, KeptDrains(), FakeClock(), cordons_stopped=lambda: "being removed")
    dj = daemonjob("upgrade", namespace=NS, uid="uid-1")
    dj["metadata"]["resourceVersion"] = "5"
    seen = Observation(f"{NS}/upgrade", dj, dj, {}, ConfigMapsRead(), None, structlog.get_logger())
    acted = acts.carry(seen, NodeWork(cordons=[Cordon("a", RECORD)], add_finalizer=True), None)
    assert control.node_patches == [] and acted.cordoned == [] and control.finalizers == []
    assert acted.look_again is not None


def test_release_all_releases_every_node_and_removes_every_finalizer() -> None:
    theirs = NodeRecord("infra/audit", "uid-9", "r1", None, False, "2026-11-25T12:00:00Z")
    control = FakeNodeControl({"a": _held_node("a"), "b": _held_node("b", theirs), "c": node("c")})
    done = release_all(control, lambda: [_maintained(deleting=False), daemonjob("plain", namespace=NS)])
    assert (done.nodes, done.uncordoned, done.finalizers) == (2, 1, 1)
    assert _uncordoned(control, "a")
    assert control.nodes["b"]["spec"]["unschedulable"] is False  # recorded as someone else's cordon: left
    assert control.finalizers == [[]]


def test_the_held_node_gauge_comes_from_the_nodes() -> None:
    nodes = FakeInformer("nodes", indexers=NODE_INDEXERS)
    nodes.add(_held_node("a"))
    nodes.add(node("b"))
    (family,) = list(HeldNodesCollector(nodes).collect())
    assert family.name == HELD_SINCE
    ((labels, value),) = [(s.labels, s.value) for s in family.samples]
    assert labels == {"node": "a", "namespace": NS, "name": "upgrade", "cordoned": "true"}
    assert value == datetime(2026, 11, 25, 12, tzinfo=timezone.utc).timestamp()


def test_the_sweep_removes_a_gone_daemonjobs_drain_outcomes(bed: ActBed, control: FakeNodeControl) -> None:
    gone = DrainOutcome(f"{NS}/upgrade", "uid-1", "r1", None, "Skip")
    alive = DrainOutcome(f"{NS}/kept", "uid-2", "r1", None, "Fail")
    body = node("d")
    body["metadata"].update(annotations={o.annotation: o.text() for o in (gone, alive)}, resourceVersion="1")
    control.nodes["d"] = body
    control.daemonjobs[f"{NS}/kept"] = daemonjob("kept", namespace=NS, uid="uid-2")
    bed.ctl.reconcile(SWEEP_KEY)
    assert outcomes_of(control.nodes["d"]) == [alive]
    assert _uncordoned(control, "a")  # the record of the same gone DaemonJob, on another node
