"""The commands of docs/guides/argocd.md that put the health check into a running Argo CD's argocd-cm, run as
written against a real API server (the namespaces renamed to the test's own): each adds the
key and leaves the others, and a later `kubectl apply` of Argo CD's install (how its manifests
are applied and upgraded), client-side or server-side, keeps it. A server-side apply of the key
alone would not: kubectl hands its field manager what an earlier client-side apply owned."""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from daemonjob.machinery.client.kube import Kube, path_for
from daemonjob.testing.cluster import LocalCluster

ROOT = Path(__file__).resolve().parents[2]
KEY = "resource.customizations.health.daemonjob.io_DaemonJob"
SCRIPT = (ROOT / "manifests" / "argocd" / "health.lua").read_text()

pytestmark = pytest.mark.cluster


@functools.cache
def readme_commands() -> tuple[str, str]:
    """The two sh blocks of the Argo CD guide (docs/guides/argocd.md): from the file, from the chart."""
    section = (ROOT / "docs" / "guides" / "argocd.md").read_text()
    blocks = [re.sub(r"^ {2}", "", b, flags=re.M) for b in re.findall(r"```sh\n(.*?)```", section, flags=re.S)]
    from_file, from_chart = blocks
    assert "--from-file" in from_file and "daemonjob-argocd-health" in from_chart
    return from_file, from_chart


def argocd_cm(url: str) -> str:
    """argocd-cm as Argo CD's install manifests carry it (no namespace: `kubectl apply -n`)."""
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": "argocd-cm",
                "labels": {"app.kubernetes.io/name": "argocd-cm", "app.kubernetes.io/part-of": "argocd"},
            },
            "data": {"url": url},
        }
    )


@functools.cache
def modern_kubectl_dir() -> str:
    out = subprocess.run(
        ["bash", str(ROOT / "hack" / "provision-helm.sh")], capture_output=True, text=True, check=True, timeout=600
    )
    return out.stdout.strip().splitlines()[-1]


@pytest.fixture(params=["kubectl-1.20", "kubectl-1.33"])
def kubectl_dir(request: pytest.FixtureRequest, cluster: LocalCluster) -> str:
    """The control plane's own kubectl, and a current one (kustomize 5.6's)."""
    assert cluster.bin_dir is not None
    return str(cluster.bin_dir) if request.param == "kubectl-1.20" else modern_kubectl_dir()


@pytest.fixture
def controller_namespace(kube: Kube) -> Iterator[str]:
    name = f"t-{uuid.uuid4().hex[:8]}"
    kube.create(path_for("v1", "namespaces"), {"metadata": {"name": name, "labels": {"daemonjob.io/test": "true"}}})
    yield name
    kube.delete(path_for("v1", "namespaces", name=name))


def sh(command: str, cluster: LocalCluster, kubectl_dir: str, stdin: str | None = None) -> str:
    env = {
        **os.environ,
        "PATH": f"{kubectl_dir}{os.pathsep}{os.environ['PATH']}",
        "KUBECONFIG": str(cluster.kubeconfig),
    }
    proc = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", command],
        input=stdin,
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, f"{command}\nexited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def data(kube: Kube, namespace: str) -> dict[str, str]:
    return kube.get(path_for("v1", "configmaps", namespace, "argocd-cm"))["data"]


def reapply_argocd_install(namespace: str, cluster: LocalCluster, kubectl_dir: str, kube: Kube) -> None:
    """Argo CD's install applied again (an upgrade), client-side and then server-side as Argo CD's
    docs also suggest: its own keys change, the health check stays."""
    sh(f"kubectl apply -n {namespace} -f -", cluster, kubectl_dir, stdin=argocd_cm("https://cd.example.com"))
    assert data(kube, namespace) == {"url": "https://cd.example.com", KEY: SCRIPT}
    sh(
        f"kubectl apply --server-side --force-conflicts -n {namespace} -f -",
        cluster,
        kubectl_dir,
        stdin=argocd_cm("https://deploy.example.com"),
    )
    assert data(kube, namespace) == {"url": "https://deploy.example.com", KEY: SCRIPT}


def test_from_the_file(cluster: LocalCluster, kube: Kube, namespace: str, kubectl_dir: str) -> None:
    from_file, _ = readme_commands()
    sh(f"kubectl apply -n {namespace} -f -", cluster, kubectl_dir, stdin=argocd_cm("https://argocd.example.com"))
    sh(from_file.replace("-n argocd", f"-n {namespace}"), cluster, kubectl_dir)
    assert data(kube, namespace) == {"url": "https://argocd.example.com", KEY: SCRIPT}
    labels = kube.get(path_for("v1", "configmaps", namespace, "argocd-cm"))["metadata"]["labels"]
    assert labels["app.kubernetes.io/part-of"] == "argocd"
    reapply_argocd_install(namespace, cluster, kubectl_dir, kube)


def test_from_the_chart_configmap(
    cluster: LocalCluster, kube: Kube, namespace: str, controller_namespace: str, kubectl_dir: str
) -> None:
    _, from_chart = readme_commands()
    sh(f"kubectl apply -n {namespace} -f -", cluster, kubectl_dir, stdin=argocd_cm("https://argocd.example.com"))
    # The chart's ConfigMap (test/install/test_chart.py checks the chart renders exactly this data).
    kube.create(
        path_for("v1", "configmaps", controller_namespace),
        {"metadata": {"name": "daemonjob-argocd-health"}, "data": {KEY: SCRIPT}},
    )
    command = from_chart.replace("-n argocd", f"-n {namespace}").replace("daemonjob-system", controller_namespace)
    sh(command, cluster, kubectl_dir)
    assert data(kube, namespace) == {"url": "https://argocd.example.com", KEY: SCRIPT}
    reapply_argocd_install(namespace, cluster, kubectl_dir, kube)
