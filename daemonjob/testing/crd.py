"""Installing the DaemonJob CRD with kubectl, the way a user does, for tests, the demo and benchmarks,
and checking objects against its schema without an API server (the documented examples)."""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, cast

import yaml

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


# -- checking objects against a CRD's schema, without an API server ----------------------------
def crd_schema(path: Path = CRD_PATH, version: str = "v1alpha1") -> Mapping[str, Any]:
    """The openAPIV3Schema of `version` in the CRD file at `path`."""
    crd = yaml.safe_load(path.read_text())
    for served in crd["spec"]["versions"]:
        if served["name"] == version:
            return cast(Mapping[str, Any], served["schema"]["openAPIV3Schema"])
    raise KeyError(f"{path}: no version {version}")


def schema_problems(obj: Any, schema: Mapping[str, Any], path: str = "") -> list[str]:
    """What the API server's structural validation would say about `obj` (one line each, with
    its field path), plus the fields it would prune silently: a typo in a documented example
    is dropped by the API server without a word, so it is a problem here.

    The keywords the CRDs use: type, properties, required, additionalProperties, items, enum,
    pattern, minimum, maximum, min/maxLength, min/maxItems, minProperties, nullable,
    x-kubernetes-int-or-string, x-kubernetes-preserve-unknown-fields. Metadata is the API
    server's, not the schema's, and is not checked.
    """
    where = path or "<root>"
    if obj is None:
        return [] if schema.get("nullable") else [f"{where}: Invalid value: null"]
    if schema.get("x-kubernetes-int-or-string"):
        if isinstance(obj, bool) or not isinstance(obj, (int, str)):
            return [f"{where}: Invalid value: {obj!r}: must be an integer or a string"]
        return _scalar_problems(obj, schema, where)
    kind = schema.get("type")
    checks: dict[str, Callable[[Any], bool]] = {
        "object": lambda v: isinstance(v, dict),
        "array": lambda v: isinstance(v, list),
        "string": lambda v: isinstance(v, str),
        "boolean": lambda v: isinstance(v, bool),
        "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
        "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    }
    if kind in checks and not checks[kind](obj):
        return [f"{where}: Invalid value: {obj!r}: must be of type {kind}"]
    if kind == "object":
        return _object_problems(obj, schema, path)
    if kind == "array":
        problems = []
        if "maxItems" in schema and len(obj) > schema["maxItems"]:
            problems.append(f"{where}: Too many: {len(obj)}: must have at most {schema['maxItems']} items")
        if "minItems" in schema and len(obj) < schema["minItems"]:
            problems.append(f"{where}: Invalid value: must have at least {schema['minItems']} items")
        for i, item in enumerate(obj):
            problems += schema_problems(item, schema.get("items") or {}, f"{path}[{i}]")
        return problems
    return _scalar_problems(obj, schema, where)


def _object_problems(obj: Mapping[str, Any], schema: Mapping[str, Any], path: str) -> list[str]:
    problems = [
        f"{path + '.' if path else ''}{k}: Required value" for k in schema.get("required") or () if k not in obj
    ]
    if "minProperties" in schema and len(obj) < schema["minProperties"]:
        problems.append(f"{path or '<root>'}: Invalid value: must have at least {schema['minProperties']} properties")
    properties = schema.get("properties") or {}
    extra = schema.get("additionalProperties")
    for key, value in obj.items():
        child = f"{path}.{key}" if path else key
        if not path and key in ("apiVersion", "kind", "metadata"):
            continue
        if key in properties:
            problems += schema_problems(value, properties[key], child)
        elif isinstance(extra, dict):
            problems += schema_problems(value, extra, child)
        elif not (extra is True or schema.get("x-kubernetes-preserve-unknown-fields")):
            problems.append(f"{child}: unknown field (the API server would drop it)")
    return problems


def _scalar_problems(value: Any, schema: Mapping[str, Any], where: str) -> list[str]:
    problems = []
    if "enum" in schema and value not in schema["enum"]:
        problems.append(f"{where}: Unsupported value: {value!r}: supported values: {schema['enum']}")
    if isinstance(value, str):
        if "pattern" in schema and not re.search(schema["pattern"], value):
            problems.append(f"{where}: Invalid value: {value!r}: should match {schema['pattern']!r}")
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            problems.append(f"{where}: Too long: may not be longer than {schema['maxLength']}")
        if "minLength" in schema and len(value) < schema["minLength"]:
            problems.append(f"{where}: Invalid value: {value!r}: at least {schema['minLength']} characters")
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            problems.append(f"{where}: Invalid value: {value}: should be greater than or equal to {schema['minimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            problems.append(f"{where}: Invalid value: {value}: should be less than or equal to {schema['maximum']}")
    return problems
