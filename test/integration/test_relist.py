"""A Job that finishes while the watch is cut off is seen at the relist that follows a real 410 Gone.

A cluster of its own serves Jobs without the API server's watch cache, so a Job watch reads
etcd directly; compacting etcd while a client is cut off makes its re-watch answer 410 Gone,
as after an API server upgrade or a long partition. The client then relists, and must tell
its handlers about the Job that finished in between, though the Job cache keeps no
resourceVersion.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from daemonjob.controller.metrics.metrics import Metrics
from daemonjob.controller.runtime.transforms import job_transform
from daemonjob.controller.wiring.controller import Controller
from daemonjob.domain.shared.apinames import LABEL_NAME
from daemonjob.machinery.cache.informer import Backoff, Handlers, Informer, InformerHooks
from daemonjob.machinery.client.kube import PATCH_STRATEGIC, Kube, path_for
from daemonjob.machinery.process.clock import RealClock
from daemonjob.testing.cluster import ClusterOptions, LocalCluster, kubeconfig_text
from daemonjob.testing.crd import install_crd
from daemonjob.testing.doubles.builders import daemonjob, job_template
from daemonjob.testing.faults.proxy import FaultProxy
from daemonjob.testing.sim.kubelet import ANNOTATION_DURATION, NodeSpec, SimKubelet, now_rfc3339
from daemonjob.testing.waiting import wait_for

DJ_API = "daemonjob.io/v1alpha1"
RUNS_FOREVER = {ANNOTATION_DURATION: "86400"}  # the test ends the pod itself, while the client is cut off


@pytest.fixture(scope="module")
def uncached() -> Iterator[LocalCluster]:
    with LocalCluster(options=ClusterOptions(uncached_resources=("jobs.batch",))) as c:
        yield c


@pytest.fixture(scope="module")
def direct(uncached: LocalCluster) -> Kube:
    """A client that is never cut off: the test's own hands on the cluster."""
    return Kube.from_config(str(uncached.kubeconfig))


@pytest.fixture(scope="module")
def sim(direct: Kube) -> Iterator[SimKubelet]:
    with SimKubelet(direct) as k:
        yield k


@pytest.fixture
def ns(direct: Kube) -> str:
    name = f"t-{uuid.uuid4().hex[:8]}"
    direct.create(path_for("v1", "namespaces"), {"metadata": {"name": name}})
    return name


@pytest.fixture
def node(sim: SimKubelet) -> Iterator[str]:
    name = f"relist-{uuid.uuid4().hex[:6]}"
    sim.add_nodes([NodeSpec(name, labels={"relist-test": name})])
    sim.wait_ready([name], timeout=60)
    yield name
    sim.delete_node(name)


@pytest.fixture
def link(uncached: LocalCluster, tmp_path: Any) -> Iterator[tuple[FaultProxy, str]]:
    """A proxy to the API server that can partition the client, and a kubeconfig through it."""
    with FaultProxy.to_url(uncached.server) as proxy:
        kubeconfig = tmp_path / "kubeconfig-through-link"
        kubeconfig.write_text(kubeconfig_text(proxy.url(), uncached.pki / "ca.crt", uncached.token, "admin"))
        yield proxy, str(kubeconfig)


def job_pod(kube: Kube, ns: str, job: str) -> dict[str, Any] | None:
    pods = kube.get(path_for("v1", "pods", ns), labelSelector=f"job-name={job}")["items"]
    return pods[0] if pods else None


def running(kube: Kube, ns: str, job: str) -> bool:
    pod = job_pod(kube, ns, job)
    return pod is not None and (pod.get("status") or {}).get("phase") == "Running"


def finish_pod(kube: Kube, ns: str, job: str) -> None:
    """What the kubelet reports when the container exits 0."""
    pod = job_pod(kube, ns, job)
    assert pod is not None, f"no pod for Job {job}"
    now = now_rfc3339()
    started = pod["status"].get("startTime") or now
    statuses = [
        {
            "name": c["name"],
            "image": c["image"],
            "imageID": "",
            "ready": False,
            "started": False,
            "restartCount": 0,
            "state": {"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": started, "finishedAt": now}},
        }
        for c in pod["spec"]["containers"]
    ]
    kube.patch(
        path_for("v1", "pods", ns, pod["metadata"]["name"], "status"),
        {"status": {"phase": "Succeeded", "containerStatuses": statuses}},
        content_type=PATCH_STRATEGIC,
    )


def job_complete(job: Any) -> bool:
    conditions = (job.get("status") or {}).get("conditions") or ()
    return any(c["type"] == "Complete" and c["status"] == "True" for c in conditions)


def expire_history(cluster: LocalCluster, kube: Kube, ns: str) -> None:
    """One more write, then compact: every revision the cut-off client may resume from is gone."""
    kube.create(path_for("v1", "configmaps", ns), {"metadata": {"generateName": "bump-"}})
    cluster.compact_etcd()


