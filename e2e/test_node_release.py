"""No node stays held by a DaemonJob that is gone, against the API server: a DaemonJob
deleted right after a cordon its Node informer has not seen yet (the watch held by a fault
proxy) still releases the node before its finalizer goes; a record left by a DaemonJob whose
finalizer was removed by hand is released by the orphan sweep, at start-up and when a
DaemonJob is deleted; a DaemonJob deleted with `--cascade=orphan` keeps the node its running
Job holds until that Job ends."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
import test_node_maintenance as maintenance
from harness import CONTROLLER_NS, EXTERNAL, Cluster, Nodes, metric_value, sleep, wait_for
from test_node_maintenance import _gone, _maintained, _uncordoned_without_record

from daemonjob.controller.nodework.cordonstop import STOP_ANNOTATION, stop_cordons
from daemonjob.controller.nodework.nodecontrol import KubeNodeControl
from daemonjob.controller.nodework.options import NodeMaintenanceOptions
from daemonjob.controller.runtime.informers import NODE_INDEXERS, Informers
from daemonjob.controller.runtime.jobcontrol import KubeJobControl
from daemonjob.controller.runtime.transforms import node_transform
from daemonjob.controller.wiring.controller import Controller
from daemonjob.domain.nodework.maintenance import FINALIZER
from daemonjob.domain.shared.noderecord import ANNOTATION_MAINTENANCE, record_of
from daemonjob.machinery.cache.frozen import freeze
from daemonjob.machinery.cache.informer import Informer
from daemonjob.machinery.client.kube import PATCH_MERGE, Kube, path_for
from daemonjob.testing.cluster import LocalCluster
from daemonjob.testing.faults.proxiedconfig import proxied_kubeconfig
from daemonjob.testing.faults.proxy import FaultProxy
from daemonjob.testing.sim.nodewatch import NodeWatcher

pytestmark = pytest.mark.skipif(EXTERNAL, reason="runs its own controllers against the local control plane")

# the node maintenance tests' fixtures: the manifests' RBAC, a controller allowed this namespace, a Node watch
maintenance_rbac = maintenance.maintenance_rbac
allowed_controller = maintenance.allowed_controller
watch = maintenance.watch

ORPHANED = "daemonjob_orphaned_node_records_released_total"
HELD_SINCE = "daemonjob_node_held_since_timestamp_seconds"


def _held(api: Cluster, node: str) -> bool:
    obj = api.node(node)
    return bool(obj["spec"].get("unschedulable")) and record_of(obj) is not None


@pytest.fixture
def node_link(cluster: LocalCluster, tmp_path: Path) -> Iterator[tuple[FaultProxy, Kube]]:
    """A fault proxy in front of the API server, and a client through it."""
    with FaultProxy.to_url(cluster.server) as proxy:
        config = proxied_kubeconfig(cluster.kubeconfig, tmp_path / "proxied-kubeconfig", proxy.url())
        yield proxy, Kube.from_config(str(config))


@pytest.fixture
def delayed_node_controller(
    kube: Kube, namespace: str, node_link: tuple[FaultProxy, Kube]
) -> Iterator[tuple[Controller, FaultProxy]]:
    """A controller in this process whose Node informer alone reads through the fault proxy,
    so its Node watch can be held while everything else (its writes, its quorum reads, the
    DaemonJob and Job watches) goes on."""
    proxy, through_proxy = node_link
    informers = dataclasses.replace(
        Informers.for_kube(kube, namespace=namespace),
        nodes=Informer(through_proxy, "v1", "nodes", transform=node_transform, name="nodes", indexers=NODE_INDEXERS),
    )
    ctl = Controller(
        informers,
        KubeJobControl(kube),
        workers=2,
        node_control=KubeNodeControl(kube),
        node_maintenance=NodeMaintenanceOptions(
            frozenset({namespace}),
            max_unavailable_nodes=None,  # no cluster-wide limit here, as the neighbouring tests
            sweep_namespace=namespace,
        ),
    )
    ctl.start_informers()
    assert ctl.wait_synced(60), "caches not synced"
    ctl.start_workers()
    try:
        yield ctl, proxy
    finally:
        proxy.heal()
        ctl.stop(timeout=10)


def test_a_daemonjob_deleted_before_its_cache_saw_the_cordon_releases_the_node(
    api: Cluster, nodes: Nodes, group: str, delayed_node_controller: tuple[Controller, FaultProxy]
) -> None:
    ctl, proxy = delayed_node_controller
    (node,) = nodes(1)
    # as the server has it: the node's first version still carries the not-ready taint its
    # registration clears, and a cache left with that one sees no eligible node at all
    wait_for(
        lambda: ctl.nodes.store.get(node) == freeze(node_transform(api.node(node))), what="the node cached as served"
    )
    proxy.hang()  # the Node watch: nothing more arrives from here on
    api.apply(_maintained("raced", group, sleep(60)))
    wait_for(lambda: _held(api, node), what="the node cordoned")
    assert record_of(ctl.nodes.store.get(node)) is None, "the cache saw the cordon: the fault did not hold"
    api.delete("raced")
    wait_for(lambda: _gone(api, "raced"), what="the DaemonJob gone", timeout=60)
    assert _uncordoned_without_record(api, node), api.node(node)
    assert record_of(ctl.nodes.store.get(node)) is None  # still not seen: the release did not wait for it


def test_a_record_left_by_a_finalizer_removed_by_hand_is_released_at_start_up_and_on_delete(
    api: Cluster, nodes: Nodes, group: str, allowed_controller: Any
) -> None:
    first, second = nodes(2)
    body = _maintained("left", group, sleep(600))
    body["spec"]["nodeSelector"] = {"matchLabels": {"kubernetes.io/hostname": first}}
    api.apply(body)
    wait_for(lambda: _held(api, first), what="the first node cordoned")
    allowed_controller.kill()
    _orphan(api, "left")
    wait_for(lambda: _gone(api, "left") and not api.jobs("left"), what="the DaemonJob and its Job gone")
    assert _held(api, first), "released while no controller ran"
    allowed_controller.start(wait=True)  # the sweep at start-up
    wait_for(lambda: _uncordoned_without_record(api, first), what="the orphaned record released at start-up")
    assert metric_value(allowed_controller.metrics(), ORPHANED) == 1

    body = _maintained("gone", group, sleep(600))
    body["spec"]["nodeSelector"] = {"matchLabels": {"kubernetes.io/hostname": second}}
    api.apply(body)
    wait_for(lambda: _held(api, second), what="the second node cordoned")
    wait_for(
        lambda: metric_value(allowed_controller.metrics(), HELD_SINCE, {"node": second, "name": "gone"}),
        what="the held node's series",
    )
    _orphan(api, "gone")  # the controller runs: the sweep follows the delete
    wait_for(lambda: _uncordoned_without_record(api, second), what="the orphaned record released on delete")
    text = allowed_controller.metrics()
    assert metric_value(text, ORPHANED) == 2
    assert metric_value(text, HELD_SINCE, {"node": second}) is None, "the held node's series outlived the record"


def _orphan(api: Cluster, name: str) -> None:
    """Remove the finalizer by hand and delete the DaemonJob: its record stays on the Node."""
    api.kube.patch(api.dj_path(name), {"metadata": {"finalizers": None}}, content_type=PATCH_MERGE)
    api.delete(name)


def test_deleted_with_cascade_orphan_keeps_the_node_until_its_job_ends(
    api: Cluster,
    nodes: Nodes,
    group: str,
    allowed_controller: Any,
    watch: NodeWatcher,
    kubectl: Callable[..., Any],
) -> None:
    (node,) = nodes(1)
    api.apply(_maintained("orphaning", group, sleep(25)))
    wait_for(lambda: len(api.jobs("orphaning")) == 1 and _held(api, node), what="the node's Job running")
    (job,) = api.jobs("orphaning")
    kubectl("delete", "daemonjob", "orphaning", "-n", api.namespace, "--cascade=orphan", "--wait=false")
    wait_for(lambda: not _owned(api, "orphaning"), what="the Job orphaned")
    deadline = time.monotonic() + 8
    while time.monotonic() < deadline:  # the Job runs: the node stays cordoned, the DaemonJob with its finalizer
        assert _held(api, node), "released while its Job still runs"
        assert FINALIZER in (api.get("orphaning")["metadata"].get("finalizers") or ())
        time.sleep(1)
    assert not (api.jobs("orphaning")[0].get("status") or {}).get("succeeded")
    wait_for(lambda: _gone(api, "orphaning"), what="the DaemonJob gone once its Job ended", timeout=120)
    assert _uncordoned_without_record(api, node)
    (after,) = api.jobs("orphaning")
    assert after["metadata"]["uid"] == job["metadata"]["uid"] and (after.get("status") or {}).get("succeeded") == 1
    assert watch.cordons[node] == 1 and watch.uncordons[node] == 1, watch.summary()
    assert ANNOTATION_MAINTENANCE not in (api.node(node)["metadata"].get("annotations") or {})


def _owned(api: Cluster, name: str) -> bool:
    return any(j["metadata"].get("ownerReferences") for j in api.jobs(name))


def test_a_stop_on_the_lease_holds_back_cordons_and_the_finalizer(
    api: Cluster, nodes: Nodes, group: str, allowed_controller: Any
) -> None:
    """What release-nodes writes before it releases: the running controller reads it from
    its Lease (with its own RBAC) before each cordon and before its finalizer."""
    (node,) = nodes(1)
    until = datetime.now(timezone.utc) + timedelta(minutes=5)
    stop_cordons(api.kube, CONTROLLER_NS, allowed_controller.lease, until)
    api.apply(_maintained("stopped", group))
    deadline = time.monotonic() + 8
    while time.monotonic() < deadline:
        assert not _held(api, node), "cordoned while cordons were stopped"
        assert FINALIZER not in (api.get("stopped")["metadata"].get("finalizers") or ())
        time.sleep(1)
    lease = path_for("coordination.k8s.io/v1", "leases", CONTROLLER_NS, allowed_controller.lease)
    api.kube.patch(lease, {"metadata": {"annotations": {STOP_ANNOTATION: None}}}, content_type=PATCH_MERGE)
    wait_for(lambda: _held(api, node), what="the node cordoned once the stop is lifted", timeout=60)
    assert FINALIZER in (api.get("stopped")["metadata"].get("finalizers") or ())
