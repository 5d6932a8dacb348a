"""The read-check-patch loops of node maintenance on a Node (or DaemonJob, or Lease) someone
else keeps writing: each write lost to a race is decided again on a fresh read, and a race
that goes on ends in each place's own words (or, for a cordon, a look again at once)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime, timezone
from typing import Any

import pytest
import structlog

from daemonjob import defaults
from daemonjob.controller.nodework.cordonstop import STOP_ANNOTATION, stop_cordons
from daemonjob.controller.nodework.keptdrains import KeptDrains
from daemonjob.controller.nodework.recordwrites import keep_node
from daemonjob.controller.nodework.work import NodeActs, release_node
from daemonjob.controller.passes.observe import Observation
from daemonjob.domain.nodework.maintenance import FINALIZER, Cordon, NodeWork
from daemonjob.domain.rollout.inputs import ConfigMapsRead
from daemonjob.domain.shared.noderecord import ANNOTATION_MAINTENANCE, NodeRecord
from daemonjob.machinery.client.kube import ApiError
from daemonjob.machinery.process.clock import FakeClock
from daemonjob.release import release_all
from daemonjob.testing.doubles.builders import daemonjob, node
from daemonjob.testing.doubles.nodefakes import FakeNodeControl

RECORD = NodeRecord("ops/upgrade", "uid-1", "r1", None, True, "2026-11-25T12:00:00Z")
FOREVER = 1000


class Racing(FakeNodeControl):
    """Someone else writes each Node (and DaemonJob) between our read and our write, `races` times."""

    def __init__(self, nodes: Mapping[str, dict[str, Any]], races: int) -> None:
        super().__init__(nodes)
        self.races, self.node_reads = races, 0

    def get_node(self, name: str) -> Mapping[str, Any]:
        self.node_reads += 1
        return super().get_node(name)

    def patch_node(self, name: str, patch: Mapping[str, Any], resource_version: str) -> None:
        if self.races:
            self.races -= 1
            meta = self.nodes[name]["metadata"]
            meta["resourceVersion"] = str(int(meta["resourceVersion"]) + 1)  # a kubelet's heartbeat
        super().patch_node(name, patch, resource_version)

    def set_finalizers(self, namespace: str, name: str, finalizers: list[str], resource_version: str) -> None:
        if self.races:
            self.races -= 1
            raise ApiError(409, "Conflict", "the object has been modified")
        super().set_finalizers(namespace, name, finalizers, resource_version)


def _held(name: str, record: NodeRecord = RECORD) -> dict[str, Any]:
    body = node(name, unschedulable=record.cordoned)
    body["metadata"]["annotations"] = {ANNOTATION_MAINTENANCE: record.text()}
    return body


def _seen() -> Observation:
    dj = daemonjob("upgrade", namespace="ops", uid="uid-1")
    dj["metadata"]["resourceVersion"] = "5"
    return Observation("ops/upgrade", dj, dj, {}, ConfigMapsRead(), None, structlog.get_logger())


def test_a_release_is_decided_again_on_each_fresh_read_until_it_lands() -> None:
    control = Racing({"a": _held("a")}, races=2)
    assert release_node(control, "a", RECORD) is True
    assert control.node_reads == 3 and len(control.node_patches) == 1
    assert not control.nodes["a"]["spec"].get("unschedulable")


def test_a_release_that_keeps_losing_says_it_is_retried() -> None:
    control = Racing({"a": _held("a")}, races=FOREVER)
    with pytest.raises(ApiError) as raised:
        release_node(control, "a", RECORD)
    assert (raised.value.status, raised.value.message) == (409, "node a kept changing; its release is retried")
    assert control.node_reads == defaults.CONFLICT_RETRY_STEPS and control.node_patches == []


def test_a_keep_that_keeps_losing_says_it_is_retried() -> None:
    control = Racing({"a": _held("a")}, races=FOREVER)
    with pytest.raises(ApiError) as raised:
        keep_node(control, "a", replace(RECORD, kept=True))
    assert raised.value.conflict and raised.value.message == "node a kept changing; keeping it cordoned is retried"
    assert control.node_reads == defaults.CONFLICT_RETRY_STEPS


def test_a_cordon_that_keeps_losing_is_looked_at_again_at_once_with_no_error() -> None:
    control = Racing({"a": node("a")}, races=FOREVER)
    acted = NodeActs(control, KeptDrains(), FakeClock()).carry(_seen(), NodeWork(cordons=[Cordon("a", RECORD)]), None)
    assert acted.cordoned == [] and acted.errors == [] and acted.look_again == 0.0
    assert control.node_reads == defaults.CONFLICT_RETRY_STEPS and control.node_patches == []


def test_a_cordon_lands_after_a_race() -> None:
    control = Racing({"a": node("a")}, races=1)
    acted = NodeActs(control, KeptDrains(), FakeClock()).carry(_seen(), NodeWork(cordons=[Cordon("a", RECORD)]), None)
    assert acted.cordoned == ["a"] and control.nodes["a"]["spec"]["unschedulable"] is True


def _maintained() -> dict[str, Any]:
    dj = daemonjob("upgrade", namespace="ops", uid="uid-1")
    dj["metadata"]["finalizers"] = [FINALIZER]
    dj["metadata"]["resourceVersion"] = "7"
    return dj


def test_release_nodes_reads_a_daemonjob_again_after_a_race_and_names_one_that_keeps_changing() -> None:
    control = Racing({}, races=1)
    control.daemonjobs["ops/upgrade"] = _maintained()
    assert release_all(control, lambda: [_maintained()]).finalizers == 1
    assert control.finalizers == [[]]
    racing = Racing({}, races=FOREVER)
    racing.daemonjobs["ops/upgrade"] = _maintained()
    with pytest.raises(ApiError) as raised:
        release_all(racing, lambda: [_maintained()])
    assert raised.value.message == "DaemonJob ops/upgrade kept changing; run release-nodes again"


class LeaseKube:
    """GET/PUT/POST of one Lease; the holder renews it between our read and our write `races` times."""

    def __init__(self, lease: dict[str, Any] | None, races: int) -> None:
        self.lease, self.races, self.writes = lease, races, 0

    def get(self, path: str) -> dict[str, Any]:
        if self.lease is None:
            raise ApiError(404, "NotFound", "leases not found")
        return {**self.lease, "metadata": dict(self.lease["metadata"])}

    def _race(self) -> None:
        if self.races:
            self.races -= 1
            if self.lease is None:  # the holder created it first
                self.lease = {"metadata": {"name": "lease", "resourceVersion": "1"}, "spec": {}}
                raise ApiError(409, "AlreadyExists", "leases already exists")
            self.lease["metadata"]["resourceVersion"] += "1"
            raise ApiError(409, "Conflict", "the object has been modified")

    def put(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        self._race()
        self.writes += 1
        self.lease = body
        return body

    def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        self._race()
        self.writes += 1
        self.lease = body
        return body


UNTIL = datetime(2026, 11, 26, 12, tzinfo=timezone.utc)


def test_the_stop_on_cordons_lands_after_the_holder_created_and_renewed_the_lease() -> None:
    kube = LeaseKube(None, races=2)
    stop_cordons(kube, "ns", "lease", UNTIL)  # type: ignore[arg-type]
    assert kube.writes == 1 and kube.lease is not None
    assert kube.lease["metadata"]["annotations"][STOP_ANNOTATION] == "2026-11-26T12:00:00Z"


def test_a_stop_on_cordons_that_keeps_losing_names_the_lease() -> None:
    kube = LeaseKube({"metadata": {"name": "lease", "resourceVersion": "1"}, "spec": {}}, races=FOREVER)
    with pytest.raises(ApiError) as raised:
        stop_cordons(kube, "ns", "lease", UNTIL)  # type: ignore[arg-type]
    assert (raised.value.status, raised.value.message) == (409, "the Lease ns/lease kept changing")
    assert kube.writes == 0
