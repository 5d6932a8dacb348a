"""Only the rule book reads a DaemonJob's raw spec: everything downstream takes the typed
`DaemonJobSpec` (domain/spec/spec.py) it produces, so the spec is parsed and checked in one place.

A raw read is a load of `dj["spec"]` / `dj.get("spec")` (the DaemonJob by any of its usual
names), or of a field that only a DaemonJob's spec has. A Job's, a Node's or a Pod's own
`spec` is not a DaemonJob's and is not looked at; writes (patches, manifests) are not reads.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2] / "daemonjob"

# The parse: the rule book, its sections of spec.rollout and spec.nodeMaintenance, and the two
# parts of the node rules' compile that read the spec for it (validate() calls them).
ALLOWED = {
    ("domain/spec/validate.py", None),
    ("domain/spec/rolloutspec.py", None),
    ("domain/spec/nodecheckspec.py", None),
    ("domain/spec/eligibility.py", "compile_eligibility"),
    ("domain/spec/maintenancespec.py", None),
    ("domain/spec/retryspec.py", None),
    ("domain/spec/warnings.py", None),  # settings that do nothing: what was written, unset or not
    ("domain/jobs/contract.py", "job_suspended"),  # a node Job's own spec.suspend, not the DaemonJob's
}
# Not the product's readers: the test bed builds and fakes objects, the machinery is generic.
SKIPPED_DIRS = ("testing", "machinery")

DAEMONJOB_NAMES = {"dj", "daemonjob", "cached", "dep", "other", "obj"}  # (old and new are Nodes too)
SPEC_ONLY_FIELDS = {
    "jobTemplate",
    "schedule",
    "timeZone",
    "concurrencyPolicy",
    "startingDeadlineSeconds",
    "suspend",
    "rerunPolicy",
    "rerunOnConfigChange",
    "maxParallel",
    "maxFailedNodes",
    "historyLimit",
    "exclusionGroup",
    "after",
    "haltOnAlerts",
    "pauseBetweenNodes",
    "canary",
    "cordon",
    "drain",
    "keepFailedCordoned",
    "retry",
    "startTimeout",
    "reboot",
    "rebootTimeout",
    "healthCheck",
}


def _key(node: ast.AST) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _root_name(node: ast.AST) -> str | None:
    """The variable a read starts from: `dj` of `(dj.get("metadata") or {})`."""
    while True:
        if isinstance(node, ast.Name):
            return node.id
        if isinstance(node, ast.BoolOp):
            node = node.values[0]
        elif isinstance(node, (ast.Attribute, ast.Subscript)):
            node = node.value
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            node = node.func.value
        else:
            return None


def _raw_read(node: ast.AST) -> bool:
    if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
        receiver, key = node.value, _key(node.slice)
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" and node.args:
        receiver, key = node.func.value, _key(node.args[0])
    else:
        return False
    if key == "spec":
        return _root_name(receiver) in DAEMONJOB_NAMES
    return key in SPEC_ONLY_FIELDS


def _functions(tree: ast.AST) -> list[tuple[int, int, str]]:
    return [
        (f.lineno, f.end_lineno or f.lineno, f.name)
        for f in ast.walk(tree)
        if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
    ]


def raw_spec_reads(root: Path = ROOT) -> list[str]:
    """Every raw read of a DaemonJob's spec outside the allow-list, as `path:line in function`."""
    found = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel.split("/")[0] in SKIPPED_DIRS or (rel, None) in ALLOWED:
            continue
        tree = ast.parse(path.read_text(), str(path))
        functions = _functions(tree)
        for node in ast.walk(tree):
            if not _raw_read(node):
                continue
            line = getattr(node, "lineno", 0)
            enclosing = [f for f in functions if f[0] <= line <= f[1]]
            name = min(enclosing, key=lambda f: f[1] - f[0])[2] if enclosing else "<module>"
            if (rel, name) not in ALLOWED:
                found.append(f"{rel}:{line} in {name}")
    return sorted(set(found), key=found.index)


def test_only_the_rule_book_reads_a_daemonjobs_raw_spec() -> None:
    assert raw_spec_reads() == []


@pytest.mark.parametrize(
    "source",
    [
        'def f(dj):\n    return (dj.get("spec") or {}).get("suspend") is True\n',
        'def f(dj):\n    return dj["spec"]\n',
        'def f(spec):\n    return spec.get("schedule")\n',
        'def f(cached):\n    return cached.get("spec", {})\n',
    ],
)
def test_a_raw_read_anywhere_else_is_found(tmp_path: Path, source: str) -> None:
    (tmp_path / "controller").mkdir()
    (tmp_path / "controller" / "reader.py").write_text(source)
    assert raw_spec_reads(tmp_path) == ["controller/reader.py:2 in f"]


def test_other_objects_specs_and_writes_are_not_reads(tmp_path: Path) -> None:
    (tmp_path / "controller").mkdir()
    (tmp_path / "controller" / "ok.py").write_text(
        "def f(node, pod, patch):\n"
        '    patch["spec"] = {"suspend": True}\n'
        '    return (node.get("spec") or {}).get("unschedulable"), pod["spec"]\n'
    )
    assert raw_spec_reads(tmp_path) == []
