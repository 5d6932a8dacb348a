"""The docs site's guides and concept pages: one guide per use case of examples/, each embedding
its example through the snippets extension (so the page shows the file itself, never a copy that
drifts), and one concept page per idea, all in the nav."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

import markdown
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]

GUIDES = {
    "audit-with-results.md": "kernel-audit.yaml",
    "kernel-upgrade.md": "kernel-upgrade.yaml",
    "sysctl-with-drain.md": "max-map-count.yaml",
    "nightly-cleanup.md": "nightly-image-cleanup.yaml",
    "canary.md": "canary-logrotate.yaml",
    "ordered-rollouts.md": "ordered-upgrade.yaml",
    "node-parameters.md": "node-location.yaml",
}
CONCEPTS = ["index.md", "eligibility.md", "revisions.md", "runs.md", "attempts.md", "slots.md", "conditions.md"]


def _config() -> dict[str, Any]:
    return yaml.safe_load((ROOT / "mkdocs.yml").read_text())


def _nav_pages(nav: Any) -> list[str]:
    if isinstance(nav, str):
        return [nav]
    if isinstance(nav, list):
        return [page for item in nav for page in _nav_pages(item)]
    return [page for value in nav.values() for page in _nav_pages(value)]


def _snippets_config() -> dict[str, Any]:
    for ext in _config()["markdown_extensions"]:
        if isinstance(ext, dict) and "pymdownx.snippets" in ext:
            return dict(ext["pymdownx.snippets"])
    raise AssertionError("mkdocs.yml does not enable pymdownx.snippets")


def test_snippets_resolve_from_the_repository_root_and_a_missing_file_fails_the_build() -> None:
    config = _snippets_config()
    assert config["base_path"] == ["."] and config["check_paths"] is True


@pytest.mark.parametrize(("guide", "example"), GUIDES.items())
def test_each_guide_shows_its_example_file_as_it_is(guide: str, example: str) -> None:
    """Rendered as the site renders it, the guide holds every line of the example file."""
    text = (ROOT / "docs" / "guides" / guide).read_text()
    assert f'--8<-- "examples/{example}"' in text, guide
    page = markdown.markdown(
        text,
        extensions=["pymdownx.snippets", "pymdownx.highlight", "pymdownx.superfences"],
        extension_configs={
            "pymdownx.snippets": {"base_path": [str(ROOT)], "check_paths": True},
            "pymdownx.highlight": {"use_pygments": False},  # the code as text, not as tokens
        },
    )
    for line in (ROOT / "examples" / example).read_text().splitlines():
        assert html.escape(line, quote=False) in page, (guide, line)
    for section in ("## What to look at", "kubectl daemonjob ", "](../concepts/", "](../reference/"):
        assert section in text, (guide, section)


def test_every_guide_and_concept_page_is_in_the_nav() -> None:
    pages = set(_nav_pages(_config()["nav"]))
    assert {f"guides/{g}" for g in GUIDES} <= pages
    assert {f"concepts/{c}" for c in CONCEPTS} <= pages
    assert not (ROOT / "docs" / "concepts.md").exists(), "the concepts are split into docs/concepts/"
