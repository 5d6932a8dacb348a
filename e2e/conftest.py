"""Fixtures of the end-to-end suite: the CRD, the controller's own RBAC, the controller itself.

Local mode (default, what `make test` runs): a local control plane (daemonjob.testing),
simulated nodes, and one controller process per test, watching only that test's namespace
and authenticated as the manifests' ServiceAccount, so the suite also proves the RBAC is
enough. External mode (DAEMONJOB_E2E_EXTERNAL=1): the cluster in $KUBECONFIG, where the
controller is already deployed (`make deploy`); nodes are still registered by the simulated
kubelet, as real Node objects that tests select by unique labels.
"""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from daemonjob.machinery.client.kube import ApiError, Kube, path_for
from daemonjob.testing.cluster import kubeconfig_text
from daemonjob.testing.crd import install_crd

sys.path.insert(0, str(Path(__file__).resolve().parent))  # for `import harness`, here and in the tests

from harness import (
    CONTROLLER_NS,
    EXTERNAL,
    GROUP_LABEL,
    PLURAL,
    Cluster,
    ControllerProcess,
    DeployedController,
)

ROOT = Path(__file__).resolve().parents[1]
MANIFESTS = ROOT / "manifests"
SERVICE_ACCOUNT = "daemonjob-controller"
CRD_NAME = f"{PLURAL}.daemonjob.io"

Kubectl = Callable[..., subprocess.CompletedProcess[str]]
_CONTROLLERS = pytest.StashKey[list[Any]]()


# -- the cluster ------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def admin_kubeconfig(request: pytest.FixtureRequest) -> Path:
    if EXTERNAL:
        path = os.environ.get("KUBECONFIG") or str(Path.home() / ".kube" / "config")
        return Path(path.split(os.pathsep)[0])
    return request.getfixturevalue("cluster").kubeconfig


@pytest.fixture(scope="session")
def kube(admin_kubeconfig: Path) -> Kube:
    """Overrides the shared fixture so that external mode never starts a local cluster."""
    return Kube.from_config(str(admin_kubeconfig))


@pytest.fixture(scope="session")
def kubectl_command(request: pytest.FixtureRequest, admin_kubeconfig: Path) -> list[str]:
    if EXTERNAL:
        binary = os.environ.get("KUBECTL") or shutil.which("kubectl") or "kubectl"
    else:
        binary = str(request.getfixturevalue("cluster").bin_dir / "kubectl")
    return [binary, f"--kubeconfig={admin_kubeconfig}"]


@pytest.fixture(scope="session")
def kubectl(kubectl_command: list[str]) -> Kubectl:
    def run(*args: str, check: bool = True, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        cmd = [*kubectl_command, *args]
        proc = subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=120, check=False)
        if check and proc.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
        return proc

    return run


@pytest.fixture(scope="session")
def crd(kubectl_command: list[str]) -> None:
    """The CRD, applied for real and never deleted (shared by every test)."""
    install_crd(kubectl_command, MANIFESTS / "crd.yaml")


def _service_account_token(kube: Kube) -> str:
    """The ServiceAccount's token: its token Secret (v1.20), else the TokenRequest API."""
    sa_path = path_for("v1", "serviceaccounts", CONTROLLER_NS, SERVICE_ACCOUNT)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        for ref in kube.get(sa_path).get("secrets") or ():
            secret = kube.get(path_for("v1", "secrets", CONTROLLER_NS, ref["name"]))
            token = (secret.get("data") or {}).get("token")
            if secret.get("type") == "kubernetes.io/service-account-token" and token:
                return base64.b64decode(token).decode()
        if EXTERNAL:  # v1.24+ creates no token Secrets
            request = {
                "apiVersion": "authentication.k8s.io/v1",
                "kind": "TokenRequest",
                "spec": {"expirationSeconds": 7200},
            }
            return kube.create(sa_path + "/token", request)["status"]["token"]
        time.sleep(0.3)
    raise AssertionError(f"no token for ServiceAccount {CONTROLLER_NS}/{SERVICE_ACCOUNT} after 30s")


