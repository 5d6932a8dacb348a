"""A label selector written as text (kubectl's `-l` syntax), read into its map form."""

from __future__ import annotations

import re
from typing import Any

from daemonjob.domain.spec.labelrules import InvalidSelector

__all__ = ["parse_selector_text"]

_SET_OP = re.compile(r"^(?P<key>[^\s!=]+)\s+(?P<op>in|notin)\s*\((?P<values>[^)]*)\)$")


def _split_terms(text: str) -> list[str]:
    """Split at commas outside parentheses."""
    terms, depth, cur = [], 0, ""
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            terms.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        terms.append(cur.strip())
    return terms


def parse_selector_text(text: str) -> dict[str, Any]:
    """A selector as kubectl's `-l` writes it (`a=b,c!=d,e in (x,y),f,!g`) as a
    metav1.LabelSelector; `compile_label_selector` validates its keys and values."""
    match_labels: dict[str, str] = {}
    exprs: list[dict[str, Any]] = []
    for term in _split_terms(text):
        if not term:
            raise InvalidSelector(f"invalid selector {text!r}: empty requirement")
        if m := _SET_OP.match(term):
            values = [v.strip() for v in m["values"].split(",") if v.strip()]
            exprs.append({"key": m["key"], "operator": "In" if m["op"] == "in" else "NotIn", "values": values})
        elif "!=" in term:
            key, value = (s.strip() for s in term.split("!=", 1))
            exprs.append({"key": key, "operator": "NotIn", "values": [value]})
        elif "=" in term:
            key, value = (s.strip() for s in term.replace("==", "=").split("=", 1))
            match_labels[key] = value
        elif term.startswith("!"):
            exprs.append({"key": term[1:].strip(), "operator": "DoesNotExist"})
        elif re.fullmatch(r"[^\s(),]+", term):
            exprs.append({"key": term, "operator": "Exists"})
        else:
            raise InvalidSelector(f"invalid selector {text!r}: cannot parse {term!r}")
    selector: dict[str, Any] = {}
    if match_labels:
        selector["matchLabels"] = match_labels
    if exprs:
        selector["matchExpressions"] = exprs
    return selector
