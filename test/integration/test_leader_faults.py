"""One leader at a time, with two controller processes under faults.

Each test runs two replicas of `python -m daemonjob --leader-elect` (short lease timings),
authenticated as different users and each behind a fault proxy of its own, while a DaemonJob
rolls out with a small maxParallel over nodes of their own. Then the leader is paused,
partitioned, cut off by a hung API server or sent SIGTERM. Who wrote what and when is read
from the API server's audit log; how many Jobs were active at once from a watch of the
test's own. Every test prints its takeover figures (docs/operations/high-availability.md quotes them).
"""

from __future__ import annotations

import json
import os
import signal
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from daemonjob.machinery.client.kube import ApiError, Kube, path_for
from daemonjob.testing.audit import AuditLog, AuditRecord, parse_time
from daemonjob.testing.cluster import CONTROLLER_NAMESPACE, LocalCluster
from daemonjob.testing.doubles.builders import daemonjob, job_template
from daemonjob.testing.faults.pausing import paused
from daemonjob.testing.faults.proxiedconfig import proxied_kubeconfig
from daemonjob.testing.faults.proxy import FaultProxy
from daemonjob.testing.process import ControllerProcess
from daemonjob.testing.sim.jobwatch import JobWatcher, is_true
from daemonjob.testing.sim.kubelet import ANNOTATION_DURATION, NodeSpec, SimKubelet
from daemonjob.testing.waiting import wait_for

LEASE, RENEW, RETRY = 6.0, 4.0, 1.0
NODES, MAX_PARALLEL, POD_SECONDS = 8, 2, 4
DJ_API = "daemonjob.io/v1alpha1"
NAME = "maintenance"
USERS = ("daemonjob-a", "daemonjob-b")
ACTING = ["jobs", "daemonjobs", "daemonjobs/status", "events"]  # every write but the Lease's


def now() -> datetime:
    return datetime.now(timezone.utc)


def seconds(later: datetime, earlier: datetime) -> float:
    return (later - earlier).total_seconds()


@dataclass
class Replica:
    user: str
    proxy: FaultProxy
    process: ControllerProcess

    @property
    def pid(self) -> int:
        return self.process.pid

    def leads(self) -> bool:
        return self.process.running() and self.process.metric("daemonjob_leader") == 1.0

    def wait_exit(self, timeout: float) -> int:
        assert self.process.proc is not None
        try:
            return self.process.proc.wait(timeout)
        except Exception:
            raise AssertionError(f"{self.user} still running after {timeout}s:\n{self.process.log_tail()}") from None

    def log_event(self, event: str) -> dict[str, Any] | None:
        """The first JSON log record of this event (lines that are not JSON are skipped)."""
        for line in self.process.log_text().splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict) and record.get("event") == event:
                return record
        return None


@pytest.fixture(scope="module")
def rollout_nodes(kubelet: SimKubelet) -> Iterator[tuple[str, list[str]]]:
    """Nodes of this module's own (shared by its tests, which run one after the other)."""
    group = f"leader-{uuid.uuid4().hex[:6]}"
    names = [f"{group}-{i}" for i in range(NODES)]
    kubelet.add_nodes([NodeSpec(n, labels={"leader-test": group}) for n in names])
    kubelet.wait_ready(names, timeout=60)
    yield group, names
    for name in names:
        kubelet.delete_node(name)


@dataclass
class Pair:
    leader: Replica
    standby: Replica
    mark: int  # audit log offset before either started

    def by(
        self,
        replica: Replica,
        audit: AuditLog,
        after: datetime | None = None,
        resources: list[str] | None = None,
        succeeded: bool = False,
    ) -> list[AuditRecord]:
        return audit.writes(
            user=replica.user, since=self.mark, after=after, resources=resources, succeeded_only=succeeded
        )