@pytest.fixture(scope="session")
def sa_kubeconfig(kube: Kube, kubectl: Kubectl, crd: None, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A kubeconfig holding only the controller ServiceAccount's token: exactly the manifests' RBAC."""
    kubectl("apply", "-f", str(MANIFESTS / "namespace.yaml"))
    kubectl("apply", "-f", str(MANIFESTS / "rbac.yaml"))
    kubectl("apply", "-f", str(MANIFESTS / "metrics-rbac.yaml"))
    # The shipped Role limits Lease get/update to the Lease named daemonjob-controller; each
    # test's controller elects on a Lease of its own (dj-<namespace>), which this allows.
    leases = tmp_path_factory.mktemp("rbac") / "test-leases.yaml"
    leases.write_text(f"""\
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {{name: daemonjob-test-leases, namespace: {CONTROLLER_NS}}}
rules: [{{apiGroups: [coordination.k8s.io], resources: [leases], verbs: [get, update]}}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {{name: daemonjob-test-leases-service-account, namespace: {CONTROLLER_NS}}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: daemonjob-test-leases}}
subjects: [{{kind: ServiceAccount, name: {SERVICE_ACCOUNT}, namespace: {CONTROLLER_NS}}}]
""")
    kubectl("apply", "-f", str(leases))
    token = _service_account_token(kube)
    cfg = kube.configuration
    ca = cfg.ssl_ca_cert
    assert ca, "the admin kubeconfig names no certificate authority"
    path = tmp_path_factory.mktemp("sa") / "kubeconfig"
    path.write_text(kubeconfig_text(cfg.host, Path(ca), token, SERVICE_ACCOUNT))
    path.chmod(0o600)
    # The token really is the ServiceAccount (and not, say, an admin).
    review = Kube.from_config(str(path)).create(
        "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
        {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": {"verb": "list", "resource": "secrets", "namespace": CONTROLLER_NS}},
        },
    )
    assert review["status"]["allowed"] is False, "the controller's credentials may read Secrets"
    return path


# -- the controller ---------------------------------------------------------------------------
@pytest.fixture
def spawn_controller(
    request: pytest.FixtureRequest, sa_kubeconfig: Path, namespace: str, tmp_path: Path, kube: Kube
) -> Iterator[Callable[..., ControllerProcess]]:
    """spawn_controller(log_name, extra_args=...) -> a started controller process for this test's
    namespace; `extra_args` are more flags of daemonjob-controller (say `--kube-api-qps 5`).

    Every process is stopped by its PID at teardown (SIGTERM, then SIGKILL), and the test
    fails if one is still running afterwards.
    """
    handles: list[ControllerProcess] = []

    def spawn(log_name: str = "controller", wait: bool = True, extra_args: Sequence[str] = ()) -> ControllerProcess:
        handle = ControllerProcess(sa_kubeconfig, namespace, tmp_path / f"{log_name}.log", extra_args)
        handles.append(handle)
        request.node.stash.setdefault(_CONTROLLERS, []).append(handle)
        return handle.start(wait=wait)

    yield spawn
    for handle in handles:
        handle.stop()
    for handle in handles:
        assert not handle.alive(), f"controller pid {handle.pid} still running"
        if handle.pid is not None:
            with pytest.raises(ProcessLookupError):
                os.kill(handle.pid, 0)
    for lease in {h.lease for h in handles}:
        try:
            kube.delete(path_for("coordination.k8s.io/v1", "leases", CONTROLLER_NS, lease))
        except ApiError as exc:
            if not exc.not_found:
                raise


@pytest.fixture
def controller_process(spawn_controller: Callable[..., ControllerProcess]) -> ControllerProcess:
    """A controller process for this test's namespace (in external mode too: a process-level test)."""
    return spawn_controller()


@pytest.fixture
def controller(request: pytest.FixtureRequest, kube: Kube, kubectl: Kubectl) -> Any:
    """The controller acting on this test's namespace: a local process, or the deployed one."""
    if not EXTERNAL:
        return request.getfixturevalue("controller_process")
    handle = DeployedController(kube, kubectl)
    request.node.stash.setdefault(_CONTROLLERS, []).append(handle)
    return handle.start()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """On failure, the report carries the tail of each controller log of the test."""
    outcome = yield
    report = outcome.get_result()
    if report.failed and report.when in ("setup", "call"):
        for handle in item.stash.get(_CONTROLLERS, []):
            report.sections.append((f"controller log tail ({handle.log_path})", handle.tail()))


# -- per-test helpers -------------------------------------------------------------------------
@pytest.fixture
def api(kube: Kube, namespace: str, crd: None) -> Cluster:
    return Cluster(kube, namespace)


@pytest.fixture
def group(namespace: str) -> str:
    """A node label value unique to this test: its DaemonJobs select only its own nodes."""
    return f"{namespace}-{uuid.uuid4().hex[:4]}"


@pytest.fixture
def nodes(make_nodes: Callable[..., list[str]], group: str) -> Callable[..., list[str]]:
    """nodes(count, labels=..., taints=..., unschedulable=...) -> names, all in this test's group."""

    def make(count: int = 1, *, labels: dict[str, str] | None = None, **kw: Any) -> list[str]:
        return make_nodes(count, labels={GROUP_LABEL: group, **(labels or {})}, **kw)

    return make
