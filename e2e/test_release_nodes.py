"""`daemonjob-controller release-nodes` against the API server, as the controller's
ServiceAccount (the manifests' RBAC and node maintenance's): with no Lease and a controller
that elects no leader, its stop is written (the Lease created) and holds that controller's
cordons back; a Lease it may not write ends it non-zero, saying why, before any node is
released; and the stop is counted from the API server's time, whatever the clock of the
machine running it says."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
import test_node_maintenance as maintenance
from harness import CONTROLLER_NS, EXTERNAL, Cluster, Nodes, wait_for
from test_node_maintenance import _maintained

from daemonjob.controller.nodework.cordonstop import STOP_ANNOTATION, LeaseStop, stopped_until
from daemonjob.domain.shared.noderecord import ANNOTATION_MAINTENANCE, NodeRecord, record_of
from daemonjob.domain.shared.timestamps import format_time, parse_time
from daemonjob.machinery.client.kube import PATCH_MERGE, ApiError, Kube, path_for
from daemonjob.testing.process import ControllerProcess

pytestmark = pytest.mark.skipif(
    EXTERNAL, reason="runs its own controller and release-nodes against the local control plane"
)

maintenance_rbac = maintenance.maintenance_rbac
HOLD = 300

# release-nodes run on a machine whose clock is an hour behind: every clock the command may
# read (time.time and the datetime class the release reads its time from) is an hour early.
SKEWED = """
import datetime as _dt, sys, time
import daemonjob.release as release

SKEW = _dt.timedelta(hours=-1)
_time = time.time
time.time = lambda: _time() + SKEW.total_seconds()


class Skewed(_dt.datetime):
    @classmethod
    def now(cls, tz=None):
        return _dt.datetime.now(tz) + SKEW


release.datetime = Skewed
from daemonjob.cli import main

