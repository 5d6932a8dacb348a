"""The fence under the fault bed: two fenced writer processes (users daemonjob-a and -b) on one
Lease; who wrote when is read from the API server's audit log, never from the writers."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from pathlib import Path

import pytest

from daemonjob.machinery.kube import ApiError, Kube, path_for
from daemonjob.testing.audit import AuditLog, AuditRecord
from daemonjob.testing.cluster import CONTROLLER_NAMESPACE, LocalCluster, _die_with_parent, stop_pid
from daemonjob.testing.faults import FaultProxy, paused, proxied_kubeconfig
from daemonjob.testing.waiting import wait_for

LEASE_DURATION, RENEW_DEADLINE, RETRY_PERIOD = 3.0, 2.0, 0.5


class Writer:
    def __init__(self, kubeconfig: Path, namespace: str, lease: str, user: str, log: Path):
        self.user = user
        self.log = log
        with open(log, "ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "daemonjob.testing.fencedwriter", "--kubeconfig", str(kubeconfig),
                 "--namespace", namespace, "--lease", lease, "--identity", user,
                 "--lease-duration", str(LEASE_DURATION), "--renew-deadline", str(RENEW_DEADLINE),
                 "--retry-period", str(RETRY_PERIOD)],
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=log.parent,
                env={**os.environ, "PYTHONUNBUFFERED": "1"}, preexec_fn=_die_with_parent)

    def wait(self, timeout: float) -> int:
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"{self.user} still running after {timeout}s:\n{self.log.read_text()[-3000:]}")


@pytest.fixture
def lease(kube: Kube) -> Iterator[str]:
    name = f"fenced-{uuid.uuid4().hex[:8]}"
    yield name
    try:
        kube.delete(path_for("coordination.k8s.io/v1", "leases", CONTROLLER_NAMESPACE, name))
    except ApiError as exc:
        if not exc.not_found:
            raise


@pytest.fixture
def spawn(cluster: LocalCluster, namespace: str, lease: str, tmp_path: Path) -> Iterator[Callable[..., Writer]]:
    writers: list[Writer] = []

    def start(user: str, proxy: FaultProxy | None = None) -> Writer:
        kubeconfig = cluster.kubeconfig_for(user)
        if proxy is not None:
            kubeconfig = proxied_kubeconfig(kubeconfig, tmp_path / f"kubeconfig-{user}", proxy.url())
        writers.append(Writer(kubeconfig, namespace, lease, user, tmp_path / f"{user}.log"))
        return writers[-1]

    yield start
    for w in writers:
        if w.proc.poll() is None:
            os.kill(w.proc.pid, signal.SIGCONT)  # a failed test may leave it stopped
        stop_pid(w.proc.pid)


def event_writes(audit: AuditLog, since: int, user: str) -> list[AuditRecord]:
    return audit.writes(user=user, since=since, resources=["events"], succeeded_only=True)


def leading(audit: AuditLog, since: int, user: str, after: datetime | None = None) -> list[AuditRecord]:
    """Wait until `user` writes Events (received after `after`)."""
    return wait_for(lambda: [r for r in event_writes(audit, since, user) if after is None or r.received > after],
                    30, f"{user} to write")


def assert_never_together(audit: AuditLog, since: int) -> None:
    a = event_writes(audit, since, "daemonjob-a")
    b = event_writes(audit, since, "daemonjob-b")
    assert a and b
    assert max(r.received for r in a) < min(r.received for r in b), "the two wrote in the same interval"


def now() -> datetime:
    return datetime.now(timezone.utc)


@pytest.fixture
def two(spawn: Callable[..., Writer], audit_log: AuditLog) -> Callable[..., tuple[Writer, Writer, int]]:
    def start(proxy: FaultProxy | None = None) -> tuple[Writer, Writer, int]:
        mark = audit_log.mark()
        a = spawn("daemonjob-a", proxy)
        leading(audit_log, mark, "daemonjob-a")
        b = spawn("daemonjob-b")
        time.sleep(RETRY_PERIOD * 2)  # b has seen the Lease held
        assert event_writes(audit_log, mark, "daemonjob-b") == []
        return a, b, mark

    return start


def test_paused_leader_makes_no_write_after_resuming(two: Callable[..., tuple[Writer, Writer, int]],
                                                     audit_log: AuditLog) -> None:
    a, b, mark = two()
    with paused(a.proc.pid):
        stopped = now()
        first_b = leading(audit_log, mark, "daemonjob-b")[0]
        time.sleep(0.5)
        resumed = now()  # SIGCONT follows
    assert a.wait(10) == 1
    late = [r for r in audit_log.writes(user="daemonjob-a", since=mark) if r.received > resumed]
    assert late == [], f"writes by the paused leader after it resumed: {late}"
    assert_never_together(audit_log, mark)
    print(f"pause: takeover {(first_b.received - stopped).total_seconds():.2f} s after the pause began "
          f"(lease {LEASE_DURATION} s)")


def test_partitioned_leader_makes_no_write_after_healing(cluster: LocalCluster,
                                                         two: Callable[..., tuple[Writer, Writer, int]],
                                                         audit_log: AuditLog) -> None:
    with FaultProxy.to_url(cluster.server) as proxy:
        a, b, mark = two(proxy)
        with proxy.partitioned():
            cut = now()
            assert a.wait(10) == 1  # it steps down on its own, before healing
            exited = now()
            first_b = leading(audit_log, mark, "daemonjob-b")[0]
        time.sleep(1.0)
    assert [r for r in audit_log.writes(user="daemonjob-a", since=mark) if r.received > cut] == []
    assert_never_together(audit_log, mark)
    print(f"partition: ex-leader exited {(exited - cut).total_seconds():.2f} s after the cut "
          f"(renew deadline {RENEW_DEADLINE} s); takeover {(first_b.received - cut).total_seconds():.2f} s after it")


def test_leader_of_a_hung_api_server_steps_down_within_the_renew_deadline(
        cluster: LocalCluster, two: Callable[..., tuple[Writer, Writer, int]], audit_log: AuditLog) -> None:
    with FaultProxy.to_url(cluster.server) as proxy:
        a, b, mark = two(proxy)
        with proxy.hung():
            hung = time.monotonic()
            code = a.wait(RENEW_DEADLINE + RETRY_PERIOD + 3)
            exited = time.monotonic() - hung
            first_b = leading(audit_log, mark, "daemonjob-b")[0]
    assert code == 1
    assert_never_together(audit_log, mark)
    print(f"hang: ex-leader exited {exited:.2f} s after the hang (renew deadline {RENEW_DEADLINE} s); "
          f"successor's first write at {first_b.received.isoformat()}")


def test_sigterm_releases_and_the_successor_follows_at_once(two: Callable[..., tuple[Writer, Writer, int]],
                                                            audit_log: AuditLog) -> None:
    a, b, mark = two()
    term = now()
    a.proc.send_signal(signal.SIGTERM)
    assert a.wait(10) == 0
    first_b = leading(audit_log, mark, "daemonjob-b")[0]
    release = [r for r in audit_log.writes(user="daemonjob-a", since=mark, resources=["leases"])][-1]
    assert release.verb == "update" and release.succeeded
    assert_never_together(audit_log, mark)
    print(f"SIGTERM: successor's first write {(first_b.received - term).total_seconds():.2f} s after the signal "
          f"(retry period {RETRY_PERIOD} s)")
