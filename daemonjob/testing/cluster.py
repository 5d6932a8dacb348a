"""A real local control plane: etcd, kube-apiserver, kube-controller-manager, kube-scheduler.

Everything listens on loopback ports in one directory. Each child gets PR_SET_PDEATHSIG so
it dies with the process that started it, and its PID is recorded in `pids` so that a
separate `down` can stop it; nothing outlives a crashed or interrupted test run.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import urllib3

from daemonjob.testing.audit import AUDIT_POLICY
from daemonjob.testing.children import die_with_parent, free_port, stop_pid
from daemonjob.testing.clusterpki import kubeconfig_text, make_pki
from daemonjob.testing.components import (
    ClusterOptions,
    apiserver_args,
    controller_manager_args,
    etcd_args,
    scheduler_args,
)
from daemonjob.testing.controllerusers import CONTROLLER_NAMESPACE, CONTROLLER_USERS_GROUP, grant_controller_role
from daemonjob.testing.etcd import compact

# Where the test bed's callers import them from, with the cluster.
__all__ = [
    "CONTROLLER_NAMESPACE",
    "CRD_PATH",
    "ClusterOptions",
    "LocalCluster",
    "free_port",
    "kubeconfig_text",
    "provision_binaries",
    "stop_pid",
]

DATA_DIR = Path(__file__).resolve().parent / "data"  # shipped in the package: works from a wheel
PROVISION_SCRIPT = DATA_DIR / "provision-binaries.sh"
CRD_PATH = DATA_DIR / "crd.yaml"  # the same file as manifests/crd.yaml
RBAC_PATH = DATA_DIR / "rbac.yaml"  # manifests/rbac.yaml
NAMESPACE_PATH = DATA_DIR / "namespace.yaml"  # manifests/namespace.yaml
BINARIES = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler")


def provision_binaries() -> Path:
    """Directory holding the control-plane binaries (provisioned on first use)."""
    env_dir = os.environ.get("DAEMONJOB_KUBE_BIN")
    if env_dir and all((Path(env_dir) / b).exists() for b in BINARIES):
        return Path(env_dir)
    out = subprocess.run(["bash", str(PROVISION_SCRIPT)], stdout=subprocess.PIPE, text=True, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"{PROVISION_SCRIPT} failed (exit {out.returncode}); its message is above")
    return Path(out.stdout.strip().splitlines()[-1])


@dataclass
class LocalCluster:
    """Start with `start()`, stop with `stop()`; usable as a context manager."""

    workdir: Path | None = None
    options: ClusterOptions = field(default_factory=ClusterOptions)
    bin_dir: Path | None = None
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.workdir is None:
            base = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
            self.dir = Path(tempfile.mkdtemp(prefix="daemonjob-cluster-", dir=base))
            self._owns_workdir = True
        else:
            self.dir = Path(self.workdir)
            self.dir.mkdir(parents=True, exist_ok=True)
            self._owns_workdir = False
        self.workdir = self.dir  # the field as given or made; `dir` is the same, typed as always set
        self.token = secrets.token_hex(16)
        self.user_tokens: dict[str, str] = {}
        self.etcd_port = free_port()
        self.apiserver_port = free_port()

    # -- paths -----------------------------------------------------------------------------
    @property
    def kubeconfig(self) -> Path:
        return self.dir / "kubeconfig"

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.apiserver_port}"

    def kubectl_command(self) -> list[str]:
        """kubectl (provisioned with the other binaries) pointed at this cluster."""
        assert self.bin_dir is not None, "start() the cluster first"
        return [str(self.bin_dir / "kubectl"), "--kubeconfig", str(self.kubeconfig)]

    @property
    def pki(self) -> Path:
        return self.dir / "pki"

    @property
    def audit_log_path(self) -> Path:
        return self.dir / "audit.log"

    def kubeconfig_for(self, user: str) -> Path:
        """A kubeconfig authenticating as one of `options.users`."""
        path = self.dir / f"kubeconfig-{user}"
        path.write_text(kubeconfig_text(self.server, self.pki / "ca.crt", self.user_tokens[user], user))
        path.chmod(0o600)
        return path

    # -- lifecycle -------------------------------------------------------------------------
    def __enter__(self) -> LocalCluster:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        try:
            self.bin_dir = self.bin_dir or provision_binaries()
            self._make_pki()
            self._write_tokens()
            self._write_kubeconfig()
            self._start_etcd()
            self.start_apiserver()
            if self.options.users:
                grant_controller_role(self.kubectl_command(), (NAMESPACE_PATH, RBAC_PATH))
            self._start_controller_manager()
            self._start_scheduler()
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        for name in ("kube-scheduler", "kube-controller-manager", "kube-apiserver", "etcd"):
            self._stop(name)
        if getattr(self, "_owns_workdir", False):
            shutil.rmtree(self.dir, ignore_errors=True)

    def stop_apiserver(self) -> None:
        self._stop("kube-apiserver")

    def restart_controller_manager(self, controllers: str) -> None:
        """Run kube-controller-manager again with another `--controllers` list (e.g. "*,-job")."""
        self._stop("kube-controller-manager")
        self.options.controllers = controllers
        self._start_controller_manager()

    def start_apiserver(self) -> None:
        args = [
            *apiserver_args(self.pki, self.etcd_port, self.apiserver_port),
            *self._watch_cache_args(),
            *self._audit_args(),
            *self.options.extra_apiserver_args,
        ]
        self._spawn("kube-apiserver", args)
        self.wait_ready()

    def _watch_cache_args(self) -> list[str]:
        uncached = self.options.uncached_resources
        return [f"--watch-cache-sizes={','.join(f'{r}#0' for r in uncached)}"] if uncached else []

    def compact_etcd(self) -> int:
        """Compact etcd's history up to its current revision (see `etcd.compact`); returns it."""
        return compact(self.etcd_port)

    def wait_ready(self, timeout: float = 60.0) -> None:
        http = urllib3.PoolManager(cert_reqs="CERT_REQUIRED", ca_certs=str(self.pki / "ca.crt"))
        deadline = time.monotonic() + timeout
        last = ""
        while time.monotonic() < deadline:
            proc = self.procs.get("kube-apiserver")
            if proc is not None and proc.poll() is not None:
                raise RuntimeError(
                    f"kube-apiserver exited with {proc.returncode}; log: {self.log_path('kube-apiserver')}"
                )
            try:
                r = http.request(
                    "GET",
                    f"{self.server}/readyz",
                    headers={"Authorization": f"Bearer {self.token}"},
                    timeout=2.0,
                    retries=False,
                )
                if r.status == 200:
                    return
                last = f"HTTP {r.status}"
            except urllib3.exceptions.HTTPError as exc:
                last = str(exc)
            time.sleep(0.25)
        raise TimeoutError(
            f"kube-apiserver not ready after {timeout}s ({last}); log: {self.log_path('kube-apiserver')}"
        )

    def pids(self) -> dict[str, int]:
        return {name: proc.pid for name, proc in self.procs.items() if proc.poll() is None}

    def log_path(self, name: str) -> Path:
        return self.dir / "logs" / f"{name}.log"

    # -- internals -------------------------------------------------------------------------
    def _spawn(self, name: str, args: list[str]) -> None:
        if self.bin_dir is None:
            raise RuntimeError("the binaries are provisioned by start() before any process")
        (self.dir / "logs").mkdir(exist_ok=True)
        log = open(self.log_path(name), "ab")
        self.procs[name] = subprocess.Popen(
            [str(self.bin_dir / name), *args],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            preexec_fn=die_with_parent,
            cwd=self.dir,
        )
        log.close()
        self._write_pids()

    def _stop(self, name: str) -> None:
        proc = self.procs.pop(name, None)
        if proc is not None:
            stop_pid(proc.pid)
            self._write_pids()

    def _write_pids(self) -> None:
        (self.dir / "pids").write_text("".join(f"{n} {p}\n" for n, p in self.pids().items()))

    def _start_etcd(self) -> None:
        self._spawn("etcd", etcd_args(self.dir / "etcd", self.etcd_port))
        http = urllib3.PoolManager()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if (
                    http.request("GET", f"http://127.0.0.1:{self.etcd_port}/health", timeout=1.0, retries=False).status
                    == 200
                ):
                    return
            except urllib3.exceptions.HTTPError:
                pass
            if self.procs["etcd"].poll() is not None:
                raise RuntimeError(f"etcd exited; log: {self.log_path('etcd')}")
            time.sleep(0.1)
        raise TimeoutError("etcd not healthy after 30s")

    def _start_controller_manager(self) -> None:
        args = controller_manager_args(self.kubeconfig, self.pki, self.options)
        self._spawn("kube-controller-manager", args)

    def _start_scheduler(self) -> None:
        self._spawn("kube-scheduler", scheduler_args(self.kubeconfig, self.options))

    def _make_pki(self) -> None:
        p = self.pki
        p.mkdir(exist_ok=True)
        if (p / "apiserver.crt").exists():
            self.token = (p / "tokens.csv").read_text().split(",")[0]
            return
        make_pki(p)
        (p / "tokens.csv").write_text(f"{self.token},admin,admin,system:masters\n")

    def _write_tokens(self) -> None:
        lines = [f"{self.token},admin,admin,system:masters"]
        for user in self.options.users:
            token = self.user_tokens.setdefault(user, secrets.token_hex(16))
            lines.append(f'{token},{user},{user},"{CONTROLLER_USERS_GROUP}"')
        (self.pki / "tokens.csv").write_text("\n".join(lines) + "\n")

    def _audit_args(self) -> list[str]:
        if not self.options.audit:
            return []
        policy = self.dir / "audit-policy.yaml"
        policy.write_text(AUDIT_POLICY)
        # Blocking mode: a request's record is written before the next request of its client.
        return [
            f"--audit-policy-file={policy}",
            f"--audit-log-path={self.audit_log_path}",
            "--audit-log-format=json",
            "--audit-log-mode=blocking",
            "--audit-log-maxsize=0",
        ]

    def _write_kubeconfig(self) -> None:
        self.kubeconfig.write_text(kubeconfig_text(self.server, self.pki / "ca.crt", self.token, "admin"))
