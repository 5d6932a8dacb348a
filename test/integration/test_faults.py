"""The fault bed itself: the proxy's faults, the process pause, the audit log's record of users."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path

import pytest

from daemonjob.machinery.client.kube import ApiError, Kube, path_for
from daemonjob.machinery.process.leaderelection import LeaderElector
from daemonjob.testing.audit import AuditLog
from daemonjob.testing.cluster import CONTROLLER_NAMESPACE, LocalCluster
from daemonjob.testing.faults.pausing import _state, paused
from daemonjob.testing.faults.proxiedconfig import proxied_kubeconfig
from daemonjob.testing.faults.proxy import FaultProxy
from daemonjob.testing.waiting import wait_for

LEASES = "coordination.k8s.io/v1"


@pytest.fixture
def proxy(cluster: LocalCluster) -> Iterator[FaultProxy]:
    with FaultProxy.to_url(cluster.server) as p:
        yield p


def through(proxy: FaultProxy, cluster: LocalCluster, tmp_path: Path, user: str | None = None) -> Kube:
    """A client of the API server through the proxy, as admin or as one of the cluster's users."""
    source = cluster.kubeconfig_for(user) if user else cluster.kubeconfig
    return Kube.from_config(str(proxied_kubeconfig(source, tmp_path / f"kubeconfig-{user or 'admin'}", proxy.url())))


def test_requests_pass_through_with_tls_verified(proxy: FaultProxy, cluster: LocalCluster, tmp_path: Path) -> None:
    kube = through(proxy, cluster, tmp_path)
    assert kube.host == proxy.url()
    assert kube.configuration.verify_ssl  # the API server's certificate names 127.0.0.1
    assert kube.get("/version")["major"] == "1"
    assert proxy.accepted >= 1


def test_partition_cuts_and_refuses_until_healed(
    proxy: FaultProxy, cluster: LocalCluster, tmp_path: Path, namespace: str
) -> None:
    kube = through(proxy, cluster, tmp_path)
    watch = kube.watch(path_for("v1", "configmaps", namespace), {}, read_timeout=30)
    events: list[object] = []
    ended = threading.Event()

    def read() -> None:
        try:
            for event in watch:
                events.append(event)
        except Exception as exc:  # the cut
            events.append(exc)
        ended.set()

    threading.Thread(target=read, daemon=True).start()
    proxy.partition()
    assert ended.wait(5), "an open watch survived the partition"
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(proxy.address, timeout=2)
    with pytest.raises(Exception, match="[Cc]onnection refused"):
        kube.get("/version", request_timeout=5)
    proxy.heal()
    assert kube.get("/version")["major"] == "1"


def test_hang_accepts_but_never_answers_until_healed(proxy: FaultProxy, cluster: LocalCluster, tmp_path: Path) -> None:
    kube = through(proxy, cluster, tmp_path)
    kube.get("/version")  # a pooled connection, open before the hang
    with proxy.hung():
        socket.create_connection(proxy.address, timeout=2).close()  # accepted, unlike a partition
        started = time.monotonic()
        with pytest.raises(Exception, match="[Tt]imed out|[Tt]imeout"):
            kube.get("/version", request_timeout=1.0)
        assert time.monotonic() - started >= 1.0  # it waited for an answer, it was not refused
    assert kube.get("/version")["major"] == "1"


def test_latency_delays_each_answer(proxy: FaultProxy, cluster: LocalCluster, tmp_path: Path) -> None:
    kube = through(proxy, cluster, tmp_path)
    kube.get("/version")
    with proxy.delayed(to_server=0.2, to_client=0.3):
        started = time.monotonic()
        kube.get("/version")
        took = time.monotonic() - started
    assert took >= 0.5
    print(f"request through a 0.2 s + 0.3 s proxy: {took:.3f} s")


