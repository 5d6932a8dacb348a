"""Installing the DaemonJob CRD with kubectl, the way a user does, for tests, the demo and benchmarks."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

from daemonjob.testing.cluster import CRD_PATH

CRD_NAME = "daemonjobs.daemonjob.io"
REPORTS_CRD_NAME = "daemonjobreports.daemonjob.io"
REPORTS_CRD_FILE = "reports-crd.yaml"  # beside crd.yaml: the controller records results in these


def install_crd(kubectl: Sequence[str], path: Path = CRD_PATH, timeout: float = 60.0) -> None:
    """Apply the CRD (idempotent) and wait until kubectl can use it.

    Established means the endpoint is served; discovery, through which kubectl maps "dj"
    and "daemonjobs", can trail it, so that is waited for too. `kubectl` is the command with
    its connection flags, e.g. [kubectl, "--kubeconfig", path]. The results' CRD beside it
    (reports-crd.yaml) is installed with it.
    """
    reports = path.parent / REPORTS_CRD_FILE
    files = ["-f", str(path), *(["-f", str(reports)] if reports.exists() else [])]
    names = [f"crd/{CRD_NAME}", *([f"crd/{REPORTS_CRD_NAME}"] if reports.exists() else [])]
    deadline = time.monotonic() + timeout
    for args in (
        ["apply", *files],
        ["wait", "--for=condition=Established", f"--timeout={int(timeout)}s", *names],
    ):
        while True:
            out = subprocess.run([*kubectl, *args], capture_output=True, text=True, check=False, timeout=timeout + 30)
            # kubectl wait fails at once, not waits, on a CRD whose status has no conditions yet
            if out.returncode == 0 or "accessor error" not in out.stderr or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        if out.returncode != 0:
            raise RuntimeError(f"kubectl {' '.join(args)} failed: {out.stderr.strip() or out.stdout.strip()}")
    while time.monotonic() < deadline:
        out = subprocess.run(
            [*kubectl, "api-resources", "--api-group=daemonjob.io", "-o", "name"],
            capture_output=True,
            text=True,
            check=False,
            timeout=timeout,
        )
        if out.returncode == 0 and {CRD_NAME, *([REPORTS_CRD_NAME] if reports.exists() else [])} <= set(
            out.stdout.split()
        ):
            return
        time.sleep(0.3)
    raise RuntimeError(f"{CRD_NAME} is Established but not in discovery after {timeout:.0f}s")
