"""docs/development/architecture.md is generated from the package docstrings and the import contracts:
a package, module or layer changed without regenerating it fails here."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _generator():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("architecture", ROOT / "hack" / "architecture.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_architecture_page_is_up_to_date() -> None:
    page = ROOT / "docs" / "development" / "architecture.md"
    stale = "docs/development/architecture.md is stale: run python hack/architecture.py"
    assert page.read_text() == _generator().render(), stale


def test_every_package_opens_with_what_it_holds() -> None:
    bare = [
        p.parent.relative_to(ROOT).as_posix()
        for p in (ROOT / "daemonjob").rglob("__init__.py")
        if "__pycache__" not in p.parts and len(_generator()._docstring(p)) < 40
    ]
    assert not bare, f"packages whose __init__.py says too little of what they hold: {bare}"
