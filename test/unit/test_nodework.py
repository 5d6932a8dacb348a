"""The act layer of node maintenance with a fake NodeControl: what a cordon, a drain and a
release write, and what they refuse to write."""

from __future__ import annotations

from typing import Any

import structlog

from daemonjob.controller.keptdrains import KeptDrains
from daemonjob.controller.nodework import NodeActs, pods_to_evict, release_node
from daemonjob.controller.observe import Observation
from daemonjob.domain.inputs import ConfigMapsRead
from daemonjob.domain.maintenance import Cordon, DrainNode, NodeWork, Release
from daemonjob.domain.maintenancespec import DrainOptions
from daemonjob.domain.noderecord import ANNOTATION_MAINTENANCE, NodeRecord
from daemonjob.domain.selectors import compile_label_selector
from daemonjob.machinery.clock import FakeClock
from daemonjob.testing.builders import daemonjob
from daemonjob.testing.fakes import FakeNodeControl

RECORD = NodeRecord("ns/dj", "uid-1", "r1", None, True, "2026-11-25T12:00:00Z")


def _seen() -> Observation:
    dj = daemonjob("dj", namespace="ns", uid="uid-1")
    dj["metadata"]["resourceVersion"] = "5"
    return Observation("ns/dj", dj, dj, {}, ConfigMapsRead(), None, structlog.get_logger())


def _pod(name: str, *, owner: str | None = "ReplicaSet", **extra: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "app", "uid": f"uid-{name}", "labels": extra.pop("labels", {})}
    if owner:
        meta["ownerReferences"] = [{"kind": owner, "name": "o", "controller": True}]
    meta.update(extra.pop("meta", {}))
    return {"metadata": meta, "spec": extra.pop("spec", {}), "status": {"phase": extra.pop("phase", "Running")}}


def _acts(control: FakeNodeControl) -> NodeActs:
    return NodeActs(control, KeptDrains(), FakeClock())


def test_pods_left_alone_and_pods_waiting_for_an_opt_in() -> None:
    pods = [
        _pod("web"),
        _pod("ds", owner="DaemonSet"),
        _pod("mirror", meta={"annotations": {"kubernetes.io/config.mirror": "x"}}),
        _pod("done", phase="Succeeded"),
        _pod("bare", owner=None),
        _pod("cache", spec={"volumes": [{"name": "c", "emptyDir": {}}]}),
        _pod("keep", labels={"keep": "yes"}),
        _pod("going", meta={"deletionTimestamp": "2026-11-25T12:00:00Z"}),
    ]
    drain = DrainOptions(ignore_pods=compile_label_selector({"matchLabels": {"keep": "yes"}}))
    verdicts = pods_to_evict(pods, drain, "ns", "dj")
    assert [p["metadata"]["name"] for p in verdicts.evict] == ["web"]
    assert verdicts.waiting == ["app/web", "app/bare", "app/cache", "app/going"]
    assert any("app/bare is not managed" in b for b in verdicts.blocked)
    assert any("app/cache has emptyDir" in b for b in verdicts.blocked)
    opted_in = pods_to_evict(pods, DrainOptions(force=True, delete_emptydir_data=True), "ns", "dj")
    assert sorted(p["metadata"]["name"] for p in opted_in.evict) == ["bare", "cache", "keep", "web"]


def test_a_cordon_writes_the_record_with_it_and_never_takes_someone_elses_cordon_as_ours() -> None:
    control = FakeNodeControl(
        {
            "a": {"metadata": {"name": "a"}, "spec": {}},
            "b": {"metadata": {"name": "b"}, "spec": {"unschedulable": True}},
        }
    )
    work = NodeWork(cordons=[Cordon("a", RECORD), Cordon("b", RECORD)])
    acted = _acts(control).carry(_seen(), work, None)
    assert acted.cordoned == ["a", "b"] and not acted.errors
    a, b = control.nodes["a"], control.nodes["b"]
    assert (
        a["spec"]["unschedulable"] is True
        and NodeRecord.parse(a["metadata"]["annotations"][ANNOTATION_MAINTENANCE]).cordoned
    )
    assert not NodeRecord.parse(b["metadata"]["annotations"][ANNOTATION_MAINTENANCE]).cordoned
    assert all("unschedulable" not in patch.get("spec", {}) for name, patch in control.node_patches if name == "b")
    # released: the record goes from both, only ours is uncordoned
    assert release_node(control, "a", NodeRecord.parse(a["metadata"]["annotations"][ANNOTATION_MAINTENANCE])) is True
    assert release_node(control, "b", NodeRecord.parse(b["metadata"]["annotations"][ANNOTATION_MAINTENANCE])) is False
    assert "unschedulable" not in control.nodes["a"]["spec"] and control.nodes["b"]["spec"]["unschedulable"] is True
    assert ANNOTATION_MAINTENANCE not in control.nodes["b"]["metadata"]["annotations"]


