"""The controller in-process: what it enqueues, what it caches, what it writes when idle."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from daemonjob.controller.metrics.metrics import Metrics
from daemonjob.controller.wiring.controller import Controller
from daemonjob.machinery.client.kube import PATCH_STRATEGIC, Kube, path_for
from daemonjob.testing.cluster import LocalCluster
from daemonjob.testing.doubles.builders import daemonjob, job_template
from daemonjob.testing.sim.kubelet import ANNOTATION_DURATION, node_conditions
from daemonjob.testing.waiting import wait_for

DJ_API = "daemonjob.io/v1alpha1"


@pytest.fixture
def controller(cluster: LocalCluster, namespace: str, installed_crd: None) -> Iterator[Controller]:
    metrics = Metrics()
    kube = Kube.from_config(str(cluster.kubeconfig), on_request=metrics.on_request)
    ctl = Controller.for_kube(kube, namespace=namespace, workers=2, metrics=metrics)
    ctl.start_informers()
    assert ctl.wait_synced(30)
    ctl.start_workers()
    yield ctl
    ctl.stop()
    assert ctl.healthy() is None or "worker" not in (ctl.healthy() or "")


def sample(m: Metrics, metric: str, /, **labels: str) -> float:
    return m.registry.get_sample_value(metric, labels) or 0.0


def api_calls(m: Metrics, verbs: tuple[str, ...]) -> float:
    total = 0.0
    for family in m.registry.collect():
        for s in family.samples:
            if s.name == "daemonjob_api_requests_total" and s.labels.get("verb") in verbs:
                total += s.value
    return total


def create_dj(kube: Kube, ns: str, name: str, label: str) -> None:
    """Create one on the nodes labelled ctl-test=`label`, its pods done at once."""
    template = job_template(pod_annotations={ANNOTATION_DURATION: "0"}, container={"image": "busybox:1.36"})
    body = daemonjob(name, manifest=True, template=template, nodeSelector={"matchLabels": {"ctl-test": label}})
    kube.create(path_for(DJ_API, "daemonjobs", ns), body)


def complete(kube: Kube, ns: str, name: str) -> bool:
    st = kube.get(path_for(DJ_API, "daemonjobs", ns, name)).get("status") or {}
    return any(c["type"] == "Complete" and c["status"] == "True" for c in st.get("conditions") or [])


def recorded(kube: Kube, ns: str, name: str) -> int | None:
    st = kube.get(path_for(DJ_API, "daemonjobs", ns, name)).get("status") or {}
    return (st.get("results") or {}).get("recorded")


def test_heartbeats_enqueue_nothing_and_idle_costs_nothing(
    kube: Kube, namespace: str, make_nodes, controller: Controller
) -> None:
    m = controller.metrics
    nodes = make_nodes(3, labels={"ctl-test": namespace})
    others = make_nodes(1, labels={"ctl-test": "someone-else"})
    create_dj(kube, namespace, "quiet", namespace)
    wait_for(lambda: complete(kube, namespace, "quiet"), what="rollout")
    # its results written too: the recorder's write wakes the DaemonJob once more (a loaded machine
    # can delay it past the drain below)
    wait_for(lambda: recorded(kube, namespace, "quiet") == 3, what="results recorded")
    time.sleep(1.0)  # let the last Job events drain
    adds = sample(m, "workqueue_adds_total", name="daemonjob")
    writes = api_calls(m, ("create", "update", "patch", "delete"))
    lists = api_calls(m, ("list",))
    for node in nodes + others:  # heartbeats: status-only changes, several times
        for _ in range(3):
            kube.patch(  # as a kubelet reports: new heartbeat times, the transition time left as it is
                path_for("v1", "nodes", name=node, subresource="status"),
                {"status": {"conditions": node_conditions(transition=False)}},
                content_type=PATCH_STRATEGIC,
            )
    kube.patch(path_for("v1", "nodes", name=others[0]), {"metadata": {"labels": {"unrelated": "x"}}})
    time.sleep(2.0)
    assert sample(m, "workqueue_adds_total", name="daemonjob") == adds, "a heartbeat enqueued a DaemonJob"
    assert api_calls(m, ("create", "update", "patch", "delete")) == writes, "idle controller wrote"
    assert api_calls(m, ("list",)) == lists, "idle controller listed"

    # A change that matters to this DaemonJob enqueues it: a node now matches its selector.
    kube.patch(path_for("v1", "nodes", name=others[0]), {"metadata": {"labels": {"ctl-test": namespace}}})
    wait_for(lambda: sample(m, "workqueue_adds_total", name="daemonjob") > adds, what="enqueue on relevant change")
    wait_for(
        lambda: kube.get(path_for(DJ_API, "daemonjobs", namespace, "quiet"))["status"].get("desiredNodes") == 4,
        what="the new node counted",
    )


def test_unrelated_jobs_are_not_cached(kube: Kube, namespace: str, controller: Controller) -> None:
    kube.create(
        path_for("batch/v1", "jobs", namespace),
        {
            "metadata": {"name": "plain"},
            "spec": {
                "template": {
                    "spec": {
                        "restartPolicy": "Never",
                        "nodeSelector": {"nowhere": "x"},
                        "containers": [{"name": "c", "image": "busybox:1.36"}],
                    }
                }
            },
        },
    )
    time.sleep(1.0)
    assert controller.jobs.store.get(f"{namespace}/plain") is None
    assert len(controller.jobs.store) == 0


def test_cached_objects_are_trimmed(kube: Kube, namespace: str, make_nodes, controller: Controller) -> None:
    nodes = make_nodes(1, labels={"ctl-test": namespace})
    create_dj(kube, namespace, "trim", namespace)
    wait_for(lambda: complete(kube, namespace, "trim"), what="rollout")
    node = controller.nodes.store.get(nodes[0])
    # Of the status only the Ready condition (its transition, not its heartbeat) and the boot
    # ID: a heartbeat is no change.
    assert set(node) == {"metadata", "spec", "status"}
    assert set(node["status"]) == {"conditions", "nodeInfo"} and set(node["status"]["nodeInfo"]) == {"bootID"}
    (ready,) = node["status"]["conditions"]
    assert set(ready) == {"type", "status", "lastTransitionTime"} and ready["type"] == "Ready"
    assert set(node["metadata"]) <= {"name", "uid", "labels", "annotations"}
    job = controller.jobs.store.list()[0]
    assert "spec" not in job and "managedFields" not in job["metadata"]
