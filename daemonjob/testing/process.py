"""The controller as a child process, as users run it: for tests, the demo and benchmarks."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import urllib3

from .children import die_with_parent, free_port
from .prom import metric_value
from .waiting import wait_for


class ControllerProcess:
    """`python -m daemonjob` with metrics and probes on free loopback ports (new ones per start).

    The admission webhook is off unless `webhook=True`: then it serves on a free loopback
    port of its own (`webhook_port`, new per start), with the other --webhook-* flags given
    in `extra_args`.
    """

    def __init__(self, kubeconfig: str | Path, log_path: str | Path, *extra_args: str, webhook: bool = False):
        self.kubeconfig = str(kubeconfig)
        self.log_path = Path(log_path)
        self.extra_args = list(extra_args)
        self.webhook = webhook
        self.metrics_port = 0
        self.health_port = 0
        self.webhook_port = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self.exit_codes: list[int] = []
        self._http = urllib3.PoolManager()

    def args(self) -> list[str]:
        return [
            sys.executable,
            "-m",
            "daemonjob",
            "--kubeconfig",
            self.kubeconfig,
            "--metrics-bind-address",
            f"127.0.0.1:{self.metrics_port}",
            "--metrics-secure=false",
            "--health-probe-bind-address",
            f"127.0.0.1:{self.health_port}",
            "--webhook-bind-address",
            f"127.0.0.1:{self.webhook_port}" if self.webhook else "0",
            *self.extra_args,
        ]

    def start(self, wait: bool = False) -> ControllerProcess:
        assert not self.running(), "already running"
        self.metrics_port, self.health_port = free_port(), free_port()
        self.webhook_port = free_port() if self.webhook else 0
        with open(self.log_path, "ab") as log:  # appended: the log survives restarts
            self.proc = subprocess.Popen(
                self.args(),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
                preexec_fn=die_with_parent,
            )
        if wait:
            self.wait_ready()
        return self

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self, sig: int = signal.SIGKILL, timeout: float = 30.0) -> int:
        """Send `sig` (default: a crash) and wait; returns the exit code (negative: killed by a signal)."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        code = self.proc.wait(timeout)
        self.exit_codes.append(code)
        return code

    def terminate(self, timeout: float = 30.0) -> int:
        """SIGTERM and wait; returns the exit code."""
        return self.kill(signal.SIGTERM, timeout)

    def stop(self, timeout: float = 20.0) -> int | None:
        """SIGTERM, then SIGKILL; returns the exit code of the SIGTERM'd process, if it was running."""
        if not self.running():
            return None
        try:
            return self.terminate(timeout)
        except subprocess.TimeoutExpired:
            return self.kill(signal.SIGKILL, 10)

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
        return metric_value(self.metrics_text(), metric, labels) or 0.0

    def wait_ready(self, timeout: float = 60.0) -> None:
        """Until the caches are synced (/readyz answers 200)."""

        def ready() -> bool:
            if not self.running():
                raise AssertionError(
                    f"the controller exited with {self.proc and self.proc.returncode}:\n{self.log_tail()}"
                )
            return self.get(self.health_port, "/readyz")[0] == 200

        wait_for(ready, timeout, "the controller to be ready")

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def log_tail(self, chars: int = 4000) -> str:
        return self.log_text()[-chars:]

    def log_records(self) -> list[dict[str, Any]]:
        """Every log line, parsed; a line that is not a JSON object fails the caller."""
        out = []
        for line in self.log_text().splitlines():
            if line.strip():
                record = json.loads(line)
                assert isinstance(record, dict), line
                out.append(record)
        return out
