"""Status writes carry the resourceVersion they were computed from: a stale one is refused by the
API server (409) and never overwrites a newer status; the controller then requeues and
converges, though a status-only change enqueues nothing and the resync is off."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pytest

from daemonjob.controller.runtime.informers import Informers
from daemonjob.controller.runtime.jobcontrol import KubeJobControl
from daemonjob.controller.wiring.controller import Controller
from daemonjob.machinery.client.kube import PATCH_MERGE, ApiError, Kube, path_for
from daemonjob.testing.audit import AuditLog
from daemonjob.testing.cluster import LocalCluster
from daemonjob.testing.doubles.builders import daemonjob, job_template
from daemonjob.testing.sim.jobwatch import is_true
from daemonjob.testing.sim.kubelet import ANNOTATION_DURATION
from daemonjob.testing.waiting import wait_for

DJ_API = "daemonjob.io/v1alpha1"
USER = "daemonjob-a"


def body(name: str, label: str) -> dict[str, Any]:
    """On the nodes labelled status-test=`label`, its pods done at once."""
    template = job_template(pod_annotations={ANNOTATION_DURATION: "0"}, container={"image": "busybox:1.36"})
    return daemonjob(name, manifest=True, template=template, nodeSelector={"matchLabels": {"status-test": label}})


def status_path(namespace: str, name: str) -> str:
    return path_for(DJ_API, "daemonjobs", namespace, name, "status")


def as_user(cluster: LocalCluster) -> Kube:
    return Kube.from_config(str(cluster.kubeconfig_for(USER)))


def test_a_status_patch_from_an_old_resource_version_is_refused(
    cluster: LocalCluster, kube: Kube, namespace: str, installed_crd: None
) -> None:
    dj = kube.create(path_for(DJ_API, "daemonjobs", namespace), body("stale", namespace))
    computed_from = dj["metadata"]["resourceVersion"]
    newer = kube.patch(status_path(namespace, "stale"), {"status": {"desiredNodes": 7}}, content_type=PATCH_MERGE)
    control = KubeJobControl(as_user(cluster))
    with pytest.raises(ApiError) as refused:
        control.patch_status(namespace, "stale", {"desiredNodes": 3}, computed_from)
    assert refused.value.conflict
    now = kube.get(path_for(DJ_API, "daemonjobs", namespace, "stale"))
    assert now["status"]["desiredNodes"] == 7
    assert now["metadata"]["resourceVersion"] == newer["metadata"]["resourceVersion"]


class RacedJobControl(KubeJobControl):
    """Before the controller's first status write lands, another writer (a stale leader, say)
    writes a status of its own: the controller's patch is then computed from an old version."""

    def __init__(self, kube: Kube, other: Callable[[str, str], None]) -> None:
        super().__init__(kube)
        self.other = other
        self.outcomes: list[int] = []

    def patch_status(self, namespace: str, name: str, status: Mapping[str, Any], resource_version: str | None) -> None:
        if not self.outcomes:
            self.other(namespace, name)
        try:
            super().patch_status(namespace, name, status, resource_version)
        except ApiError as exc:
            self.outcomes.append(exc.status)
            raise
        self.outcomes.append(200)


def test_the_controller_requeues_on_a_status_conflict_and_converges(
    cluster: LocalCluster,
    kube: Kube,
    namespace: str,
    installed_crd: None,
    make_nodes: Callable[..., list[str]],
    audit_log: AuditLog,
) -> None:
    nodes = make_nodes(2, labels={"status-test": namespace})
    mark = audit_log.mark()

    def other(ns: str, name: str) -> None:
        kube.patch(status_path(ns, name), {"status": {"desiredNodes": 99}}, content_type=PATCH_MERGE)

    user_kube = as_user(cluster)
    control = RacedJobControl(user_kube, other)
    ctl = Controller(Informers.for_kube(user_kube, namespace=namespace), control, workers=1, resync_interval=0)
    ctl.start_informers()
    try:
        assert ctl.wait_synced(30)
        ctl.start_workers()
        kube.create(path_for(DJ_API, "daemonjobs", namespace), body("raced", namespace))

        def converged() -> bool:
            dj = kube.get(path_for(DJ_API, "daemonjobs", namespace, "raced"))
            return is_true(dj, "Complete") and (dj.get("status") or {}).get("desiredNodes") == len(nodes)

        wait_for(
            converged,
            60,
            "the status to converge",
            describe=lambda: (
                control.outcomes,
                kube.get(path_for(DJ_API, "daemonjobs", namespace, "raced")).get("status"),
            ),
        )
    finally:
        ctl.stop(timeout=5)
    assert control.outcomes[0] == 409 and 200 in control.outcomes, control.outcomes
    codes = [
        r.code for r in audit_log.writes(user=USER, since=mark, resources=["daemonjobs/status"], namespace=namespace)
    ]
    assert codes[0] == 409 and 200 in codes, codes  # as the API server answered them