def test_job_informer_emits_the_update_after_a_410_relist(
    uncached: LocalCluster, direct: Kube, ns: str, node: str, link: tuple[FaultProxy, str]
) -> None:
    proxy, kubeconfig = link
    direct.create(
        path_for("batch/v1", "jobs", ns),
        {
            "metadata": {"name": "finisher", "labels": {LABEL_NAME: "relist"}},
            "spec": {
                "backoffLimit": 0,
                "template": {
                    "metadata": {"annotations": RUNS_FOREVER},
                    "spec": {
                        "nodeName": node,
                        "restartPolicy": "Never",
                        "containers": [{"name": "c", "image": "busybox:1.36"}],
                    },
                },
            },
        },
    )
    wait_for(lambda: running(direct, ns, "finisher"), what="the Job's pod running")

    restarts: list[str] = []
    relists: list[str] = []
    updates: list[tuple[Any, Any]] = []
    lock = threading.Lock()

    def on_update(old: Any, new: Any) -> None:
        with lock:
            updates.append((old, new))

    inf = Informer(
        Kube.from_config(kubeconfig),
        "batch/v1",
        "jobs",
        namespace=ns,
        label_selector=LABEL_NAME,
        transform=job_transform,
        backoff=Backoff(RealClock(), initial=0.1, cap=0.5),
        hooks=InformerHooks(on_relist=relists.append, on_watch_restart=lambda _name, cause: restarts.append(cause)),
    )
    inf.add_handlers(Handlers(on_update=on_update))
    inf.start()
    try:
        assert inf.wait_for_sync(30)
        key = f"{ns}/finisher"
        wait_for(lambda: inf._stream is not None, what="the watch open")
        proxy.partition()
        wait_for(lambda: "connection" in restarts, what="the watch to notice the cut")
        finish_pod(direct, ns, "finisher")
        wait_for(
            lambda: job_complete(direct.get(path_for("batch/v1", "jobs", ns, "finisher"))),
            what="the Job Complete on the server",
        )
        assert not job_complete(inf.store.get(key)), "the cut-off informer saw the Job finish"
        expire_history(uncached, direct, ns)
        with lock:
            updates.clear()
        proxy.heal()

        wait_for(
            lambda: "expired" in restarts, what="a 410 Gone on the re-watch", timeout=30, describe=lambda: restarts
        )
        wait_for(lambda: relists, what="a relist")

        def finisher_updates() -> list[tuple[Any, Any]]:
            with lock:
                return [(old, new) for old, new in updates if new["metadata"]["name"] == "finisher"]

        # on_relist fires as the relist begins; its updates reach the handlers once the list is in
        seen = wait_for(
            finisher_updates, what="the finished Job's update after the relist", timeout=30, describe=lambda: updates
        )
        old, new = seen[-1]
        assert not job_complete(old) and job_complete(new)
        assert job_complete(inf.store.get(key))
    finally:
        inf.stop()


def dj_complete(kube: Kube, ns: str, name: str) -> bool:
    status = kube.get(path_for(DJ_API, "daemonjobs", ns, name)).get("status") or {}
    return any(c["type"] == "Complete" and c["status"] == "True" for c in status.get("conditions") or ())


def test_daemonjob_completes_after_the_relist_without_the_resync(
    uncached: LocalCluster, direct: Kube, ns: str, node: str, link: tuple[FaultProxy, str]
) -> None:
    install_crd([str(uncached.bin_dir / "kubectl"), "--kubeconfig", str(uncached.kubeconfig)])
    proxy, kubeconfig = link
    metrics = Metrics()
    ctl = Controller.for_kube(
        Kube.from_config(kubeconfig, on_request=metrics.on_request),
        namespace=ns,
        workers=2,
        metrics=metrics,
        resync_interval=600.0,
    )
    ctl.start_informers()
    assert ctl.wait_synced(30)
    ctl.start_workers()
    try:
        direct.create(
            path_for(DJ_API, "daemonjobs", ns),
            daemonjob(
                "once",
                manifest=True,
                template=job_template(pod_annotations=RUNS_FOREVER, container={"image": "busybox:1.36"}),
                nodeSelector={"matchLabels": {"relist-test": node}},
            ),
        )
        jobs = wait_for(lambda: direct.get(path_for("batch/v1", "jobs", ns))["items"], what="the node's Job")
        job = jobs[0]["metadata"]["name"]
        wait_for(lambda: running(direct, ns, job), what="the Job's pod running")
        wait_for(
            lambda: (
                len(ctl.queue) == 0
                and (direct.get(path_for(DJ_API, "daemonjobs", ns, "once")).get("status") or {}).get("conditions")
            ),
            what="the controller idle with a status written",
        )
        time.sleep(1.0)  # the Job's own status updates (active: 1) drain

        proxy.partition()
        finish_pod(direct, ns, job)
        wait_for(
            lambda: job_complete(direct.get(path_for("batch/v1", "jobs", ns, job))),
            what="the Job Complete on the server",
        )
        expire_history(uncached, direct, ns)
        assert not dj_complete(direct, ns, "once")
        proxy.heal()

        wait_for(
            lambda: dj_complete(direct, ns, "once"),
            timeout=90,
            what="the DaemonJob Complete",
            describe=lambda: direct.get(path_for(DJ_API, "daemonjobs", ns, "once")).get("status"),
        )
        restarts = metrics.registry.get_sample_value(
            "daemonjob_watch_restarts_total", {"informer": "jobs", "cause": "expired"}
        )
        assert restarts, "the Job watch never got 410 Gone: the scenario did not happen"
    finally:
        ctl.stop()
