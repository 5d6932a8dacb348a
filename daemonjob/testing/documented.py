"""The DaemonJobs the project shows its users: every YAML block of README.md, docs/ and the
top-level *.md files that holds a DaemonJob or a `spec:` fragment (checked inside the smallest
valid DaemonJob), and every document of examples/. Tests check each of them, so a documented
example cannot drift from the CRD or the rule book."""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import yaml

Documented = tuple[str, dict[str, Any]]  # (where it is written, the DaemonJob)

_BLOCK = re.compile(r"^```ya?ml\n(.*?)^```", re.M | re.S)

# What a fragment is checked inside: the smallest DaemonJob the rule book accepts.
FRAGMENT_BASE: dict[str, Any] = {
    "apiVersion": "daemonjob.io/v1alpha1",
    "kind": "DaemonJob",
    "metadata": {"name": "fragment", "namespace": "ops"},
    "spec": {
        "jobTemplate": {
            "spec": {
                "backoffLimit": 0,
                "template": {
                    "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox:1.36"}]}
                },
            }
        }
    },
}


def doc_files(root: Path) -> list[Path]:
    """README.md, the other top-level *.md files and everything under docs/."""
    return sorted({root / "README.md", *root.glob("*.md"), *(root / "docs").rglob("*.md")})


def in_docs(root: Path) -> list[Documented]:
    """(file:line, DaemonJob) for every DaemonJob of a YAML block; a block holding `spec:`
    alone is a fragment, merged into FRAGMENT_BASE's spec and named "(fragment)"."""
    found = []
    for doc in doc_files(root):
        text = doc.read_text()
        for match in _BLOCK.finditer(text):
            where = f"{doc.relative_to(root)}:{text[: match.start()].count(chr(10)) + 1}"
            for obj in yaml.safe_load_all(match.group(1)):
                if isinstance(obj, dict) and obj.get("kind") == "DaemonJob":
                    found.append((where, obj))
                elif isinstance(obj, dict) and set(obj) == {"spec"}:
                    whole = copy.deepcopy(FRAGMENT_BASE)
                    whole["spec"].update(obj["spec"])
                    found.append((f"{where} (fragment)", whole))
    return found


def example_files(root: Path) -> list[Path]:
    return sorted((root / "examples").glob("*.yaml"))


def in_examples(root: Path) -> list[Documented]:
    """(file:name, document) for every document of examples/*.yaml, whatever its kind."""
    return [
        (f"{path.name}:{obj['metadata']['name']}", obj)
        for path in example_files(root)
        for obj in yaml.safe_load_all(path.read_text())
        if obj
    ]
