"""helm and kubectl 1.33 (kustomize 5.6) for the install tests, from hack/provision-helm.sh."""

from __future__ import annotations

import functools
import os
import subprocess
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "daemonjob"
MANIFESTS = ROOT / "manifests"
NAMESPACE = "daemonjob-system"
# Labels the chart adds to every object beside those of manifests/ (and crds.keep's annotation).
HELM_LABELS = (
    "helm.sh/chart",
    "app.kubernetes.io/managed-by",
    "app.kubernetes.io/instance",
    "app.kubernetes.io/version",
)


@functools.cache
def bin_dir() -> Path:
    out = subprocess.run(
        ["bash", str(ROOT / "hack" / "provision-helm.sh")], capture_output=True, text=True, check=True, timeout=600
    )
    return Path(out.stdout.strip().splitlines()[-1])


def run(
    tool: str, *args: str, env: dict[str, str] | None = None, check: bool = True, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [str(bin_dir() / tool), *args],
        capture_output=True,
        text=True,
        input=stdin,
        env={**os.environ, **(env or {})},
        timeout=300,
        check=False,
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"{tool} {' '.join(args)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
    return proc


def helm_env(home: Path) -> dict[str, str]:
    """Private cache, config and data directories: nothing of the user's helm setup leaks in."""
    return {
        "HELM_CACHE_HOME": str(home / "cache"),
        "HELM_CONFIG_HOME": str(home / "config"),
        "HELM_DATA_HOME": str(home / "data"),
    }


def docs(text: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(text) if d]


def key(doc: dict[str, Any]) -> tuple[str, str, str]:
    return doc["kind"], doc["metadata"].get("namespace", ""), doc["metadata"]["name"]


def without_helm_labels(doc: dict[str, Any]) -> dict[str, Any]:
    labels = doc["metadata"].get("labels") or {}
    for label in HELM_LABELS:
        labels.pop(label, None)
    if "labels" in doc["metadata"] and not labels:  # an object of manifests/ without labels
        del doc["metadata"]["labels"]
    annotations = doc["metadata"].get("annotations") or {}
    annotations.pop("helm.sh/resource-policy", None)  # crds.keep: Helm's own
    if "annotations" in doc["metadata"] and not annotations:
        del doc["metadata"]["annotations"]
    return doc


def kustomize(*components: str, tmp: Path) -> list[dict[str, Any]]:
    """`kubectl kustomize` of manifests/ with the given components (kustomize 5.6 takes relative paths)."""
    (tmp / "kustomization.yaml").write_text(
        yaml.safe_dump(
            {
                "resources": [os.path.relpath(MANIFESTS, tmp)],
                "components": [os.path.relpath(MANIFESTS / c, tmp) for c in components],
            }
        )
    )
    return docs(run("kubectl", "kustomize", str(tmp)).stdout)