@pytest.fixture
def pair(
    cluster: LocalCluster, namespace: str, installed_crd: None, audit_log: AuditLog, kube: Kube, tmp_path: Path
) -> Iterator[Callable[..., Pair]]:
    """pair(*flags) -> two replicas started together, once one of them leads."""
    lease = f"leader-{uuid.uuid4().hex[:8]}"
    replicas: list[Replica] = []

    def start(*flags: str) -> Pair:
        mark = audit_log.mark()
        for user in USERS:
            proxy = FaultProxy.to_url(cluster.server).start()
            kubeconfig = proxied_kubeconfig(cluster.kubeconfig_for(user), tmp_path / f"kubeconfig-{user}", proxy.url())
            process = ControllerProcess(
                kubeconfig,
                tmp_path / f"{user}.log",
                "--namespace",
                namespace,
                "--leader-elect",
                "--leader-election-namespace",
                CONTROLLER_NAMESPACE,
                "--leader-election-id",
                lease,
                "--leader-election-lease-duration",
                str(LEASE),
                "--leader-election-renew-deadline",
                str(RENEW),
                "--leader-election-retry-period",
                str(RETRY),
                "--log-format",
                "json",
                *flags,
            )
            replicas.append(Replica(user, proxy, process.start()))
        for r in replicas:
            r.process.wait_ready()
        leader = wait_for(lambda: next((r for r in replicas if r.leads()), None), 30, "a leader", interval=0.2)
        standby = next(r for r in replicas if r is not leader)
        assert not standby.leads()
        return Pair(leader, standby, mark)

    yield start
    for r in replicas:
        if r.process.running():
            os.kill(r.pid, signal.SIGCONT)  # a failed test may leave it stopped
        r.process.stop()
        r.proxy.stop()
    try:
        kube.delete(path_for("coordination.k8s.io/v1", "leases", CONTROLLER_NAMESPACE, lease))
    except ApiError as exc:
        if not exc.not_found:
            raise


@pytest.fixture
def rollout(kube: Kube, namespace: str, rollout_nodes: tuple[str, list[str]]) -> Iterator[Callable[[], JobWatcher]]:
    """rollout() -> a watcher of a DaemonJob rolling out over the module's nodes, once its first Jobs exist."""
    watchers: list[JobWatcher] = []

    def start() -> JobWatcher:
        group, _ = rollout_nodes
        watcher = JobWatcher(kube, namespace, NAME).start()
        watchers.append(watcher)
        kube.create(
            path_for(DJ_API, "daemonjobs", namespace),
            daemonjob(
                NAME,
                manifest=True,
                template=job_template(
                    pod_annotations={ANNOTATION_DURATION: str(POD_SECONDS)},
                    container={"image": "busybox:1.36", "command": ["sleep", str(POD_SECONDS)]},
                ),
                maxParallel=MAX_PARALLEL,
                nodeSelector={"matchLabels": {"leader-test": group}},
            ),
        )
        wait_for(lambda: len(watcher.created) >= MAX_PARALLEL, 60, "the rollout under way")
        return watcher

    yield start
    for w in watchers:
        w.stop()


def assert_rollout_sound(kube: Kube, namespace: str, watcher: JobWatcher, names: list[str]) -> None:
    """The rollout completes, never over maxParallel, one Job per (node, revision)."""

    def complete() -> bool:
        dj = kube.get(path_for(DJ_API, "daemonjobs", namespace, NAME))
        status = dj.get("status") or {}
        return (
            status.get("observedGeneration") == dj["metadata"]["generation"]
            and is_true(dj, "Complete")
            and status.get("desiredNodes") == NODES
        )

    wait_for(
        complete,
        90,
        "the rollout to complete",
        describe=lambda: kube.get(path_for(DJ_API, "daemonjobs", namespace, NAME)).get("status"),
    )
    summary = watcher.summary()
    assert watcher.max_active <= MAX_PARALLEL, summary
    per_key = watcher.uids_per_node_revision()
    assert {node for node, _ in per_key} == set(names), summary
    assert all(len(uids) == 1 for uids in per_key.values()), f"duplicate Jobs: {summary}"


def counts(records: list[AuditRecord]) -> dict[str, int]:
    out: dict[str, int] = {}
    for r in records:
        key = f"{r.verb} {r.resource}{'/' + r.subresource if r.subresource else ''}"
        out[key] = out.get(key, 0) + 1
    return out


