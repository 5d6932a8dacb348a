"""The controller image, built from the Dockerfile and run as a pod runs it.

The image is built with buildah (hack/build-image.sh, ENGINE=buildah: no Docker engine is
needed) and its root filesystem is run the way a kubelet would start the container of
manifests/deployment.yaml: the image's entrypoint, environment and user (65532), the
ServiceAccount's token, CA and namespace at /var/run/secrets/kubernetes.io/serviceaccount,
KUBERNETES_SERVICE_HOST/PORT, a hostname of its own, a read-only root with only /tmp
writable. The sandbox is `unshare` (mount and UTS namespaces) + bind mounts + `chroot`; the
network is the host's, where the local control plane listens on loopback.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shlex
import signal
import subprocess
import time
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from daemonjob.machinery.client.kube import ApiError, Kube, path_for
from daemonjob.testing.children import die_with_parent, free_port
from daemonjob.testing.cluster import LocalCluster
from daemonjob.testing.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]
MANIFESTS = ROOT / "manifests"
CONTROLLER_NS = "daemonjob-system"
SERVICE_ACCOUNT = "daemonjob-controller"
SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
GROUP_VERSION = "daemonjob.io/v1alpha1"
BUILDAH = ["buildah", "--storage-driver", "vfs"]

pytestmark = pytest.mark.cluster

# Runs inside new mount and UTS namespaces: $1 the image's root, $2 the ServiceAccount
# directory, $3 its mount point under the root, $4 the hostname, then `chroot` arguments.
SANDBOX = r"""
set -eu
root=$1 sa=$2 sa_at=$3; hostname "$4"; shift 4
mkdir -p "$root/$sa_at" "$root/tmp" "$root/proc" "$root/dev"
mount --bind "$root" "$root"
mount --bind -o ro "$sa" "$root/$sa_at"
mount -o remount,bind,ro "$root/$sa_at"
mount -t tmpfs -o mode=1777,size=64m,nosuid,nodev tmpfs "$root/tmp"
mount -t proc -o nosuid,nodev,noexec proc "$root/proc"
mount --rbind /dev "$root/dev"
mount -o remount,bind,ro "$root"
exec chroot "$@"
"""


def run(cmd: list[str], timeout: float = 900, **kw: Any) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False, **kw)
    assert proc.returncode == 0, f"{shlex.join(cmd)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
    return proc


# -- the image --------------------------------------------------------------------------------
@dataclass
class Image:
    name: str
    config: dict[str, Any]  # the OCI image config: Env, Entrypoint, User, WorkingDir
    size: str


# What the Dockerfile copies into the image (see .dockerignore), besides the base.
IMAGE_INPUTS = (
    "Dockerfile",
    "requirements.txt",
    "requirements-build.txt",
    "pyproject.toml",
    "setup.cfg",
    "README.md",
    "LICENSE",
    "manifests/crd.yaml",
    "manifests/reports-crd.yaml",
    "hack/build-image.sh",
)
TEST_REPO = "localhost/daemonjob-controller"


def inputs_digest(base_id: str) -> str:
    """A digest of the base's ID and every file the build reads: equal digests, equal images."""
    h = hashlib.sha256(base_id.encode())
    files = [ROOT / f for f in IMAGE_INPUTS] + sorted(
        f
        for f in (ROOT / "daemonjob").rglob("*")
        if f.is_file() and "__pycache__" not in f.parts and f.suffix not in (".pyc", ".pyo")
    )
    for f in files:
        h.update(b"\0" + str(f.relative_to(ROOT)).encode() + b"\0" + f.read_bytes())
    return h.hexdigest()[:16]


