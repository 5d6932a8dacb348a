"""kubectl's JSONPath templates (`-o jsonpath=...`, `-o custom-columns=...`) over jsonpath-ng.

kubectl's dialect is a template: text with `{...}` actions, where an action is a path
(`{.items[*].metadata.name}`, relative to the current object), a quoted literal (`{"\\n"}`), or
`{range PATH}` ... `{end}`, which renders its body once per match with that match as the current
object. jsonpath-ng (its `ext` parser, for filters such as `[?(@.state=="failed")]`) evaluates each
path; this module only splits the template and prints values as kubectl does: strings bare,
several matches space-separated, objects and lists as JSON, a missing key as nothing.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from jsonpath_ng import JSONPath
from jsonpath_ng.ext import parse as _parse

__all__ = ["Column", "Template", "TemplateError", "compile_path", "compile_template", "parse_columns"]


class TemplateError(ValueError):
    """A template or column spec kubectl would refuse: a usage error, found before any request."""


def compile_path(expr: str) -> JSONPath:
    """A kubectl path (`.a.b`, `..name`, `@.a`, `$.a`, or relaxed `a.b`) as a jsonpath-ng path from the current
    object."""
    text = expr.strip()
    if text.startswith("@"):
        text = "$" + text[1:]
    elif text.startswith((".", "[")):
        text = "$" + text
    elif not text.startswith("$"):
        text = "$." + text
    try:
        return _parse(text)
    except Exception as exc:  # jsonpath-ng raises its lexer's and parser's own kinds, and plain Exception
        raise TemplateError(f"invalid JSONPath {expr!r}: {exc}") from None


def values(path: JSONPath, data: Any) -> list[Any]:
    return [m.value for m in path.find(data)]


def text_of(value: Any) -> str:
    """A value as kubectl prints it: strings bare, true/false, objects and lists as JSON, null as nothing."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return json.dumps(value, separators=(",", ":"), default=str)


@dataclass(frozen=True, slots=True)
class _Text:
    text: str


@dataclass(frozen=True, slots=True)
class _Path:
    path: JSONPath


@dataclass(frozen=True, slots=True)
class _Range:
    path: JSONPath
    body: tuple[_Text | _Path | _Range, ...]


_Node = _Text | _Path | _Range


def _split(template: str) -> list[tuple[bool, str]]:
    """(is an action, its text) in order; a `}` inside a quoted literal does not close its action."""
    parts: list[tuple[bool, str]] = []
    i, text = 0, ""
    while i < len(template):
        ch = template[i]
        if ch != "{":
            text += ch
            i += 1
            continue
        if text:
            parts.append((False, text))
            text = ""
        j, quote = i + 1, ""
        while j < len(template) and (quote or template[j] != "}"):
            c = template[j]
            if quote and c == "\\":
                j += 1
            elif c in "\"'" and (not quote or c == quote):
                quote = "" if quote else c
            j += 1
        if j >= len(template):
            raise TemplateError(f"unclosed action in template {template!r}")
        parts.append((True, template[i + 1 : j].strip()))
        i = j + 1
    if text:
        parts.append((False, text))
    return parts


def _literal(action: str) -> str | None:
    """The text of a quoted literal action (`"\\n"` with JSON's escapes, `'x'` as it is); None if it is none."""
    if len(action) < 2 or action[0] != action[-1] or action[0] not in "\"'":
        return None
    if action[0] == "'":
        return action[1:-1]
    try:
        return str(json.loads(action))
    except ValueError:
        raise TemplateError(f"invalid literal {action}") from None


@dataclass(frozen=True, slots=True)
class Template:
    nodes: tuple[_Node, ...]

    def render(self, data: Any) -> str:
        return "".join(_render(self.nodes, data))


def _render(nodes: Sequence[_Node], data: Any) -> list[str]:
    out: list[str] = []
    for node in nodes:
        if isinstance(node, _Text):
            out.append(node.text)
        elif isinstance(node, _Path):
            out.append(" ".join(text_of(v) for v in values(node.path, data)))
        else:
            for found in values(node.path, data):
                for item in found if isinstance(found, list) else (found,):
                    out.extend(_render(node.body, item))
    return out


def compile_template(template: str) -> Template:
    """kubectl's template text, checked whole: unbalanced range/end and bad paths are errors here."""
    stack: list[tuple[JSONPath | None, list[_Node]]] = [(None, [])]
    for is_action, text in _split(template):
        body = stack[-1][1]
        if not is_action:
            body.append(_Text(text))
        elif text == "end":
            if len(stack) == 1:
                raise TemplateError(f"{{end}} without {{range}} in template {template!r}")
            path, inner = stack.pop()
            assert path is not None
            stack[-1][1].append(_Range(path, tuple(inner)))
        elif text.startswith("range ") or text == "range":
            stack.append((compile_path(text[len("range") :] or "@"), []))
        elif (lit := _literal(text)) is not None:
            body.append(_Text(lit))
        elif text:
            body.append(_Path(compile_path(text)))
    if len(stack) != 1:
        raise TemplateError(f"{{range}} without {{end}} in template {template!r}")
    return Template(tuple(stack[0][1]))


@dataclass(frozen=True, slots=True)
class Column:
    header: str
    path: JSONPath

    def cell(self, obj: Any) -> str:
        """kubectl's custom-columns cell: several matches comma-separated, none (or null) as <none>."""
        found = [v for v in values(self.path, obj) if v is not None]
        return ",".join(text_of(v) for v in found) if found else "<none>"


def parse_columns(spec: str) -> tuple[Column, ...]:
    """`HEADER:.path,HEADER:{.path}`, as kubectl's custom-columns (a path may drop its braces and dot)."""
    if not spec.strip():
        raise TemplateError("custom-columns format specified but no custom columns given")
    columns = []
    for part in spec.split(","):
        header, sep, path = part.partition(":")
        if not sep or not header or not path.strip():
            raise TemplateError(f"unexpected custom-columns spec: {part}, expected <header>:<json-path-expr>")
        path = path.strip()
        if path.startswith("{") and path.endswith("}"):
            path = path[1:-1]
        columns.append(Column(header, compile_path(path)))
    return tuple(columns)