sys.exit(main(sys.argv[1:]))
"""


def _lease_path(name: str, namespace: str = CONTROLLER_NS) -> str:
    return path_for("coordination.k8s.io/v1", "leases", namespace, name)


def release_nodes(
    kubeconfig: Path, lease_namespace: str, lease: str, namespace: str, *, skewed: bool = False
) -> subprocess.CompletedProcess[str]:
    """The command as the chart's hook runs it (only --settle shortened); waited for."""
    entry = ["-c", SKEWED] if skewed else ["-m", "daemonjob"]
    return subprocess.run(
        [
            sys.executable,
            *entry,
            "release-nodes",
            f"--kubeconfig={kubeconfig}",
            f"--leader-election-namespace={lease_namespace}",
            f"--leader-election-id={lease}",
            f"--namespace={namespace}",
            f"--hold={HOLD}",
            "--settle=0",
            "--log-format=json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture
def lease(kube: Kube, namespace: str) -> Iterator[str]:
    """A Lease name of this test's own, none there yet; deleted afterwards."""
    name = f"rel-{namespace}"
    yield name
    try:
        kube.delete(_lease_path(name))
    except ApiError as exc:
        if not exc.not_found:
            raise


@pytest.fixture
def unelected_controller(
    sa_kubeconfig: Path, namespace: str, lease: str, tmp_path: Path, maintenance_rbac: None
) -> Iterator[ControllerProcess]:
    """The controller with leader election off (as the chart runs it with leaderElection.enabled
    false): it never writes the Lease, but reads the stop on it before each cordon."""
    handle = ControllerProcess(
        sa_kubeconfig,
        tmp_path / "controller.log",
        "--namespace",
        namespace,
        "--leader-election-namespace",
        CONTROLLER_NS,
        "--leader-election-id",
        lease,
        "--log-format",
        "json",
        f"--node-maintenance-namespaces={namespace}",
        "--max-unavailable-nodes=100%",
    )
    try:
        yield handle.start(wait=True)
    finally:
        handle.stop()
        assert not handle.running(), f"controller pid {handle.pid} still running"


def _held(api: Cluster, node: str) -> bool:
    obj = api.node(node)
    return bool(obj["spec"].get("unschedulable")) and record_of(obj) is not None


def test_without_a_lease_and_without_leader_election_the_stop_is_written_and_holds_cordons_back(
    api: Cluster,
    kube: Kube,
    nodes: Nodes,
    group: str,
    namespace: str,
    lease: str,
    sa_kubeconfig: Path,
    unelected_controller: ControllerProcess,
) -> None:
    (node,) = nodes(1)
    with pytest.raises(ApiError) as missing:
        kube.get(_lease_path(lease))
    assert missing.value.not_found, "the Lease exists before release-nodes ran"
    done = release_nodes(sa_kubeconfig, CONTROLLER_NS, lease, namespace)
    assert done.returncode == 0, done.stderr
    assert "released 0 node(s)" in done.stdout, done.stdout
    written = kube.get(_lease_path(lease))
    until, created = stopped_until(written), parse_time(written["metadata"]["creationTimestamp"])
    assert until is not None and created is not None, written
    # counted from the API server's time: the Lease's creation, stamped by the server, a moment before
    assert timedelta(seconds=HOLD - 2) <= until - created <= timedelta(seconds=HOLD + 2), (until, created)
    assert not (written.get("spec") or {}).get("holderIdentity"), "release-nodes took the Lease's leadership"

    api.apply(_maintained("stopped", group))
    deadline = time.monotonic() + 8
    while time.monotonic() < deadline:
        assert not _held(api, node), "cordoned while cordons were stopped"
        time.sleep(1)
    kube.patch(_lease_path(lease), {"metadata": {"annotations": {STOP_ANNOTATION: None}}}, content_type=PATCH_MERGE)
    wait_for(lambda: _held(api, node), what="the node cordoned once the stop is lifted", timeout=60)


def test_a_lease_it_may_not_write_ends_it_non_zero_saying_why_before_any_node_is_released(
    api: Cluster, kube: Kube, nodes: Nodes, namespace: str, lease: str, sa_kubeconfig: Path, maintenance_rbac: None
) -> None:
    """The ServiceAccount may write Leases in the controller's namespace only: told to use one in
    the test's namespace, release-nodes stops before it touches a node."""
    (node,) = nodes(1)
    record = NodeRecord(f"{namespace}/gone", "uid-gone", "rev", None, True, format_time(datetime.now(timezone.utc)))
    kube.patch(
        path_for("v1", "nodes", name=node),
        {"metadata": {"annotations": {ANNOTATION_MAINTENANCE: record.text()}}, "spec": {"unschedulable": True}},
        content_type=PATCH_MERGE,
    )
    refused = release_nodes(sa_kubeconfig, namespace, lease, namespace)
    assert refused.returncode == 1, (refused.stdout, refused.stderr)
    assert f"cannot stop new cordons on the Lease {namespace}/{lease}" in refused.stderr, refused.stderr
    assert "403" in refused.stderr and "nothing was released" in refused.stderr, refused.stderr
    assert _held(api, node), "a node was released without the stop"
    with pytest.raises(ApiError) as missing:
        kube.get(_lease_path(lease, namespace))
    assert missing.value.not_found

    done = release_nodes(sa_kubeconfig, CONTROLLER_NS, lease, namespace)
    assert done.returncode == 0, done.stderr
    assert "released 1 node(s) (1 uncordoned)" in done.stdout, done.stdout
    after = api.node(node)
    assert not after["spec"].get("unschedulable") and record_of(after) is None


@pytest.mark.parametrize("existing", [False, True], ids=["no-lease", "lease-held"])
def test_the_stop_is_counted_from_the_api_servers_time_not_the_clock_of_release_nodes(
    kube: Kube, namespace: str, lease: str, sa_kubeconfig: Path, maintenance_rbac: None, existing: bool
) -> None:
    """release-nodes on a machine an hour behind: the stop still lasts --hold from now as the
    API server (here, this machine's right clock) and the controller count it."""
    if existing:  # a leader's Lease, renewed by the controller
        now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        kube.create(
            path_for("coordination.k8s.io/v1", "leases", CONTROLLER_NS),
            {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": lease},
                "spec": {"holderIdentity": "leader", "leaseDurationSeconds": 15, "renewTime": now, "acquireTime": now},
            },
        )
    before = datetime.now(timezone.utc).replace(microsecond=0)
    done = release_nodes(sa_kubeconfig, CONTROLLER_NS, lease, namespace, skewed=True)
    after = datetime.now(timezone.utc)
    assert done.returncode == 0, done.stderr
    written = kube.get(_lease_path(lease))
    until = stopped_until(written)
    assert until is not None, written
    assert before + timedelta(seconds=HOLD - 1) <= until <= after + timedelta(seconds=HOLD), (before, until, after)
    stopped = LeaseStop(kube, CONTROLLER_NS, lease, lambda: datetime.now(timezone.utc))()
    assert stopped is not None and "release-nodes" in stopped
    if existing:
        assert written["spec"]["holderIdentity"] == "leader", "the holder's fields were lost"
