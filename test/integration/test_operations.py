"""Operating the controller: leader election handovers, metrics, probes, CLI failures."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from daemonjob.domain.shared.apinames import ANNOTATION_NODE, LABEL_NAME, LABEL_REVISION
from daemonjob.machinery.client.kube import Kube, path_for
from daemonjob.testing.cluster import LocalCluster, kubeconfig_text
from daemonjob.testing.doubles.builders import daemonjob, job_template
from daemonjob.testing.process import ControllerProcess
from daemonjob.testing.sim.kubelet import ANNOTATION_DURATION
from daemonjob.testing.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]
DJ_API = "daemonjob.io/v1alpha1"


@pytest.fixture
def controllers(
    cluster: LocalCluster, tmp_path: Path, installed_crd: None
) -> Iterator[Callable[..., ControllerProcess]]:
    started: list[ControllerProcess] = []

    def start(*args: str) -> ControllerProcess:
        proc = ControllerProcess(
            cluster.kubeconfig, tmp_path / f"controller-{len(started)}.log", *args, "--log-format", "json"
        ).start()
        started.append(proc)
        return proc

    yield start
    for proc in started:
        proc.stop()
        assert not proc.running()


def sleeping(name: str, label: str, duration: str = "1", **spec: Any) -> dict[str, Any]:
    """On the nodes labelled ops-test=`label`, its pods sleeping `duration` seconds."""
    template = job_template(
        pod_annotations={ANNOTATION_DURATION: duration},
        container={"name": "main", "image": "busybox:1.36", "command": ["sh", "-c", f"sleep {duration}"]},
    )
    return daemonjob(
        name, manifest=True, template=template, **{"nodeSelector": {"matchLabels": {"ops-test": label}}, **spec}
    )


def status(kube: Kube, ns: str, name: str) -> dict[str, Any]:
    return kube.get(path_for(DJ_API, "daemonjobs", ns, name)).get("status") or {}


def complete(kube: Kube, ns: str, name: str) -> bool:
    st = status(kube, ns, name)
    return any(c["type"] == "Complete" and c["status"] == "True" for c in st.get("conditions") or [])


def jobs_of(kube: Kube, ns: str, name: str) -> list[dict[str, Any]]:
    return kube.get(path_for("batch/v1", "jobs", ns), labelSelector=f"{LABEL_NAME}={name}")["items"]


def assert_one_job_per_node_and_revision(jobs: list[dict[str, Any]]) -> None:
    pairs = [(j["metadata"]["annotations"][ANNOTATION_NODE], j["metadata"]["labels"][LABEL_REVISION]) for j in jobs]
    assert len(pairs) == len(set(pairs)), f"duplicate Jobs: {sorted(pairs)}"


def leader_of(procs: list[ControllerProcess]) -> list[ControllerProcess]:
    return [p for p in procs if p.running() and p.metric("daemonjob_leader") == 1]


def test_only_the_leader_acts_and_sigkill_hands_over(kube: Kube, namespace: str, make_nodes, controllers) -> None:
    label = namespace
    nodes = make_nodes(4, labels={"ops-test": label})
    lease_args = ("--leader-elect", "--leader-election-namespace", namespace, "--leader-election-id", "dj-leader")
    a, b = controllers(*lease_args), controllers(*lease_args)
    a.wait_ready()
    b.wait_ready()  # a stand-by is ready too: its caches are synced
    leaders = wait_for(lambda: leader_of([a, b]), what="a leader")
    assert len(leaders) == 1
    leader = leaders[0]
    standby = b if leader is a else a
    kube.create(path_for(DJ_API, "daemonjobs", namespace), sleeping("first", label, maxParallel=2))
    wait_for(lambda: complete(kube, namespace, "first"), what="first rollout")
    assert leader.metric("daemonjob_jobs_created_total") == len(nodes)
    assert standby.metric("daemonjob_jobs_created_total") == 0
    assert standby.metric("daemonjob_leader") == 0

    kube.create(path_for(DJ_API, "daemonjobs", namespace), sleeping("second", label, duration="3", maxParallel=1))
    wait_for(lambda: jobs_of(kube, namespace, "second"), what="second rollout started")
    killed_at = time.monotonic()
    leader.kill()
    wait_for(lambda: standby.metric("daemonjob_leader") == 1, timeout=40, what="the stand-by to take over")
    takeover = time.monotonic() - killed_at
    # lease duration 15 s + retry period 2 s (+ jitter and polling)
    assert takeover < 15 + 2 + 5, f"takeover took {takeover:.1f}s"
    wait_for(lambda: complete(kube, namespace, "second"), timeout=90, what="second rollout after handover")
    jobs = jobs_of(kube, namespace, "second")
    assert_one_job_per_node_and_revision(jobs)
    assert len(jobs) == len(nodes)


def test_sigterm_releases_the_lease(kube: Kube, namespace: str, make_nodes, controllers) -> None:
    label = namespace
    make_nodes(2, labels={"ops-test": label})
    lease_args = ("--leader-elect", "--leader-election-namespace", namespace, "--leader-election-id", "dj-release")
    a = controllers(*lease_args)
    wait_for(lambda: a.metric("daemonjob_leader") == 1, what="first leader")
    b = controllers(*lease_args)
    b.wait_ready()
    stopped_at = time.monotonic()
    assert a.terminate() == 0
    lease = kube.get(path_for("coordination.k8s.io/v1", "leases", namespace, "dj-release"))
    assert not lease["spec"].get("holderIdentity"), "the lease was not released"
    wait_for(lambda: b.metric("daemonjob_leader") == 1, timeout=20, what="the successor")
    assert time.monotonic() - stopped_at < 8, "a released lease should be taken at the next retry"
    kube.create(path_for(DJ_API, "daemonjobs", namespace), sleeping("after", label))
    wait_for(lambda: complete(kube, namespace, "after"), what="rollout by the successor")
    assert_one_job_per_node_and_revision(jobs_of(kube, namespace, "after"))


def test_metrics_and_probes_during_a_rollout(kube: Kube, namespace: str, make_nodes, controllers) -> None:
    label = namespace
    nodes = make_nodes(3, labels={"ops-test": label})
    proc = controllers("--namespace", namespace)
    proc.wait_ready()
    assert proc.get(proc.health_port, "/healthz")[0] == 200
    assert proc.get(proc.health_port, "/readyz")[0] == 200
    kube.create(path_for(DJ_API, "daemonjobs", namespace), sleeping("observed", label))
    wait_for(lambda: complete(kube, namespace, "observed"), what="rollout")
    labels = {"namespace": namespace, "name": "observed"}
    wait_for(lambda: proc.metric("daemonjob_nodes", state="succeeded", **labels) == len(nodes), what="gauge")
    assert proc.metric("daemonjob_nodes", state="desired", **labels) == len(nodes)
    assert proc.metric("daemonjob_nodes", state="active", **labels) == 0
    assert proc.metric("daemonjob_jobs_created_total") == len(nodes)
    assert proc.metric("daemonjob_api_requests_total", verb="create", resource="jobs", code="201") == len(nodes)
    assert proc.metric("daemonjob_api_requests_total", verb="list") >= 3  # one per informer
    assert proc.metric("daemonjob_reconcile_total", result="success") >= 1
    assert proc.metric("daemonjob_reconcile_duration_seconds_count") >= 1
    assert proc.metric("workqueue_adds_total", name="daemonjob") >= 1
    assert proc.metric("daemonjob_build_info") == 1
    assert proc.metric("daemonjob_leader") == 1
    text = proc.metrics_text()
    for name in (
        "workqueue_depth",
        "workqueue_queue_duration_seconds",
        "workqueue_work_duration_seconds",
        "workqueue_retries_total",
        "daemonjob_watch_restarts_total",
        "daemonjob_relists_total",
    ):
        assert f"# TYPE {name}" in text or f"# HELP {name}" in text, name
    kube.delete(path_for(DJ_API, "daemonjobs", namespace, "observed"))
    wait_for(lambda: 'name="observed"' not in proc.metrics_text(), what="series of a deleted DaemonJob removed")
    assert proc.terminate() == 0


def run_cli(*args: str, timeout: float = 30) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "daemonjob", *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT
    )


def test_unreachable_api_server_is_one_clear_line(tmp_path: Path, cluster: LocalCluster) -> None:
    from daemonjob.testing.cluster import free_port

    kc = tmp_path / "kubeconfig"
    kc.write_text(kubeconfig_text(f"https://127.0.0.1:{free_port()}", cluster.pki / "ca.crt", "x", "nobody"))
    out = run_cli("--kubeconfig", str(kc), "--metrics-bind-address", "0", "--health-probe-bind-address", "0")
    assert out.returncode == 1
    assert "cannot reach the Kubernetes API server" in out.stderr
    assert "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) == 1


def test_bad_flags_fail_cleanly(tmp_path: Path) -> None:
    out = run_cli("--workers", "zero")
    assert out.returncode == 2 and "--workers" in out.stderr and "Traceback" not in out.stderr
    out = run_cli("--kubeconfig", str(tmp_path / "missing"))
    assert out.returncode == 1 and "does not exist" in out.stderr and "Traceback" not in out.stderr
    out = run_cli("--metrics-bind-address", "nonsense", "--kubeconfig", str(tmp_path / "missing"))
    assert out.returncode == 1 and "bind address" in out.stderr


def test_wrong_token_is_reported(tmp_path: Path, cluster: LocalCluster) -> None:
    kc = tmp_path / "kubeconfig"
    kc.write_text(kubeconfig_text(cluster.server, cluster.pki / "ca.crt", "wrong-token", "nobody"))
    out = run_cli("--kubeconfig", str(kc), "--metrics-bind-address", "0", "--health-probe-bind-address", "0")
    assert out.returncode == 1 and "refused" in out.stderr and "Traceback" not in out.stderr


def test_a_leader_that_cannot_renew_exits_non_zero(kube: Kube, namespace: str, controllers) -> None:
    proc = controllers("--leader-elect", "--leader-election-namespace", namespace, "--leader-election-id", "dj-lost")
    wait_for(lambda: proc.metric("daemonjob_leader") == 1, what="leadership")
    path = path_for("coordination.k8s.io/v1", "leases", namespace, "dj-lost")
    deadline = time.monotonic() + 40
    while proc.running() and time.monotonic() < deadline:  # another holder keeps the lease fresh
        lease = kube.get(path)
        lease["spec"]["holderIdentity"] = "usurper"
        lease["spec"]["renewTime"] = time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime())
        try:
            kube.put(path, lease)
        except Exception:
            pass
        time.sleep(0.5)
    assert not proc.running(), "the deposed leader kept running"
    assert proc.proc is not None and proc.proc.returncode == 1
    assert "leadership lost" in proc.log_tail()
