"""The plugin's one output model: kubectl's JSONPath templates and custom columns (jsonpath.py),
and -o parsed and printed once for every command (output.py)."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from daemonjob.kubectl import commandtable
from daemonjob.kubectl.cli import build_parser
from daemonjob.kubectl.formats import output
from daemonjob.kubectl.formats.jsonpath import TemplateError, compile_template, parse_columns

DOC: dict[str, Any] = {
    "kind": "List",
    "items": [
        {"metadata": {"name": "a", "labels": {"app.kubernetes.io/name": "x"}}, "state": "failed", "n": 1, "ok": True},
        {"metadata": {"name": "b"}, "state": "succeeded", "n": 2, "ok": False, "none": None},
    ],
}


@pytest.mark.parametrize(
    ("template", "printed"),
    [
        ("{.items[*].metadata.name}", "a b"),  # several matches: space-separated
        ("{.kind}", "List"),
        ("kind={.kind}!", "kind=List!"),  # text outside the braces as it is
        ('{range .items[*]}{.metadata.name}{"\\t"}{.state}{"\\n"}{end}', "a\tfailed\nb\tsucceeded\n"),
        ("{range .items}{.n},{end}", "1,2,"),  # a range over a list ranges over its elements
        ('{.items[?(@.state=="failed")].metadata.name}', "a"),  # kubectl's filter syntax
        ("{.items[0].metadata}", '{"name":"a","labels":{"app.kubernetes.io/name":"x"}}'),  # objects as JSON
        ("{.items[0].metadata.labels['app.kubernetes.io/name']}", "x"),
        ("{.items[*].ok}", "true false"),
        ("{.items[-1].metadata.name}", "b"),
        ("{..name}", "a b"),
        ("{.missing}", ""),  # a missing key prints nothing (kubectl's default)
        ("{.items[1].none}", ""),
        ('{"}"}', "}"),  # a brace inside a literal
        ("{range .items[*]}[{@.n}]{end}", "[1][2]"),
    ],
)
def test_templates_print_as_kubectl(template: str, printed: str) -> None:
    assert compile_template(template).render(DOC) == printed


@pytest.mark.parametrize(
    "template", ["{.items", "{end}", "{range .items[*]}{.n}", "{.items[}", "{range .items[*]}{end}{end}", '{"\\q"}']
)
def test_a_template_kubectl_would_refuse_is_refused_when_compiled(template: str) -> None:
    with pytest.raises(TemplateError):
        compile_template(template)


def test_custom_columns_cells_as_kubectl() -> None:
    columns = parse_columns("NAME:.metadata.name,STATE:{.state},N:n,NONE:.none,ALL:.metadata.*")
    assert [c.header for c in columns] == ["NAME", "STATE", "N", "NONE", "ALL"]
    assert [[c.cell(i) for c in columns] for i in DOC["items"]] == [
        ["a", "failed", "1", "<none>", 'a,{"app.kubernetes.io/name":"x"}'],  # several: comma-separated
        ["b", "succeeded", "2", "<none>", "b"],  # missing and null: <none>
    ]
    for bad in ("", "NAME", "NAME:", ":.a", "A:.a,B"):
        with pytest.raises(TemplateError):
            parse_columns(bad)


def test_parse_format_accepts_only_what_the_command_offers() -> None:
    kinds = ("wide", "json", "name", "jsonpath", "custom-columns")
    assert output.parse_format("wide", kinds).kind == "wide"
    assert output.parse_format("jsonpath={.a}", kinds).template is not None
    assert len(output.parse_format("custom-columns=A:.a,B:.b", kinds).columns) == 2
    assert output.parse_format("jsonpath=a=b {.a}", kinds).template is not None  # only the first = splits
    for bad in ("yaml", "jsonpath", "jsonpath=", "wide=x", "name=", "custom-columns", "csv", ""):
        with pytest.raises(ValueError):
            output.parse_format(bad, kinds)
    assert output.metavar(kinds) == "wide|json|name|jsonpath=TEMPLATE|custom-columns=SPEC"


def emitted(fmt: str | None, no_headers: bool = False) -> tuple[bool, str]:
    kinds = ("wide", "json", "yaml", "name", "jsonpath", "custom-columns", "csv")
    stream = io.StringIO()
    done = output.emit(
        output.parse_format(fmt, kinds) if fmt else None,
        document=lambda: DOC,
        items=lambda: DOC["items"],
        names=lambda: (f"thing/{i['metadata']['name']}" for i in DOC["items"]),
        no_headers=no_headers,
        stream=stream,
    )
    return done, stream.getvalue()


def test_emit_prints_the_shared_formats_and_leaves_the_rest_to_the_command() -> None:
    assert json.loads(emitted("json")[1]) == DOC
    assert yaml.safe_load(emitted("yaml")[1]) == DOC
    assert emitted("name") == (True, "thing/a\nthing/b\n")
    assert emitted("jsonpath={.items[*].n}") == (True, "1 2")
    assert emitted("custom-columns=NAME:.metadata.name,N:.n") == (True, "NAME   N\na      1\nb      2\n")
    assert emitted("custom-columns=NAME:.metadata.name,N:.n", no_headers=True) == (True, "a   1\nb   2\n")
    for own in (None, "wide", "csv"):  # the command's table, wide, results' csv
        assert emitted(own) == (False, "")


def test_tables_without_headers_size_their_columns_by_the_rows() -> None:
    rows = [["n1", "failed"], ["node-22", "ok"]]
    assert output.plain_table(["NODE", "STATE"], rows) == "NODE      STATE\nn1        failed\nnode-22   ok"
    assert output.plain_table([], rows) == "n1        failed\nnode-22   ok"
    stream = io.StringIO()
    output.print_table(["NODE", "STATE"], rows, stream=stream, no_headers=True)
    assert stream.getvalue() == "n1        failed\nnode-22   ok\n"
    stream = io.StringIO()
    output.print_table(["NODE", "STATE"], rows, stream=stream, force_terminal=True, no_headers=True)
    assert "NODE" not in stream.getvalue() and "node-22" in stream.getvalue()


def test_the_guides_command_table_is_made_from_the_parsers_help() -> None:
    page = (Path(__file__).resolve().parents[2] / "docs" / "guides" / "kubectl.md").read_text(encoding="utf-8")
    assert commandtable.rewrite(page, build_parser()) == page, (
        "the kubectl daemonjob command table of docs/guides/kubectl.md is stale: "
        "python -m daemonjob.kubectl.commandtable docs/guides/kubectl.md"
    )


def test_command_table_has_every_command_with_its_own_flags_only() -> None:
    parser = build_parser()
    names = [name for name, _ in commandtable.commands(parser)]
    assert "status" in names and "rollout status" in names and "rollout" not in names and len(names) == 15
    table = commandtable.table(parser)
    assert len(table.splitlines()) == 2 + len(names)
    status = next(line for line in table.splitlines() if line.startswith("| `status "))
    assert "--node-selector SELECTOR" in status and "custom-columns=SPEC" in status and "--no-headers" in status
    assert "--kubeconfig" not in table and "--namespace" not in table and "[-h]" not in table  # described once
    assert "-l SELECTOR" not in status  # the deprecated alias is not offered
    assert "\\|" in status  # a pipe inside a cell does not end it
