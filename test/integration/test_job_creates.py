"""Job creates sent together on one connection to the real API server: each answered in order."""

from __future__ import annotations

from daemonjob.controller.runtime.jobcontrol import KubeJobControl
from daemonjob.domain.jobs.jobbody import build_job
from daemonjob.machinery.client.kube import ApiError, Kube, path_for
from daemonjob.testing.doubles.builders import daemonjob


def test_creates_sent_together_each_get_their_own_answer(kube: Kube, namespace: str) -> None:
    dj = daemonjob(namespace=namespace)
    bodies = [build_job(dj, f"node-{i}", "rev1") for i in range(6)]
    sent: list[tuple[str, str, int]] = []
    control = KubeJobControl(Kube(kube.configuration, on_request=lambda *info: sent.append(info)))
    assert control.create_jobs(namespace, bodies[:3]) == [None, None, None]

    invalid = build_job(dj, "node-bad", "rev1")
    invalid["spec"]["template"]["spec"]["containers"] = []  # refused by validation (422)
    again = control.create_jobs(namespace, [bodies[3], bodies[1], invalid, bodies[4], bodies[5]])
    assert again[0] is None and again[3] is None and again[4] is None
    existed, refused = again[1], again[2]
    assert isinstance(existed, ApiError) and existed.already_exists
    assert isinstance(refused, ApiError) and refused.status == 422

    names = {j["metadata"]["name"] for j in kube.get(path_for("batch/v1", "jobs", namespace))["items"]}
    assert names == {b["metadata"]["name"] for b in bodies}
    assert sent == [("create", "jobs", 201)] * 3 + [("create", "jobs", c) for c in (201, 409, 422, 201, 201)]