@pytest.fixture(scope="module")
def image() -> Image:
    """The image of this tree, built once and kept: a rerun with nothing changed reuses it."""
    run(["bash", str(ROOT / "hack" / "provision-image-tools.sh")])
    base = run(["bash", str(ROOT / "hack" / "image-base.sh")], timeout=900).stdout.strip().splitlines()[-1]
    base_id = run([*BUILDAH, "images", "--quiet", "--no-trunc", base]).stdout.strip()
    name = f"{TEST_REPO}:test-{inputs_digest(base_id)}"
    started = time.monotonic()
    reused = (
        subprocess.run(
            [*BUILDAH, "inspect", "--type", "image", name], capture_output=True, timeout=120, check=False
        ).returncode
        == 0
    )
    if not reused:
        run(
            ["bash", str(ROOT / "hack" / "build-image.sh")],
            cwd=ROOT,
            env={**os.environ, "ENGINE": "buildah", "IMG": name, "BASE": base},
        )
        _prune_test_images(keep=name)
    took = time.monotonic() - started
    info = json.loads(run([*BUILDAH, "inspect", "--type", "image", name]).stdout)
    size = _image_size(name)
    print(f"\nimage {name}: {'reused' if reused else 'built'} in {took:.0f} s, {size}")
    return Image(name, info["OCIv1"]["config"], size)


def _prune_test_images(keep: str) -> None:
    """Test images of other contents; not those of the last minutes (another checkout's run may
    be about to use its own), nor one a container uses (buildah refuses)."""
    recent = time.time() - 600
    for img in json.loads(run([*BUILDAH, "images", "--json"]).stdout or "[]"):
        names = [n for n in img.get("names") or () if n.startswith(f"{TEST_REPO}:test-")]
        if names and keep not in names and img.get("created", 0) < recent:
            subprocess.run([*BUILDAH, "rmi", *names], capture_output=True, timeout=300, check=False)


def _image_size(name: str) -> str:
    """The image's layers, uncompressed, as `buildah images` shows them ("364 MB")."""
    return str(json.loads(run([*BUILDAH, "images", "--json", name]).stdout)[0]["size"])


@pytest.fixture(scope="module")
def rootfs(image: Image) -> Iterator[Path]:
    """A working container of the image, mounted: the root the sandbox runs."""
    container = run([*BUILDAH, "from", "--pull=never", image.name]).stdout.strip().splitlines()[-1]
    try:
        yield Path(run([*BUILDAH, "mount", container]).stdout.strip())
    finally:
        subprocess.run([*BUILDAH, "umount", container], capture_output=True, timeout=120, check=False)
        subprocess.run([*BUILDAH, "rm", container], capture_output=True, timeout=300, check=False)


# -- the pod's view ---------------------------------------------------------------------------
@dataclass
class Pod:
    """What a kubelet would give the container: the token files and the service's address."""

    sa_dir: Path
    host: str
    port: int
    name: str = field(default_factory=lambda: f"daemonjob-controller-{uuid.uuid4().hex[:5]}")


def _sa_token(kube: Kube) -> str:
    """The ServiceAccount's token Secret, made by the token controller (v1.20)."""

    def token() -> str | None:
        for ref in kube.get(path_for("v1", "serviceaccounts", CONTROLLER_NS, SERVICE_ACCOUNT)).get("secrets") or ():
            secret = kube.get(path_for("v1", "secrets", CONTROLLER_NS, ref["name"]))
            if secret.get("type") == "kubernetes.io/service-account-token" and (secret.get("data") or {}).get("token"):
                return base64.b64decode(secret["data"]["token"]).decode()
        return None

    return wait_for(token, 30, f"a token of ServiceAccount {CONTROLLER_NS}/{SERVICE_ACCOUNT}")


@pytest.fixture(scope="module")
def pod(cluster: LocalCluster, kube: Kube, installed_crd: None, tmp_path_factory: pytest.TempPathFactory) -> Pod:
    kubectl = cluster.kubectl_command()
    for manifest in ("namespace.yaml", "rbac.yaml"):
        run([*kubectl, "apply", "-f", str(MANIFESTS / manifest)], timeout=120)
    sa_dir = tmp_path_factory.mktemp("serviceaccount")
    ca = kube.configuration.ssl_ca_cert
    assert ca, "the cluster's kubeconfig names no CA"
    (sa_dir / "token").write_text(_sa_token(kube))
    (sa_dir / "ca.crt").write_bytes(Path(ca).read_bytes())
    (sa_dir / "namespace").write_text(CONTROLLER_NS)
    sa_dir.chmod(0o755)
    for f in sa_dir.iterdir():
        f.chmod(0o644)  # a projected volume's default mode; uid 65532 reads them
    host, port = kube.host.removeprefix("https://").rsplit(":", 1)
    return Pod(sa_dir, host, int(port))


