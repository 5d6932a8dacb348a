"""charts/daemonjob/README.md (what `helm show readme` prints) is generated from values.yaml's
`# --` comments by hack/gen_chart_readme.py: a stale README, or a value missing from it, fails."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import yaml

ROOT = Path(__file__).resolve().parents[2]


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_chart_readme", ROOT / "hack" / "gen_chart_readme.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("gen_chart_readme", module)
    spec.loader.exec_module(module)
    return module


gen = _generator()


def test_the_chart_readme_is_current() -> None:
    assert gen.README.read_text() == gen.render(), (
        "charts/daemonjob/README.md is stale: python hack/gen_chart_readme.py"
    )


def _leaves(value: object, prefix: str = "") -> list[str]:
    if isinstance(value, dict) and value:
        return [leaf for k, v in value.items() for leaf in _leaves(v, f"{prefix}{k}.")]
    return [prefix.rstrip(".")]


def test_every_value_is_in_the_chart_readme() -> None:
    """A leaf is shown as a row of its own or inside the default of a described key above it."""
    readme = gen.README.read_text()
    rows = {line.split("`")[1] for line in readme.splitlines() if line.startswith("| `")}
    values = yaml.safe_load((gen.CHART / "values.yaml").read_text())
    missing = [leaf for leaf in _leaves(values) if not any(leaf == row or leaf.startswith(f"{row}.") for row in rows)]
    assert not missing, missing


def test_a_continued_comment_is_one_description() -> None:
    text = "a:\n  # -- first line\n  # --flag on the second\n  b: 1\n  c: 2\n"
    assert gen.comments(text) == {"a.b": "first line --flag on the second"}
