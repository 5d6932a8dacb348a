"""The Layout table of docs/development/architecture.md names every module of the package, so a
reader finds each room."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _layout_section() -> str:
    text = (ROOT / "docs" / "development" / "architecture.md").read_text()
    start = text.index("## Layout")
    end = text.find("\n## ", start + 1)
    return text[start:] if end < 0 else text[start:end]


def test_every_module_of_the_package_is_in_the_layout_table() -> None:
    section = _layout_section()
    modules = sorted(
        p.relative_to(ROOT).as_posix()
        for p in (ROOT / "daemonjob").rglob("*.py")
        if p.name != "__init__.py" and "__pycache__" not in p.parts
    )
    missing = [m for m in modules if f"`{m}`" not in section]
    assert not missing, f"modules missing from the Layout table (docs/development/architecture.md): {missing}"


def test_the_layout_table_names_no_module_that_is_gone() -> None:
    section = _layout_section()
    named = {part.strip("`") for part in section.split() if part.startswith("`daemonjob/") and part.endswith(".py`")}
    gone = sorted(n for n in named if not (ROOT / n).exists())
    assert not gone, f"the Layout table (docs/development/architecture.md) names modules that do not exist: {gone}"
