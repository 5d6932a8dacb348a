"""Installing the DaemonJob CRD with kubectl, the way a user does, for tests, the demo and benchmarks,
and checking a DaemonJob against the CRD the API server serves: its structural schema, applied by
the API server itself in a dry run, is the only judge of what it refuses or prunes."""

from __future__ import annotations

import copy
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from daemonjob.machinery.client.kube import ApiError, Kube, path_for
from daemonjob.testing.cluster import CRD_PATH

CRD_NAME = "daemonjobs.daemonjob.io"
REPORTS_CRD_NAME = "daemonjobreports.daemonjob.io"
REPORTS_CRD_FILE = "reports-crd.yaml"  # beside crd.yaml: the controller records results in these


def install_crd(kubectl: Sequence[str], path: Path = CRD_PATH, timeout: float = 60.0, reports: bool = True) -> None:
    """Apply the CRD (idempotent) and wait until kubectl can use it.

    Established means the endpoint is served; discovery, through which kubectl maps "dj"
    and "daemonjobs", can trail it, so that is waited for too. `kubectl` is the command with
    its connection flags, e.g. [kubectl, "--kubeconfig", path]. The results' CRD beside it
    (reports-crd.yaml) is installed with it, unless `reports` is false: then the DaemonJob CRD
    alone, as `kubectl apply -f manifests/crd.yaml` installs it (the controller runs without
    recording results, and says so).
    """
    beside = path.parent / REPORTS_CRD_FILE
    reports_path = beside if reports and beside.exists() else None
    files = ["-f", str(path), *(["-f", str(reports_path)] if reports_path else [])]
    names = [f"crd/{CRD_NAME}", *([f"crd/{REPORTS_CRD_NAME}"] if reports_path else [])]
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
        if out.returncode == 0 and {CRD_NAME, *([REPORTS_CRD_NAME] if reports_path else [])} <= set(out.stdout.split()):
            return
        time.sleep(0.3)
    raise RuntimeError(f"{CRD_NAME} is Established but not in discovery after {timeout:.0f}s")


def delete_reports_crd(kubectl: Sequence[str], timeout: float = 120.0) -> None:
    """Delete the DaemonJobReport CRD and wait until it is gone (every report of the cluster
    with it): a cluster installed with manifests/crd.yaml alone."""
    args = ["delete", "crd", REPORTS_CRD_NAME, "--ignore-not-found", "--wait=true", f"--timeout={int(timeout)}s"]
    out = subprocess.run(
        [*kubectl, *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=timeout + 60,
    )
    if out.returncode != 0:
        raise RuntimeError(f"kubectl delete crd {REPORTS_CRD_NAME} failed: {out.stderr.strip() or out.stdout.strip()}")


# -- checking a DaemonJob against the served CRD ------------------------------------------------
def served_problems(kube: Kube, namespace: str, obj: dict[str, Any]) -> list[str]:
    """What the API server says about creating `obj` in `namespace` (a dry run: nothing is
    stored): each cause of a refusal (schema, or an admission webhook that serves `namespace`)
    as "field: message", else every path it pruned. Pruning is silent (a typo in a field name
    is dropped without a word), so a field sent that does not come back is a problem too; the
    schema's defaults may be added. `obj`'s own namespace, if any, is replaced by `namespace`."""
    body = copy.deepcopy(obj)
    body.setdefault("metadata", {})["namespace"] = namespace
    api_version = str(body.get("apiVersion", ""))
    try:
        got = kube.create(path_for(api_version, "daemonjobs", namespace), body, dryRun="All")
    except ApiError as exc:
        if not exc.invalid:
            raise
        causes = (exc.body.get("details") or {}).get("causes") or []
        return [f"{c.get('field') or '<object>'}: {c.get('message', '')}" for c in causes] or [exc.message]
    return [f"{where}: not kept by the API server" for where in dropped(body, got)]


def dropped(sent: Any, got: Any, path: str = "") -> list[str]:
    """The paths of `sent` that `got` lacks or holds with another value (keys `got` adds are
    not counted: defaults, and the metadata the API server sets)."""
    where = path or "<root>"
    if isinstance(sent, dict):
        if not isinstance(got, dict):
            return [where]
        out: list[str] = []
        for key, value in sent.items():
            child = f"{path}.{key}" if path else key
            out += dropped(value, got[key], child) if key in got else [child]
        return out
    if isinstance(sent, list):
        if not isinstance(got, list) or len(got) != len(sent):
            return [where]
        return [p for i, (s, g) in enumerate(zip(sent, got, strict=True)) for p in dropped(s, g, f"{path}[{i}]")]
    same = sent == got and isinstance(sent, bool) == isinstance(got, bool)
    return [] if same else [f"{where} (sent {sent!r}, got {got!r})"]
