"""The act layer of node maintenance with a fake NodeControl: what a cordon, a drain and a
release write, and what they refuse to write."""

from __future__ import annotations

from typing import Any

import structlog

from daemonjob.controller.nodework.keptdrains import KeptDrains
from daemonjob.controller.nodework.work import NodeActs, release_node
from daemonjob.controller.passes.observe import Observation
from daemonjob.domain.nodework.drainpods import pods_to_evict
from daemonjob.domain.nodework.maintenance import Cordon, DrainNode, NodeWork, Release
from daemonjob.domain.rollout.inputs import ConfigMapsRead
from daemonjob.domain.shared.noderecord import ANNOTATION_MAINTENANCE, NodeRecord
from daemonjob.domain.spec.maintenancespec import DrainOptions
from daemonjob.domain.spec.selectors import compile_label_selector
from daemonjob.machinery.process.clock import FakeClock
from daemonjob.testing.doubles.builders import daemonjob
from daemonjob.testing.doubles.nodefakes import FakeNodeControl

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
    from daemonjob.controller.nodework.nodecontrol import KubeNodeControl

    for versions, expected in ((["v1beta1"], "policy/v1beta1"), (["v1", "v1beta1"], "policy/v1")):
        kube = _Discovery(versions)
        KubeNodeControl(kube).evict("app", "web", "uid-web", 30)
        ((path, body),) = kube.created
        assert path == "/api/v1/namespaces/app/pods/web/eviction"
        assert body["apiVersion"] == expected and body["deleteOptions"] == {
            "gracePeriodSeconds": 30,
            "preconditions": {"uid": "uid-web"},
        }


def test_the_drain_waits_for_the_pods_it_found_not_for_a_replacement_that_tolerates_the_cordon() -> None:
    control = FakeNodeControl({"a": {"metadata": {"name": "a"}, "spec": {}}}, {"a": [_pod("web")]})
    acts = _acts(control)
    seen = _seen()
    acts.carry(seen, NodeWork(cordons=[Cordon("a", RECORD)]), DrainOptions())  # cordon, first look, eviction
    assert control.evicted == ["app/web"]
    # Its ReplicaSet makes a replacement that tolerates the cordon; the scheduler puts it back there.
    control.pods["a"].append(_pod("web-2", meta={"creationTimestamp": "2026-11-25T12:00:05Z"}))
    done = acts.carry(seen, NodeWork(drains=[DrainNode("a", RECORD)]), DrainOptions())
    assert control.evicted == ["app/web"], "the replacement is not evicted"
    assert acts.drains.of("uid-1")["a"].drained and [e.reason for e in done.events] == ["Drained"]


def test_a_drain_resumed_without_memory_leaves_out_the_pods_created_after_the_cordon() -> None:
    before = _pod("db", meta={"creationTimestamp": "2026-11-25T11:00:00Z"})
    after = _pod("web-2", meta={"creationTimestamp": "2026-11-25T12:00:05Z"})
    control = FakeNodeControl(
        {"a": {"metadata": {"name": "a"}, "spec": {"unschedulable": True}}}, {"a": [before, after]}
    )
    control.refuse["db"] = "app/db-pdb"
    acts = _acts(control)  # a new process: no memory of the drain that the Node record says is under way
    acts.carry(_seen(), NodeWork(drains=[DrainNode("a", RECORD)]), DrainOptions())
    assert control.evicted == [] and acts.drains.of("uid-1")["a"].waiting == ("app/db",)


def test_the_controllers_own_pod_is_never_evicted_nor_waited_for() -> None:
    own = _pod("daemonjob-controller-7d4-x2", meta={"namespace": "daemonjob-system"})
    control = FakeNodeControl({"a": {"metadata": {"name": "a"}, "spec": {}}}, {"a": [own, _pod("web")]})
    control.refuse[own["metadata"]["name"]] = "daemonjob-system/daemonjob-controller"  # one replica, minAvailable 1
    acts = NodeActs(control, KeptDrains(), FakeClock(), own_pod=("daemonjob-system", "daemonjob-controller-7d4-x2"))
    seen = _seen()
    acts.carry(seen, NodeWork(cordons=[Cordon("a", RECORD)]), DrainOptions())
    done = acts.carry(seen, NodeWork(drains=[DrainNode("a", RECORD)]), DrainOptions())
    assert control.evicted == ["app/web"] and done.refused_evictions == 0
    assert acts.drains.of("uid-1")["a"].drained