def test_audit_log_names_the_user_of_each_write(
    proxy: FaultProxy, cluster: LocalCluster, tmp_path: Path, audit_log: AuditLog
) -> None:
    mark = audit_log.mark()
    before = datetime.now(timezone.utc)
    kube_a = through(proxy, cluster, tmp_path, "daemonjob-a")
    name = f"audit-{uuid.uuid4().hex[:8]}"
    lease = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": name},
        "spec": {"holderIdentity": "a"},
    }
    kube_a.create(path_for(LEASES, "leases", CONTROLLER_NAMESPACE), lease)
    with pytest.raises(ApiError) as refused:  # the controller's RBAC: no Secrets
        kube_a.get(path_for("v1", "secrets", CONTROLLER_NAMESPACE))
    assert refused.value.status == 403
    try:
        records = wait_for(
            lambda: audit_log.writes(user="daemonjob-a", since=mark, resources=["leases"]),
            10,
            "the audit record of the Lease create",
        )
        assert [(r.verb, r.group, r.resource, r.namespace, r.name, r.code) for r in records] == [
            ("create", "coordination.k8s.io", "leases", CONTROLLER_NAMESPACE, name, 201)
        ]
        assert before <= records[0].received <= records[0].completed
        assert audit_log.writes(user="daemonjob-b", after=before) == []
    finally:
        Kube.from_config(str(cluster.kubeconfig)).delete(path_for(LEASES, "leases", CONTROLLER_NAMESPACE, name))


def test_pause_stops_the_process_and_always_resumes() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time\nwhile True: time.sleep(0.05)"])
    try:
        with pytest.raises(RuntimeError):
            with paused(child.pid):
                assert _state(child.pid) == "T"
                raise RuntimeError("the test fails while the process is stopped")
        wait_for(lambda: _state(child.pid) in ("S", "R"), 5, "the process to run again", interval=0.02)
    finally:
        child.kill()
        child.wait(10)


@pytest.mark.parametrize("fault", ["partition", "hang"])
def test_elector_cut_off_loses_the_fence_at_its_deadline(
    fault: str, proxy: FaultProxy, cluster: LocalCluster, tmp_path: Path
) -> None:
    """Through a real API server: the fence lapses at last renewal sent + renewDeadline, and
    run() returns soon after even when the API server never answers."""
    kube = through(proxy, cluster, tmp_path, "daemonjob-a")
    name = f"fence-{uuid.uuid4().hex[:8]}"
    deadline = 2.0
    lost_at: list[float] = []
    elector = LeaderElector(
        kube,
        CONTROLLER_NAMESPACE,
        name,
        "a",
        lease_duration=3.0,
        renew_deadline=deadline,
        retry_period=0.5,
        on_stopped_leading=lambda: lost_at.append(time.monotonic()),
    )
    result: list[bool] = []
    thread = threading.Thread(target=lambda: result.append(elector.run()), daemon=True)
    thread.start()
    try:
        wait_for(elector.holds_lease, 10, "leadership", interval=0.02)
        time.sleep(1.2)  # a few renewals
        assert elector.holds_lease()
        faulted_at = time.monotonic()
        getattr(proxy, fault)()
        remaining = elector.lease_remaining()
        wait_for(lambda: lost_at, deadline + 1, "the loss of leadership", interval=0.01)
        thread.join(deadline + 1)
        assert not thread.is_alive() and result == [False]
        noticed = lost_at[0] - faulted_at
        # The fence decides, not a request timeout (30 s): the slack only absorbs a busy machine.
        assert noticed <= remaining + 0.5
        print(
            f"{fault}: fence had {remaining:.2f} s left, loss declared after {noticed:.2f} s, "
            f"run() returned after {time.monotonic() - faulted_at:.2f} s"
        )
    finally:
        elector.stop()
        proxy.heal()
        thread.join(5)
        Kube.from_config(str(cluster.kubeconfig)).delete(path_for(LEASES, "leases", CONTROLLER_NAMESPACE, name))