def describe(records: list[AuditRecord]) -> str:
    """One line per request, as the audit log has it: who, what, when received and answered."""
    return "\n".join(
        f"  {r.user} {r.verb} {r.resource}{'/' + r.subresource if r.subresource else ''} {r.namespace}/{r.name} "
        f"-> {r.code}; received {r.received.isoformat()}, completed {r.completed.isoformat()}"
        for r in records
    )


def leading(p: Pair, audit: AuditLog) -> None:
    """Until the leader has renewed the Lease and created Jobs: a fault now hits a working leader."""
    wait_for(
        lambda: any(r.verb == "update" for r in p.by(p.leader, audit, resources=["leases"])), 30, "the leader to renew"
    )
    assert p.by(p.leader, audit, resources=["jobs"]), "the stand-by acted, or nobody did"


def takeover(p: Pair, audit: AuditLog, after: datetime) -> tuple[AuditRecord, AuditRecord]:
    """The stand-by's Lease acquisition (its first successful Lease write) and its first acting
    write, both after `after`."""
    acquired = wait_for(
        lambda: p.by(p.standby, audit, after, ["leases"], succeeded=True), 30, "the stand-by to take the Lease"
    )[0]
    acting = wait_for(lambda: p.by(p.standby, audit, after, ACTING), 30, "the stand-by to act")[0]
    return acquired, acting


def test_paused_leader_makes_no_write_after_resuming(
    pair: Callable[..., Pair],
    rollout: Callable[[], JobWatcher],
    audit_log: AuditLog,
    kube: Kube,
    namespace: str,
    rollout_nodes: tuple[str, list[str]],
) -> None:
    # A slow client-side rate limit keeps the leader's writes waiting, after the fence was
    # checked once, when the pause comes: the moment the stale writes came from.
    p = pair("--kube-api-qps", "2", "--kube-api-burst", "1")
    watcher = rollout()
    assert p.by(p.leader, audit_log, resources=["jobs"])
    with paused(p.leader.pid):
        stopped = now()
        acquired, acting = takeover(p, audit_log, stopped)
        time.sleep(0.5)
        resumed = now()  # SIGCONT follows
    assert p.leader.wait_exit(30) == 1
    late = p.by(p.leader, audit_log, resumed)
    assert late == [], f"writes by the paused leader after it resumed: {late}"
    assert_rollout_sound(kube, namespace, watcher, rollout_nodes[1])
    print(
        f"\npause: paused {seconds(resumed, stopped):.1f} s; stand-by took the Lease "
        f"{seconds(acquired.received, stopped):.2f} s and acted {seconds(acting.received, stopped):.2f} s "
        f"after the pause began (lease {LEASE} s); ex-leader's writes {counts(p.by(p.leader, audit_log))}, "
        f"successor's {counts(p.by(p.standby, audit_log))}; max active {watcher.max_active}"
    )


def test_partitioned_leader_makes_no_write_after_healing(
    pair: Callable[..., Pair],
    rollout: Callable[[], JobWatcher],
    audit_log: AuditLog,
    kube: Kube,
    namespace: str,
    rollout_nodes: tuple[str, list[str]],
) -> None:
    p = pair()
    watcher = rollout()
    leading(p, audit_log)
    with p.leader.proxy.partitioned():
        cut = now()
        assert p.leader.wait_exit(LEASE + 10) == 1  # it steps down on its own, before healing
        exited = now()
        acquired, acting = takeover(p, audit_log, cut)
        wait_for(lambda: seconds(now(), cut) > LEASE + 1, 30, "the partition to outlast the lease")
        healed = now()
    time.sleep(1.0)
    assert p.by(p.leader, audit_log, healed) == []
    after_cut = p.by(p.leader, audit_log, cut + timedelta(milliseconds=50))
    assert after_cut == [], f"writes by the partitioned leader after the cut: {after_cut}"
    assert_rollout_sound(kube, namespace, watcher, rollout_nodes[1])
    lost = p.leader.log_event("leadership lost")
    assert lost is not None
    print(
        f"\npartition: ex-leader declared the loss {seconds(parse_time(lost['timestamp']), cut):.2f} s and "
        f"exited {seconds(exited, cut):.2f} s after the cut (renew deadline {RENEW} s); stand-by took the Lease "
        f"{seconds(acquired.received, cut):.2f} s and acted {seconds(acting.received, cut):.2f} s after it "
        f"(lease {LEASE} s); max active {watcher.max_active}"
    )