def test_the_pods_of_a_node_are_listed_from_the_watch_cache_by_their_node() -> None:
    from daemonjob.controller.nodework.nodecontrol import KubeNodeControl

    class Listing:
        def __init__(self) -> None:
            self.gets: list[tuple[str, dict[str, Any]]] = []

        def get(self, path: str, **params: Any) -> dict[str, Any]:
            self.gets.append((path, params))
            return {"items": [_pod("web")]}

    kube = Listing()
    assert [p["metadata"]["name"] for p in KubeNodeControl(kube).pods_on_node("node-7")] == ["web"]  # type: ignore[arg-type]
    assert kube.gets == [("/api/v1/pods", {"fieldSelector": "spec.nodeName=node-7", "resourceVersion": "0"})]


def test_own_pod_comes_from_the_downward_api_else_the_hostname_in_a_cluster(tmp_path: Any) -> None:
    from daemonjob.machinery.process.podidentity import own_pod

    ns_file = tmp_path / "namespace"
    ns_file.write_text("daemonjob-system\n")
    assert own_pod({"POD_NAME": "c-1", "POD_NAMESPACE": "dj"}, str(ns_file)) == ("dj", "c-1")
    in_cluster = {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "HOSTNAME": "c-2"}
    assert own_pod(in_cluster, str(ns_file)) == ("daemonjob-system", "c-2")
    assert own_pod({"HOSTNAME": "laptop"}, str(ns_file)) is None


def test_a_later_cordon_of_the_node_is_a_new_drain_even_if_the_release_was_not_seen() -> None:
    control = FakeNodeControl({"a": {"metadata": {"name": "a"}, "spec": {"unschedulable": True}}}, {"a": [_pod("web")]})
    acts = _acts(control)
    seen = _seen()
    acts.carry(seen, NodeWork(drains=[DrainNode("a", RECORD)]), DrainOptions())
    assert control.evicted == ["app/web"]
    # The record went without this process releasing it (removed by hand); a new revision cordons again.
    control.pods["a"].append(_pod("db", meta={"creationTimestamp": "2026-11-25T12:30:00Z"}))
    later = NodeRecord("ns/dj", "uid-1", "r2", None, True, "2026-11-25T13:00:00Z")
    acts.carry(seen, NodeWork(drains=[DrainNode("a", later)]), DrainOptions())
    assert control.evicted == ["app/web", "app/db"]


def test_a_timed_out_release_writes_its_outcome_in_the_same_patch_and_a_later_cordon_removes_it() -> None:
    from daemonjob.domain.nodework.releasing import DRAIN_TIMED_OUT
    from daemonjob.domain.shared.noderecord import DrainOutcome, outcomes_of

    held = {ANNOTATION_MAINTENANCE: RECORD.text()}
    control = FakeNodeControl({"a": {"metadata": {"name": "a", "annotations": held}, "spec": {"unschedulable": True}}})
    outcome = DrainOutcome("ns/dj", "uid-1", "r1", None, "Skip")
    acts = _acts(control)
    acted = acts.carry(_seen(), NodeWork(releases=[Release("a", RECORD, DRAIN_TIMED_OUT, outcome)]), None)
    assert acted.released == ["a"] and len(control.node_patches) == 1
    a = control.nodes["a"]
    assert outcomes_of(a) == [outcome] and ANNOTATION_MAINTENANCE not in a["metadata"]["annotations"]
    assert "unschedulable" not in a["spec"]
    assert acts.drains.outcomes("uid-1", {}) == {"a": outcome}, "known before the node cache shows it"
    assert acts.drains.outcomes("uid-1", {"a": outcome}) == {"a": outcome} and acts.drains.outcomes("uid-1", {}) == {}
    later = NodeRecord("ns/dj", "uid-1", "r2", None, True, "2026-11-25T13:00:00Z")
    acts.carry(_seen(), NodeWork(cordons=[Cordon("a", later)]), None)
    assert outcomes_of(control.nodes["a"]) == [] and len(control.node_patches) == 2


def test_a_kept_failure_is_marked_on_the_same_cordons_record_only() -> None:
    from daemonjob.domain.nodework.maintenance import Keep

    held = {ANNOTATION_MAINTENANCE: RECORD.text()}
    control = FakeNodeControl({"a": {"metadata": {"name": "a", "annotations": held}, "spec": {"unschedulable": True}}})
    kept = NodeRecord("ns/dj", "uid-1", "r1", None, True, RECORD.since, True)
    _acts(control).carry(_seen(), NodeWork(keeps=[Keep("a", kept)]), None)
    assert NodeRecord.parse(control.nodes["a"]["metadata"]["annotations"][ANNOTATION_MAINTENANCE]) == kept
    other = NodeRecord("ns/dj", "uid-1", "r1", None, True, "another cordon", True)
    _acts(control).carry(_seen(), NodeWork(keeps=[Keep("a", kept), Keep("a", other)]), None)
    assert len(control.node_patches) == 1, "marked already, or another cordon: nothing written"