class Sandbox:
    """One process of the image in the sandbox; stopped by its PID."""

    def __init__(
        self, image: Image, rootfs: Path, pod: Pod, args: list[str], log: Path, entrypoint: list[str] | None = None
    ):
        config = image.config
        user = config.get("User") or "0"
        env = dict(e.split("=", 1) for e in config.get("Env") or ())
        env.update(
            {
                "HOSTNAME": pod.name,
                "KUBERNETES_SERVICE_HOST": pod.host,
                "KUBERNETES_SERVICE_PORT": str(pod.port),
                "KUBERNETES_SERVICE_PORT_HTTPS": str(pod.port),
            }
        )
        command = [*(entrypoint or config.get("Entrypoint") or ()), *args]
        self.log = log
        self.cmd = [
            "unshare",
            "--mount",
            "--uts",
            "--propagation",
            "private",
            "--fork",
            "--kill-child=SIGKILL",
            "--",
            "sh",
            "-c",
            SANDBOX,
            "sandbox",
            str(rootfs),
            str(pod.sa_dir),
            sa_mount_point(rootfs),
            pod.name,
            f"--userspec={user}",
            str(rootfs),
            "/usr/bin/env",
            "-i",
            *(f"{k}={v}" for k, v in env.items()),
            *command,
        ]
        with open(log, "wb") as out:
            self.proc = subprocess.Popen(
                self.cmd,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd="/",
                preexec_fn=die_with_parent,
            )

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")

    def child(self) -> int | None:
        """The PID of the sandboxed process (unshare's one child)."""
        try:
            return int(Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children").read_text().split()[0])
        except (OSError, IndexError, ValueError):
            return None

    def wait(self, timeout: float) -> int:
        return self.proc.wait(timeout)

    def stop(self) -> None:
        """SIGTERM to the process in the sandbox, as a kubelet sends it; SIGKILL after 20 s."""
        if self.proc.poll() is not None:
            return
        child = self.child()
        try:
            os.kill(child or self.proc.pid, signal.SIGTERM)
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()  # --kill-child takes the sandboxed process with it
            self.proc.wait(10)
        if child is not None:
            with pytest.raises(ProcessLookupError):
                os.kill(child, 0)


def sa_mount_point(rootfs: Path) -> str:
    """Where /var/run/secrets/... lands in the image: /var/run is often a link to /run."""
    var_run = rootfs / "var" / "run"
    if var_run.is_symlink() and os.readlink(var_run).strip("/").removeprefix("../") == "run":
        return SA_DIR.replace("/var/run/", "/run/")
    return SA_DIR


@pytest.fixture
def sandbox(image: Image, rootfs: Path, pod: Pod, tmp_path: Path) -> Iterator[Any]:
    started: list[Sandbox] = []

    def start(args: list[str], entrypoint: list[str] | None = None, log: str = "sandbox") -> Sandbox:
        box = Sandbox(image, rootfs, pod, args, tmp_path / f"{log}.log", entrypoint)
        started.append(box)
        return box

    yield start
    for box in started:
        box.stop()


# -- tests ------------------------------------------------------------------------------------
PROBE = """
import json, os, pathlib, socket
def writable(path):
    try:
        pathlib.Path(path).write_text("x"); return True
    except OSError:
        return False
sa = "/var/run/secrets/kubernetes.io/serviceaccount"
print(json.dumps({
    "uid": os.getuid(), "gid": os.getgid(), "hostname": socket.gethostname(),
    "sa": sorted(os.listdir(sa)), "namespace": open(sa + "/namespace").read(),
    "token": len(open(sa + "/token").read()),
    "env": {k: os.environ.get(k) for k in ("KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT")},
    "root": writable("/probe"), "opt": writable("/opt/venv/probe"), "sa_w": writable(sa + "/probe"),
    "tmp": writable("/tmp/probe"),
}))
"""


def test_the_sandbox_is_the_pod_the_manifests_describe(image: Image, pod: Pod, sandbox: Any) -> None:
    """The entrypoint's own Python, as the image's user, sees what a kubelet gives the pod."""
    assert image.config.get("User") == "65532:65532"
    assert image.config.get("Entrypoint") == ["/opt/venv/bin/daemonjob-controller"]
    box = sandbox(["-c", PROBE], entrypoint=["/opt/venv/bin/python"], log="probe")
    assert box.wait(60) == 0, box.log_text()
    seen = json.loads(box.log_text().strip().splitlines()[-1])
    assert seen == {
        "uid": 65532,
        "gid": 65532,
        "hostname": pod.name,
        "sa": ["ca.crt", "namespace", "token"],
        "namespace": CONTROLLER_NS,
        "token": len((pod.sa_dir / "token").read_text()),
        "env": {"KUBERNETES_SERVICE_HOST": pod.host, "KUBERNETES_SERVICE_PORT": str(pod.port)},
        "root": False,
        "opt": False,
        "sa_w": False,
        "tmp": True,
    }


def test_the_image_takes_the_lease_and_completes_a_rollout(
    image: Image, pod: Pod, kube: Kube, namespace: str, make_nodes: Any, sandbox: Any
) -> None:
    group = uuid.uuid4().hex[:8]
    nodes = make_nodes(3, labels={"image.daemonjob.io/group": group})
    metrics, health = free_port(), free_port()
    # The Deployment's arguments; the addresses on loopback ports of their own (host network),
    # metrics over HTTPS as deployed. The webhook is off: the test bed has no Service network
    # to carry the API server's calls to it (test_webhook.py and the Helm install test cover it).
    box = sandbox(
        [
            "--leader-elect",
            f"--leader-election-namespace={CONTROLLER_NS}",
            f"--metrics-bind-address=127.0.0.1:{metrics}",
            "--metrics-secure=true",
            f"--health-probe-bind-address=127.0.0.1:{health}",
            "--webhook-bind-address=0",
            "--log-format=json",
            f"--namespace={namespace}",
        ],
        log="controller",
    )

    def lease_holder() -> str | None:
        if box.proc.poll() is not None:
            raise AssertionError(f"the controller exited {box.proc.returncode}:\n{box.log_text()[-3000:]}")
        try:
            lease = kube.get(path_for("coordination.k8s.io/v1", "leases", CONTROLLER_NS, "daemonjob-controller"))
        except ApiError as exc:
            if exc.not_found:
                return None
            raise
        holder = lease.get("spec", {}).get("holderIdentity") or ""
        return holder if holder.startswith(f"{pod.name}_") else None

    wait_for(lease_holder, 90, "the Lease held by the sandboxed controller", describe=lambda: box.log_text()[-2000:])

    body = {
        "apiVersion": GROUP_VERSION,
        "kind": "DaemonJob",
        "metadata": {"name": "from-image"},
        "spec": {
            "nodeSelector": {"matchLabels": {"image.daemonjob.io/group": group}},
            "jobTemplate": {
                "spec": {
                    "template": {
                        "metadata": {"annotations": {"sim.daemonjob.io/duration": "1"}},
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [{"name": "main", "image": "busybox:1.36", "command": ["true"]}],
                        },
                    }
                }
            },
        },
    }
    kube.create(path_for(GROUP_VERSION, "daemonjobs", namespace), body)

    def complete() -> dict[str, Any] | None:
        dj = kube.get(path_for(GROUP_VERSION, "daemonjobs", namespace, "from-image"))
        status = dj.get("status") or {}
        done = any(c["type"] == "Complete" and c["status"] == "True" for c in status.get("conditions") or ())
        return status if done and status.get("succeededNodes") == len(nodes) else None

    status = wait_for(complete, 120, "the rollout to complete", describe=lambda: box.log_text()[-2000:])
    assert status["desiredNodes"] == 3 and status.get("failedNodes", 0) == 0, status
    with urllib.request.urlopen(f"http://127.0.0.1:{health}/readyz", timeout=10) as resp:
        assert resp.status == 200

    box.stop()
    assert box.proc.returncode == 0, box.log_text()[-3000:]
    assert "Read-only file system" not in box.log_text()
