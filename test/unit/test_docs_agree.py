"""The CRD's descriptions and defaults, the docs and the behaviour say the same thing: the API
server's defaults read as the rule book reads an unset field, and the image tag the docs show
is the release's one version."""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

import daemonjob
from daemonjob.domain.spec.validate import validate

ROOT = Path(__file__).resolve().parents[2]
CRD = yaml.safe_load((ROOT / "manifests" / "crd.yaml").read_text())
SCHEMA = CRD["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]

# Every object a defaulted field sits in, present, so that only the defaulted field differs.
BASE: dict[str, Any] = {
    "apiVersion": "daemonjob.io/v1alpha1",
    "kind": "DaemonJob",
    "metadata": {"name": "audit", "namespace": "ops", "uid": "u1"},
    "spec": {
        "jobTemplate": {
            "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "a", "image": "i"}]}}}
        },
        "schedule": "0 3 * * *",
        "results": {"groupBy": ".kernel"},
        "nodeMaintenance": {"cordon": True, "drain": {}},
    },
}


def defaults(schema: dict[str, Any], path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    for name, sub in (schema.get("properties") or {}).items():
        if "default" in sub:
            yield (*path, name), sub["default"]
        yield from defaults(sub, (*path, name))


CRD_DEFAULTS = sorted(defaults(SCHEMA))


def _with(path: tuple[str, ...], value: Any) -> dict[str, Any]:
    dj = copy.deepcopy(BASE)
    spot = dj["spec"]
    for key in path[:-1]:
        spot = spot.setdefault(key, {})
    if value is None:
        spot.pop(path[-1], None)
    else:
        spot[path[-1]] = value
    return dj


def test_the_crd_has_defaults_to_compare() -> None:
    assert len(CRD_DEFAULTS) >= 10, CRD_DEFAULTS


@pytest.mark.parametrize("path,value", CRD_DEFAULTS, ids=[".".join(p) for p, _ in CRD_DEFAULTS])
def test_the_crds_default_is_what_the_rule_book_reads_for_an_unset_field(path: tuple[str, ...], value: Any) -> None:
    """An object admitted before its CRD had a default, or read from a cache of an older
    schema, behaves as one the API server defaulted."""
    unset, defaulted = validate(_with(path, None)), validate(_with(path, value))
    # the node rules compile to an object without equality; no default reaches them
    assert replace(unset.spec, eligibility=None) == replace(defaulted.spec, eligibility=None), ".".join(path)
    assert unset.problems == defaulted.problems, ".".join(path)


def _description(*path: str) -> str:
    node = SCHEMA
    for key in path:
        node = node["properties"][key]
    return " ".join(str(node["description"]).split())


def test_the_crd_says_how_a_kept_cordoned_node_is_released() -> None:
    text = _description("nodeMaintenance", "keepFailedCordoned")
    assert "kubectl daemonjob release" in text


def test_the_crd_says_max_parallel_is_one_with_node_maintenance() -> None:
    assert "unset means 1" in _description("maxParallel")


def test_the_crd_says_the_start_timeout_counts_from_a_later_start_time() -> None:
    assert "status.startTime" in _description("startTimeout")


def test_every_image_tag_shown_in_the_docs_is_the_release_version() -> None:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")), *sorted((ROOT / "examples").glob("*"))]
    pages.append(ROOT / "charts" / "daemonjob" / "README.md")
    wrong = [
        f"{page.relative_to(ROOT)}: {tag}"
        for page in pages
        if page.is_file()
        for tag in re.findall(r"daemonjob-controller:(v?[0-9][0-9A-Za-z.+-]*)", page.read_text())
        if tag != daemonjob.__version__
    ]
    assert not wrong, f"image tags other than {daemonjob.__version__}: {wrong}"


def _prose(text: str) -> str:
    """The text outside fenced blocks and inline code."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    return re.sub(r"`[^`\n]*`", "", text)


USER_DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def test_the_user_docs_keep_no_diary() -> None:
    """History lives in git and the CHANGELOG: no dated entry, no commit hash, no "before this
    release" in README.md and docs/ (a timestamp in an example is code, not prose)."""
    found = []
    for page in USER_DOCS:
        prose = _prose(page.read_text())
        for pattern in (
            r"\b20\d\d-[01]\d-[0-3]\d\b",
            r"\bbefore this release\b",
            r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,10}\b",
        ):
            found += [f"{page.relative_to(ROOT)}: {m}" for m in re.findall(pattern, prose)]
    assert not found, found


def test_the_readme_is_a_signpost() -> None:
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 150
    for words in (
        "make demo",
        "make test",
        "kubectl daemonjob status",
        "kubectl daemonjob results",
        "v1alpha1",
        "1.20",
    ):
        assert words in text, words
