"""The controller as a child process, as users run it: for tests, the demo and benchmarks."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import urllib3

from .cluster import ROOT, _die_with_parent, free_port, stop_pid


class ControllerProcess:
    """`python -m daemonjob` with metrics and probes on free loopback ports."""

    def __init__(self, kubeconfig: str | Path, log_path: str | Path, *extra_args: str):
        self.kubeconfig = str(kubeconfig)
        self.log_path = Path(log_path)
        self.extra_args = list(extra_args)
        self.metrics_port = free_port()
        self.health_port = free_port()
        self.proc: subprocess.Popen | None = None
        self._http = urllib3.PoolManager()

    def start(self) -> "ControllerProcess":
        args = [sys.executable, "-m", "daemonjob", "--kubeconfig", self.kubeconfig,
                "--metrics-bind-address", f"127.0.0.1:{self.metrics_port}",
                "--health-probe-bind-address", f"127.0.0.1:{self.health_port}", *self.extra_args]
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT,
                                         preexec_fn=_die_with_parent)
        return self

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def signal(self, sig: int) -> None:
        if self.running():
            os.kill(self.pid, sig)

    def kill(self) -> None:
        """SIGKILL: a crash, nothing cleaned up."""
        self.signal(signal.SIGKILL)
        if self.proc is not None:
            self.proc.wait(10)

    def terminate(self, timeout: float = 30.0) -> int:
        """SIGTERM and wait; returns the exit code."""
        assert self.proc is not None
        self.signal(signal.SIGTERM)
        return self.proc.wait(timeout)

    def stop(self) -> None:
        if self.proc is not None:
            stop_pid(self.proc.pid)

    def get(self, port: int, path: str) -> tuple[int, str]:
        try:
            r = self._http.request("GET", f"http://127.0.0.1:{port}{path}", timeout=2.0, retries=False)
            return r.status, r.data.decode()
        except urllib3.exceptions.HTTPError as exc:
            return 0, str(exc)

    def metrics_text(self) -> str:
        code, body = self.get(self.metrics_port, "/metrics")
        return body if code == 200 else ""

    def metric(self, metric: str, /, **labels: str) -> float:
        """Sum of the samples of `metric` whose labels include `labels` (0 if none)."""
        from prometheus_client.parser import text_string_to_metric_families

        total = 0.0
        for family in text_string_to_metric_families(self.metrics_text()):
            for sample in family.samples:
                if sample.name == metric and all(sample.labels.get(k) == v for k, v in labels.items()):
                    total += sample.value
        return total

    def wait_ready(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.running():
                raise RuntimeError(f"controller exited with {self.proc.returncode}: {self.log_tail()}")
            if self.get(self.health_port, "/readyz")[0] == 200:
                return
            time.sleep(0.2)
        raise TimeoutError(f"controller not ready after {timeout}s: {self.log_tail()}")

    def log_tail(self, chars: int = 4000) -> str:
        try:
            return self.log_path.read_text()[-chars:]
        except OSError:
            return ""