def test_a_node_held_by_another_record_is_not_cordoned_nor_released() -> None:
    other = NodeRecord("ns/other", "uid-2", "r9")
    control = FakeNodeControl(
        {
            "a": {
                "metadata": {"name": "a", "annotations": {ANNOTATION_MAINTENANCE: other.text()}},
                "spec": {"unschedulable": True},
            }
        }
    )
    acted = _acts(control).carry(
        _seen(), NodeWork(cordons=[Cordon("a", RECORD)], releases=[Release("a", RECORD, "x")]), None
    )
    assert acted.cordoned == [] and acted.released == [] and control.node_patches == []


def test_a_drain_evicts_reports_the_pdb_and_is_done_once_the_pods_are_gone() -> None:
    control = FakeNodeControl(
        {"a": {"metadata": {"name": "a"}, "spec": {"unschedulable": True}}}, {"a": [_pod("web"), _pod("db")]}
    )
    control.refuse["db"] = "app/db-pdb"
    acts = _acts(control)
    seen = _seen()
    acted = acts.carry(seen, NodeWork(drains=[DrainNode("a", RECORD)]), DrainOptions())
    assert control.evicted == ["app/web"] and acted.refused_evictions == 1
    progress = acts.drains.of("uid-1")["a"]
    # an evicted pod is waited for until the API server no longer has it
    assert not progress.drained and progress.waiting == ("app/web", "app/db") and "app/db-pdb" in progress.blocked
    assert [e.reason for e in acted.events] == ["EvictionRefused"]
    again = acts.carry(seen, NodeWork(drains=[DrainNode("a", RECORD)]), DrainOptions())
    assert acts.drains.of("uid-1")["a"].waiting == ("app/db",)
    assert again.events == [], "the same refusal is said once"
    del control.refuse["db"]
    acts.carry(seen, NodeWork(drains=[DrainNode("a", RECORD)]), DrainOptions())  # evicted now, gone at the next look
    done = acts.carry(seen, NodeWork(drains=[DrainNode("a", RECORD)]), DrainOptions())
    assert acts.drains.of("uid-1")["a"].drained and [e.reason for e in done.events] == ["Drained"]
    assert done.look_again == 0.0


def test_the_finalizer_comes_before_the_first_cordon() -> None:
    control = FakeNodeControl({"a": {"metadata": {"name": "a"}, "spec": {}}})
    _acts(control).carry(_seen(), NodeWork(cordons=[Cordon("a", RECORD)], add_finalizer=True), None)
    assert control.finalizers == [["daemonjob.io/node-maintenance"]] and control.node_patches


class _Discovery:
    """The policy group as a server of one version or another answers its discovery."""

    def __init__(self, versions: list[str]) -> None:
        self.versions = versions
        self.created: list[tuple[str, dict[str, Any]]] = []

    def get(self, path: str, **params: Any) -> dict[str, Any]:
        assert path == "/apis/policy"
        return {"versions": [{"version": v} for v in self.versions]}

    def create(self, path: str, body: dict[str, Any], **kw: Any) -> dict[str, Any]:
        self.created.append((path, body))
        return body


def test_evictions_use_the_newest_version_the_server_offers() -> None:
    from daemonjob.controller.nodecontrol import KubeNodeControl

    for versions, expected in ((["v1beta1"], "policy/v1beta1"), (["v1", "v1beta1"], "policy/v1")):
        kube = _Discovery(versions)
        KubeNodeControl(kube).evict("app", "web", "uid-web", 30)
        ((path, body),) = kube.created
        assert path == "/api/v1/namespaces/app/pods/web/eviction"
        assert body["apiVersion"] == expected and body["deleteOptions"] == {
            "gracePeriodSeconds": 30,
            "preconditions": {"uid": "uid-web"},
        }
