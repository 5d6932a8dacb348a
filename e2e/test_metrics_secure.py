"""A real Prometheus scrapes the controller's secure metrics as the shipped ServiceMonitor does.

HTTPS with the controller's self-signed certificate, a ServiceAccount token bound to the
shipped daemonjob-metrics-reader ClusterRole; the same scrape with the token of an account
without the role is refused (403) and the target goes down.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from harness import ControllerProcess, wait_for

from daemonjob.machinery.client.kube import Kube, path_for
from daemonjob.testing.prometheus import LocalPrometheus

RBAC = "rbac.authorization.k8s.io/v1"


def _token(kube: Kube, namespace: str, account: str) -> str:
    kube.create(path_for("v1", "serviceaccounts", namespace), {"metadata": {"name": account}})
    return kube.create(
        path_for("v1", "serviceaccounts", namespace, account, "token"),
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 3600}},
    )["status"]["token"]


def test_prometheus_scrapes_secure_metrics_with_a_metrics_reader_token(
    kube: Kube, namespace: str, sa_kubeconfig: Path, tmp_path: Path, spawn_controller: Callable[..., ControllerProcess]
) -> None:
    # sa_kubeconfig applied the manifests' metrics RBAC, the reader ClusterRole among it.
    binding = f"e2e-metrics-reader-{uuid.uuid4().hex[:6]}"
    reader, stranger = _token(kube, namespace, "prometheus"), _token(kube, namespace, "stranger")
    kube.create(
        path_for(RBAC, "clusterrolebindings"),
        {
            "metadata": {"name": binding},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "daemonjob-metrics-reader",
            },
            "subjects": [{"kind": "ServiceAccount", "name": "prometheus", "namespace": namespace}],
        },
    )
    controller = spawn_controller(extra_args=["--metrics-secure=true"])
    token_file = tmp_path / "token"
    token_file.write_text(reader)
    prom = LocalPrometheus(
        tmp_path / "prometheus", targets=[f"127.0.0.1:{controller.metrics_port}"], token_file=token_file
    )
    prom.start()
    try:
        assert controller.get(controller.metrics_port, "/metrics")[0] != 200  # no plain HTTP
        wait_for(lambda: prom.targets_up() == 1, 60, "Prometheus to scrape the secure endpoint", interval=0.5)
        wait_for(lambda: prom.query("daemonjob_leader"), 30, "a controller series in Prometheus", interval=0.5)

        token_file.write_text(stranger)  # read again at every scrape

        def refused() -> bool:
            (target,) = prom.api("targets")["activeTargets"]
            return target.get("health") == "down" and "403" in target.get("lastError", "")

        wait_for(refused, 60, "the scrape without the role to be refused with 403", interval=0.5)
    finally:
        prom.stop()
        kube.delete(path_for(RBAC, "clusterrolebindings", name=binding))
        assert prom.pid is not None
        with pytest.raises(ProcessLookupError):
            os.kill(prom.pid, 0)
