"""Drain timeouts past the status's lists: 1500 nodes whose drains all time out are each
released once, never drained again (not after a restart either), and the DaemonJob settles
instead of being looked at again and again. The controller runs on fakes (the act layer's
informers, a FakeNodeControl whose Nodes the node cache is fed from)."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta
from typing import Any

from daemonjob.controller.nodework.options import NodeMaintenanceOptions
from daemonjob.controller.runtime.errors import ReconcileError
from daemonjob.domain.nodework.maintenance import FINALIZER
from daemonjob.domain.shared.noderecord import ANNOTATION_MAINTENANCE
from daemonjob.testing.doubles.actbed import ActBed
from daemonjob.testing.doubles.builders import NS, daemonjob, node
from daemonjob.testing.doubles.nodefakes import FakeNodeControl

NODES = 1500
PASSES_MAX = 10  # passes to settle once the drains time out (today's code never settles)


def _pod(on: str) -> dict[str, Any]:
    meta = {"name": f"web-{on}", "namespace": "app", "uid": f"uid-web-{on}"}
    meta["ownerReferences"] = [{"kind": "ReplicaSet", "name": "web", "controller": True}]
    return {"metadata": meta, "spec": {"nodeName": on}, "status": {"phase": "Running"}}


def _cluster() -> FakeNodeControl:
    """Every node runs a pod whose PodDisruptionBudget refuses its eviction: no drain ends."""
    names = [f"node-{i:04d}" for i in range(NODES)]
    control = FakeNodeControl({n: node(n) for n in names}, {n: [_pod(n)] for n in names})
    control.refuse = {f"web-{n}": "app/web" for n in names}
    return control


def _start(control: FakeNodeControl) -> ActBed:
    # every node at once: no cluster-wide limit here (it has tests of its own)
    bed = ActBed.start(
        node_control=control, node_maintenance=NodeMaintenanceOptions(frozenset({NS}), max_unavailable_nodes=None)
    )
    for body in control.nodes.values():
        bed.nodes.add(body)
    return bed


def _settle(bed: ActBed, control: FakeNodeControl, seen: dict[str, str]) -> int:
    """Passes until the DaemonJob is not due again; the caches catch up after each (the Nodes
    written, the status, the finalizer). Returns the number of passes, PASSES_MAX + 1 if it never settles."""
    for passes in range(1, PASSES_MAX + 2):
        bed.drain()
        try:
            bed.ctl.reconcile(bed.key)
        except ReconcileError:
            pass
        bed.sync()
        if control.finalizers and FINALIZER not in (bed.dj()["metadata"].get("finalizers") or ()):
            dj = bed.dj()
            dj["metadata"]["finalizers"] = control.finalizers[-1]
            bed.djs.update(dj)
        for name, body in control.nodes.items():
            rv = body["metadata"]["resourceVersion"]
            if seen.get(name) != rv:
                seen[name] = rv
                bed.nodes.update(body)
        if not bed.ready_within(0.1):  # due again: a Node event, or a pass asked for at once (10 ms)
            return passes
    return PASSES_MAX + 1


def _written(control: FakeNodeControl) -> tuple[Counter[str], Counter[str]]:
    """Per node: how many cordons, how many releases were written."""
    cordons: Counter[str] = Counter()
    releases: Counter[str] = Counter()
    for name, patch in control.node_patches:
        annotations = (patch.get("metadata") or {}).get("annotations") or {}
        if ANNOTATION_MAINTENANCE not in annotations:
            continue
        (releases if annotations[ANNOTATION_MAINTENANCE] is None else cordons)[name] += 1
    return cordons, releases


def test_1500_timed_out_drains_are_each_released_once_and_the_controller_settles() -> None:
    control = _cluster()
    bed = _start(control)
    seen: dict[str, str] = {}
    try:
        dj = daemonjob(
            maxParallel="100%",
            nodeMaintenance={"cordon": True, "drain": {"timeout": "1m", "onTimeout": "Skip"}},
        )
        bed.add_dj(dj)
        assert _settle(bed, control, seen) <= PASSES_MAX
        cordons, releases = _written(control)
        assert len(cordons) == NODES and not releases, "every node cordoned, its drain refused"
        bed.clock.step(timedelta(minutes=2).total_seconds())
        passes = _settle(bed, control, seen)
        cordons, releases = _written(control)
        assert passes <= 3, f"{passes} passes: the release, then one for the 1500 Node events at most"
        assert set(releases) == set(cordons) and set(releases.values()) == {1}, "each node released once"
        assert not any(n["spec"].get("unschedulable") for n in control.nodes.values())
        status = bed.dj()["status"]
        assert status["nodeMaintenance"]["cordonedNodes"] == 0
        assert len(status["nodeMaintenance"]["skippedNodes"]) == 1000, "the status lists the first 1000"
        # later passes (a resync) drain nothing again
        bed.clock.step(60)
        _settle(bed, control, seen)
        assert _written(control) == (cordons, releases)
    finally:
        bed.stop()
    # a restarted controller reads the outcomes from the Nodes: nothing is cordoned again
    restarted = _start(control)
    try:
        restarted.add_dj(bed.dj())
        _settle(restarted, control, {})
        assert _written(control) == (cordons, releases)
    finally:
        restarted.stop()


def test_a_deleted_daemonjob_leaves_no_drain_outcome_on_its_nodes() -> None:
    from daemonjob.domain.shared.noderecord import DrainOutcome, outcomes_of

    mine = DrainOutcome(f"{NS}/audit", "dj-uid", "r1", None, "Skip")
    theirs = DrainOutcome(f"{NS}/other", "other-uid", "r1", None, "Fail")
    body = node("a")
    body["metadata"]["annotations"] = {o.annotation: o.text() for o in (mine, theirs)}
    control = FakeNodeControl({"a": body})
    bed = _start(control)
    try:
        dj = daemonjob(nodeMaintenance={"cordon": True})
        dj["metadata"].update(finalizers=[FINALIZER], deletionTimestamp="2026-11-25T12:00:00Z")
        bed.add_dj(dj)
        bed.ctl.reconcile(bed.key)
        assert outcomes_of(control.nodes["a"]) == [theirs], "its own outcome goes, another DaemonJob's stays"
        assert control.finalizers == [[]]
    finally:
        bed.stop()
