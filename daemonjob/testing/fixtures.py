"""pytest fixtures: one local cluster and one simulated kubelet per test session.

Tests isolate themselves with a namespace and node names of their own. Set KUBECONFIG_E2E
(or DAEMONJOB_E2E_EXTERNAL=1 with KUBECONFIG) to run the e2e suite against another cluster.
"""

from __future__ import annotations

import itertools
import subprocess
import uuid
from collections.abc import Iterator

import pytest

from daemonjob.machinery.kube import ApiError, Kube, path_for
from .cluster import LocalCluster
from .kubelet import NodeSpec, SimKubelet

_counter = itertools.count()


@pytest.fixture(scope="session")
def cluster() -> Iterator[LocalCluster]:
    with LocalCluster() as c:
        yield c


@pytest.fixture(scope="session")
def kube(cluster: LocalCluster) -> Kube:
    return Kube.from_config(str(cluster.kubeconfig))


@pytest.fixture(scope="session")
def kubelet(kube: Kube) -> Iterator[SimKubelet]:
    with SimKubelet(kube) as k:
        yield k


@pytest.fixture
def namespace(kube: Kube) -> Iterator[str]:
    name = f"t-{uuid.uuid4().hex[:8]}"
    kube.create(path_for("v1", "namespaces"), {"metadata": {"name": name, "labels": {"daemonjob.io/test": "true"}}})
    yield name
    try:
        kube.delete(path_for("v1", "namespaces", name=name))
    except ApiError as exc:
        if not exc.not_found:
            raise


@pytest.fixture
def make_nodes(kubelet: SimKubelet) -> Iterator:
    """make_nodes(count, **NodeSpec fields) -> names; the nodes are deleted after the test."""
    created: list[str] = []

    def make(count: int = 1, *, ready: bool = True, **kw: object) -> list[str]:
        prefix = f"n{next(_counter)}-{uuid.uuid4().hex[:5]}"
        names = [f"{prefix}-{i}" for i in range(count)]
        kubelet.add_nodes([NodeSpec(n, **kw) for n in names])  # type: ignore[arg-type]
        created.extend(names)
        if ready:
            kubelet.wait_ready(names, timeout=60)
        return names

    yield make
    for name in created:
        kubelet.delete_node(name)


@pytest.fixture(scope="session")
def installed_crd(cluster: LocalCluster) -> None:
    """The DaemonJob CRD, applied once (idempotent) and served before tests use it."""
    from .cluster import ROOT

    kubectl = [str(cluster.bin_dir / "kubectl"), "--kubeconfig", str(cluster.kubeconfig)]
    subprocess.run([*kubectl, "apply", "-f", str(ROOT / "manifests" / "crd.yaml")], check=True, capture_output=True)
    subprocess.run([*kubectl, "wait", "--for=condition=Established", "crd/daemonjobs.daemonjob.io"], check=True,
                   capture_output=True)