def test_leader_of_a_hung_api_server_steps_down_within_the_renew_deadline(
    pair: Callable[..., Pair],
    rollout: Callable[[], JobWatcher],
    audit_log: AuditLog,
    kube: Kube,
    namespace: str,
    rollout_nodes: tuple[str, list[str]],
) -> None:
    p = pair()
    watcher = rollout()
    leading(p, audit_log)
    with p.leader.proxy.hung():
        hung = now()
        record = wait_for(
            lambda: p.leader.log_event("leadership lost"), RENEW + RETRY + 5, "the leader to step down", interval=0.05
        )
        lost = parse_time(record["timestamp"])
        assert seconds(lost, hung) <= RENEW + RETRY
        code = p.leader.wait_exit(30)
        exited = now()
        acquired, acting = takeover(p, audit_log, hung)
    assert code == 1
    time.sleep(1.0)  # connections held by the hang are cut at healing: nothing arrives late
    late = p.by(p.leader, audit_log, lost)
    assert late == [], f"writes by the leader after it stepped down: {late}"
    assert_rollout_sound(kube, namespace, watcher, rollout_nodes[1])
    print(
        f"\nhang: leader stepped down {seconds(lost, hung):.2f} s after the hang (renew deadline {RENEW} s, "
        f"retry {RETRY} s) and exited after {seconds(exited, hung):.2f} s; stand-by took the Lease "
        f"{seconds(acquired.received, hung):.2f} s and acted {seconds(acting.received, hung):.2f} s after the "
        f"hang; max active {watcher.max_active}"
    )


def test_sigterm_hands_over_without_overlapping_writes(
    pair: Callable[..., Pair],
    rollout: Callable[[], JobWatcher],
    audit_log: AuditLog,
    kube: Kube,
    namespace: str,
    rollout_nodes: tuple[str, list[str]],
) -> None:
    p = pair()
    watcher = rollout()
    leading(p, audit_log)
    term = now()
    assert p.leader.process.terminate(30) == 0
    stopped = now()
    acquired, acting = takeover(p, audit_log, term)
    assert seconds(acquired.received, term) < LEASE  # released: the successor did not wait the lease out
    assert_rollout_sound(kube, namespace, watcher, rollout_nodes[1])
    old, new = p.by(p.leader, audit_log), p.by(p.standby, audit_log)
    old_acting = [r for r in old if r.resource != "leases"]
    assert old_acting, "the leader wrote nothing before SIGTERM"
    release = [r for r in old if r.resource == "leases"][-1]
    assert release.verb == "update" and release.succeeded
    # The promise: nothing the old leader sent is still being processed once the successor has
    # taken the Lease, and the successor acts only after that. The stand-by's Lease requests
    # before it takes over are not acting writes (at start-up both replicas may find no Lease
    # and both create it: the loser's create is answered 409 while the winner goes on writing).
    # An acting write counts until the API server answered it. A Lease write counts until it
    # arrived: the successor can read the release once it is committed, which may be before the
    # API server stamps the release's answer.
    late = [r for r in old if (r.received if r.resource == "leases" else r.completed) >= acquired.received]
    assert not late, (
        f"the old leader's writes were still processed after the successor took the Lease\n"
        f"{describe([acquired])}\nlate:\n{describe(late)}"
    )
    early = [r for r in new if r.resource != "leases" and r.received <= acquired.received]
    assert not early, f"the successor acted before it took the Lease\n{describe([acquired])}\nearly:\n{describe(early)}"
    last = max(old_acting, key=lambda r: r.completed)
    print(
        f"\nSIGTERM: leader exited {seconds(stopped, term):.2f} s after the signal; successor took the Lease "
        f"{seconds(acquired.received, term):.2f} s and acted {seconds(acting.received, term):.2f} s after it; "
        f"from the old leader's last acting write answered to the successor taking the Lease "
        f"{seconds(acquired.received, last.completed):.2f} s, to its first acting write "
        f"{seconds(acting.received, last.completed):.2f} s; max active {watcher.max_active}"
    )
