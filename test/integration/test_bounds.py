"""Bounds a careless tenant cannot pass: ConfigMap watches for rerunOnConfigChange are capped
per DaemonJob and across the controller, and condition and Event messages are cut to the
API's limits. Each is driven past its bound against the real API server; the controller
stays healthy and another DaemonJob still completes."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from daemonjob import defaults
from daemonjob.controller.runtime.configmaps import ConfigMapLimits
from daemonjob.controller.runtime.events import EventRecorder
from daemonjob.controller.wiring.controller import Controller
from daemonjob.domain.spec.validate import SHOWN_VALUE_MAX
from daemonjob.machinery.client.kube import Kube, path_for
from daemonjob.testing.cluster import LocalCluster
from daemonjob.testing.doubles.builders import daemonjob, job_template
from daemonjob.testing.sim.kubelet import ANNOTATION_DURATION
from daemonjob.testing.waiting import wait_for

DJ_API = "daemonjob.io/v1alpha1"
PER_DAEMONJOB, TOTAL = 5, 8


@pytest.fixture
def controller(cluster: LocalCluster, namespace: str, installed_crd: None) -> Iterator[Controller]:
    kube = Kube.from_config(str(cluster.kubeconfig))
    events = EventRecorder(kube, host="test")
    events.start()
    ctl = Controller.for_kube(
        kube, namespace=namespace, workers=2, events=events, configmap_limits=ConfigMapLimits(PER_DAEMONJOB, TOTAL)
    )
    ctl.start_informers()
    assert ctl.wait_synced(30)
    ctl.start_workers()
    yield ctl
    ctl.stop()
    events.stop()


def body(name: str, label: str, configmaps: Sequence[str] = (), restart: str = "Never") -> dict[str, Any]:
    """On the nodes labelled bounds-test=`label`, reading each of `configmaps` (optional) into its
    environment and re-run when one changes."""
    env = [
        {"name": f"V{i}", "valueFrom": {"configMapKeyRef": {"name": cm, "key": "k", "optional": True}}}
        for i, cm in enumerate(configmaps)
    ]
    template = job_template(
        pod_annotations={ANNOTATION_DURATION: "0"},
        container={"image": "busybox:1.36", "env": env},
        pod_spec={"restartPolicy": restart},
    )
    return daemonjob(
        name,
        manifest=True,
        template=template,
        nodeSelector={"matchLabels": {"bounds-test": label}},
        rerunOnConfigChange=bool(configmaps),
    )


def condition(kube: Kube, ns: str, name: str, kind: str) -> dict[str, Any]:
    dj = kube.get(path_for(DJ_API, "daemonjobs", ns, name))
    return next((c for c in (dj.get("status") or {}).get("conditions") or () if c["type"] == kind), {})


def is_true(kube: Kube, ns: str, name: str, kind: str, reason: str | None = None) -> bool:
    c = condition(kube, ns, name, kind)
    return c.get("status") == "True" and (reason is None or c.get("reason") == reason)


def jobs_of(kube: Kube, ns: str, name: str) -> list[dict[str, Any]]:
    return kube.get(path_for("batch/v1", "jobs", ns), labelSelector=f"daemonjob.io/name={name}")["items"]


def events_of(kube: Kube, ns: str, name: str, reason: str) -> list[dict[str, Any]]:
    return [
        e
        for e in kube.get(path_for("v1", "events", ns), fieldSelector=f"involvedObject.name={name}")["items"]
        if e["reason"] == reason
    ]


def test_configmap_watches_past_either_cap_stall_that_daemonjob_only(
    kube: Kube, namespace: str, make_nodes, controller: Controller
) -> None:
    label = namespace
    make_nodes(2, labels={"bounds-test": label})
    create = path_for(DJ_API, "daemonjobs", namespace)

    # one DaemonJob referencing more ConfigMaps than one may have watched
    kube.create(create, body("many", label, [f"many-{i}" for i in range(PER_DAEMONJOB + 1)]))
    wait_for(
        lambda: is_true(kube, namespace, "many", "Stalled", "ConfigMapLimitExceeded"),
        timeout=30,
        what="many Stalled past the per-DaemonJob cap",
    )
    message = condition(kube, namespace, "many", "Stalled")["message"]
    assert f"references {PER_DAEMONJOB + 1} ConfigMaps, more than the {PER_DAEMONJOB}" in message
    assert "--max-configmap-watches-per-daemonjob" in message
    assert controller.configmaps is not None and controller.configmaps.watched() == 0
    wait_for(lambda: events_of(kube, namespace, "many", "ConfigMapLimitExceeded"), timeout=30, what="its Event")

    # two within the per-DaemonJob cap fill the controller's; a third is refused until one goes
    kube.create(create, body("fill-a", label, [f"a-{i}" for i in range(4)]))
    kube.create(create, body("fill-b", label, [f"b-{i}" for i in range(4)]))
    for name in ("fill-a", "fill-b"):
        wait_for(lambda n=name: is_true(kube, namespace, n, "Complete"), timeout=60, what=f"{name} Complete")
    assert controller.configmaps.watched() == TOTAL
    kube.create(create, body("late", label, ["late-0"]))
    wait_for(
        lambda: is_true(kube, namespace, "late", "Stalled", "ConfigMapLimitExceeded"),
        timeout=30,
        what="late Stalled past the controller-wide cap",
    )
    message = condition(kube, namespace, "late", "Stalled")["message"]
    assert f"limit of {TOTAL} ConfigMap watches (--max-configmap-watches)" in message
    assert jobs_of(kube, namespace, "late") == [] and jobs_of(kube, namespace, "many") == []
    assert controller.configmaps.watched() == TOTAL
    watch_threads = [t for t in threading.enumerate() if t.name.startswith(f"informer-configmap-{namespace}-")]
    assert len(watch_threads) == TOTAL  # a watch thread per watched ConfigMap, none for the refused

    # others are unaffected: a DaemonJob without ConfigMaps completes, the controller is healthy
    kube.create(create, body("plain", label))
    wait_for(lambda: is_true(kube, namespace, "plain", "Complete"), timeout=60, what="plain Complete")
    assert controller.healthy() is None

    # room made: the refused DaemonJob is woken, watched and rolls out
    kube.delete(path_for(DJ_API, "daemonjobs", namespace, "fill-a"))
    wait_for(lambda: is_true(kube, namespace, "late", "Complete"), timeout=60, what="late Complete once room was made")
    assert not is_true(kube, namespace, "late", "Stalled")
    assert controller.configmaps.watched() == 5  # fill-b's 4 and late's 1


def test_a_huge_bad_value_gives_messages_within_the_api_limits(
    kube: Kube, namespace: str, make_nodes, controller: Controller
) -> None:
    label = namespace
    make_nodes(1, labels={"bounds-test": label})
    create = path_for(DJ_API, "daemonjobs", namespace)
    kube.create(create, body("huge", label, restart="A" * 1_000_000))
    wait_for(lambda: is_true(kube, namespace, "huge", "Stalled"), timeout=60, what="huge Stalled")
    stalled = condition(kube, namespace, "huge", "Stalled")
    # The rule book quotes at most SHOWN_VALUE_MAX characters of a refused value, so the 1 MB
    # string never reaches the status; every message is cut to the API's limits besides.
    size = len(stalled["message"].encode())
    assert size <= 2 * SHOWN_VALUE_MAX + 1024 < defaults.CONDITION_MESSAGE_MAX_BYTES
    assert (
        "restartPolicy: Unsupported value" in stalled["message"] and "spec.jobTemplate: Too long" in stalled["message"]
    )
    wait_for(lambda: events_of(kube, namespace, "huge", "InvalidSpec"), timeout=30, what="the InvalidSpec Event")
    event = events_of(kube, namespace, "huge", "InvalidSpec")[0]
    assert len(event["message"].encode()) <= defaults.EVENT_MESSAGE_MAX_BYTES
    assert event["message"].startswith("spec.jobTemplate")

    kube.create(create, body("fine", label))
    wait_for(lambda: is_true(kube, namespace, "fine", "Complete"), timeout=60, what="another DaemonJob Complete")
    assert controller.healthy() is None
    assert len(events_of(kube, namespace, "huge", "InvalidSpec")) == 1  # the cut message reads as unchanged
