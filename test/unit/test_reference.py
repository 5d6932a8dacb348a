"""The generated reference (docs/reference/, hack/gen_reference.py) keeps up with the code: a
stale page fails, and so does a reason or `daemonjob.io/` key the code holds without a meaning in
docs/reference/meanings.yaml (or a meaning left for one the code no longer holds)."""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_reference", ROOT / "hack" / "gen_reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("gen_reference", module)
    spec.loader.exec_module(module)
    return module


gen = _generator()


@pytest.mark.parametrize("name", sorted(gen.pages()))
def test_the_generated_page_is_current(name: str) -> None:
    path = gen.REFERENCE / name
    assert path.exists(), f"docs/reference/{name} is missing: run python hack/gen_reference.py"
    assert path.read_text() == gen.pages()[name], f"docs/reference/{name} is stale: run python hack/gen_reference.py"


def test_every_reason_in_the_code_has_a_meaning() -> None:
    meanings = gen.load_meanings()
    known = set(meanings["reasons"]) | set(meanings["not_reasons"])
    missing = {r: where for r, where in gen.collect_reasons().items() if r not in known}
    assert not missing, f"reasons without a meaning in docs/reference/meanings.yaml: {missing}"


def test_every_meaning_is_of_a_reason_the_code_holds() -> None:
    meanings = gen.load_meanings()
    gone = sorted((set(meanings["reasons"]) | set(meanings["not_reasons"])) - set(gen.collect_reasons()))
    assert not gone, f"docs/reference/meanings.yaml names reasons the code no longer holds: {gone}"


def test_every_key_in_the_code_has_a_meaning_and_none_is_left_over() -> None:
    keys, meanings = gen.collect_keys(), gen.load_meanings()["keys"]
    assert not set(keys) - set(meanings), f"keys without a meaning: {sorted(set(keys) - set(meanings))}"
    assert not set(meanings) - set(keys), (
        f"meanings of keys the code no longer holds: {sorted(set(meanings) - set(keys))}"
    )


def test_every_reason_says_where_it_appears_what_it_means_and_what_to_do() -> None:
    sections = {"Stalled", "Reconciling", "Condition", "Event", "Node"}
    for name, m in gen.load_meanings()["reasons"].items():
        assert m.get("where", "").split(",")[0].strip() in sections, name
        assert m.get("meaning") and m.get("action"), name


def test_the_reasons_the_schema_cannot_catch_are_found_wherever_they_are_defined() -> None:
    """The Stalled reasons of a spec problem, found by the scan, not by a module path."""
    found = gen.collect_reasons()
    for reason in ("InvalidSchedule", "InvalidTimeZone", "InvalidSelector", "InvalidRestartPolicy", "InvalidName",
                   "TTLNotAllowed", "TemplateTooLarge"):  # fmt: skip
        assert reason in found, reason
    assert "Uncordoned" in found and "Released" in found  # through a local name: what = "A" if ... else "B"


def test_every_flag_of_both_command_lines_is_on_its_page() -> None:
    from daemonjob import cli, release
    from daemonjob.kubectl import cli as kubectl_cli

    pages = gen.pages()
    for page, parsers in (("daemonjob-controller.md", [cli.parser(), release.parser()]),
                          ("kubectl-daemonjob.md", [kubectl_cli.build_parser()])):  # fmt: skip
        stack = list(parsers)
        while stack:
            parser = stack.pop()
            for action in parser._actions:
                for flag in action.option_strings:
                    assert f"`{flag}`" in pages[page], (page, flag)
                if isinstance(action, argparse._SubParsersAction):
                    stack.extend(action.choices.values())


def test_every_crd_field_has_a_meaning_in_the_crd_or_in_meanings_yaml() -> None:
    written = gen.load_meanings()["fields"]
    paths = {f.path: f for _, fs in gen.crd_fields() for f in fs}
    missing = sorted(p for p, f in paths.items() if not f.description and p not in written)
    assert not missing, f"CRD fields without a description or a meaning in docs/reference/meanings.yaml: {missing}"
    needless = sorted(p for p in written if p not in paths or paths[p].description)
    assert not needless, f"meanings.yaml fields: gone, or described by the CRD itself: {needless}"


def test_every_key_says_its_kind_object_writer_and_meaning() -> None:
    for name, m in gen.load_meanings()["keys"].items():
        assert all(isinstance(m.get(k), str) and m[k] for k in ("kind", "object", "by", "meaning")), name
