"""The pytest plugin of the test bed: one local cluster and one simulated kubelet per session.

Not registered on install (fixtures named `cluster`, `kube` and `namespace` would land in
every test suite of an environment that has DaemonJob installed): a project that tests its
own DaemonJobs installs `daemonjob[testing]` and enables it in its root conftest.py,
`pytest_plugins = ["daemonjob.testing.pytest_plugin"]`, or per run with
`pytest -p daemonjob.testing.pytest_plugin`. It then gets the fixtures `cluster`, `kube`,
`kubelet`, `namespace`, `make_nodes` and `installed_crd`. Tests isolate themselves with a
namespace and node names of their own.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from daemonjob.machinery.client.kube import ApiError, Kube, path_for
from daemonjob.testing.audit import AuditLog
from daemonjob.testing.cluster import ClusterOptions, LocalCluster
from daemonjob.testing.crd import install_crd
from daemonjob.testing.sim.kubelet import NodeSpec, SimKubelet

_counter = itertools.count()


# Two controller replicas authenticate as different users, so the audit log tells their writes apart.
CONTROLLER_USERS = ("daemonjob-a", "daemonjob-b")


@pytest.fixture(scope="session")
def cluster() -> Iterator[LocalCluster]:
    with LocalCluster(options=ClusterOptions(audit=True, users=CONTROLLER_USERS)) as c:
        yield c


@pytest.fixture(scope="session")
def audit_log(cluster: LocalCluster) -> AuditLog:
    return AuditLog(cluster.audit_log_path)


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

    def make(count: int = 1, *, ready: bool = True, **kw: Any) -> list[str]:
        prefix = f"n{next(_counter)}-{uuid.uuid4().hex[:5]}"
        names = [f"{prefix}-{i}" for i in range(count)]
        kubelet.add_nodes([NodeSpec(n, **kw) for n in names])
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
    install_crd(cluster.kubectl_command())
