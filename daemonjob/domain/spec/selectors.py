"""Label and node selector matching, compiled once and evaluated per node.

Selectors come from user input the CRD schema cannot fully check, so compilation
validates them with the API server's rules and raises `InvalidSelector` carrying a
kubectl-style message (field path, problem, offending value). The returned matchers
are plain closures over frozensets: a reconcile evaluates them for every node.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

from daemonjob.domain.spec.labelrules import (
    InvalidSelector,
    invalid_value,
    unsupported_value,
    validate_label_key,
    validate_label_value,
)

__all__ = [
    "LabelMatcher",
    "NodeMatcher",
    "compile_label_selector",
    "compile_label_map",
    "compile_node_selector",
    "REQUIRED_AFFINITY",
]

LabelMatcher = Callable[[Mapping[str, str]], bool]
# A node matcher sees (labels, node name): matchFields only knows metadata.name.
NodeMatcher = Callable[[Mapping[str, str], str], bool]

LABEL_SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")
NODE_SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
NODE_FIELD_OPERATORS = ("In", "NotIn")
NODE_FIELD_KEYS = ("metadata.name",)
# The node affinity a Job's pod must match (the pod template's, then the one pinning it to its node)
REQUIRED_AFFINITY = "requiredDuringSchedulingIgnoredDuringExecution"
_INT_RE = re.compile(r"^[+-]?[0-9]+$")
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def _mapping(obj: Any, path: str) -> Mapping[str, Any]:
    if obj is None:
        return {}
    if not isinstance(obj, Mapping):
        raise invalid_value(path, type(obj).__name__, "must be an object")
    return obj


def _list(obj: Any, path: str) -> list[Any]:
    if obj is None:
        return []
    if not isinstance(obj, list):
        raise invalid_value(path, type(obj).__name__, "must be a list")
    return obj


def _string_values(values: Any, path: str) -> list[str]:
    values = _list(values, path)
    for i, v in enumerate(values):
        if not isinstance(v, str):
            raise invalid_value(f"{path}[{i}]", v, "must be a string")
    return values


def _check_value_count(op: str, values: list[str], path: str) -> None:
    if op in ("In", "NotIn") and not values:
        raise InvalidSelector(f"{path}: Required value: must be specified when `operator` is 'In' or 'NotIn'")
    if op in ("Exists", "DoesNotExist") and values:
        raise InvalidSelector(f"{path}: Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'")
    if op in ("Gt", "Lt") and len(values) != 1:
        raise InvalidSelector(f"{path}: Required value: must be specified single value when `operator` is 'Lt' or 'Gt'")


def _expression(expr: Any, path: str, operators: tuple[str, ...]) -> tuple[str, str, list[str]]:
    """One requirement of matchExpressions, checked as the API server does: key, operator, values."""
    expr = _mapping(expr, path)
    key = validate_label_key(expr.get("key"), f"{path}.key")
    op = expr.get("operator")
    if op not in operators:
        raise unsupported_value(f"{path}.operator", op, operators)
    values = _string_values(expr.get("values"), f"{path}.values")
    _check_value_count(op, values, f"{path}.values")
    return key, op, values


def _always(*_: Any) -> bool:
    return True


def _never(*_: Any) -> bool:
    return False


def _parse_int64(value: str) -> int | None:
    if not _INT_RE.match(value):
        return None
    n = int(value)
    return n if _INT64_MIN <= n <= _INT64_MAX else None


def _requirement(key: str, op: str, values: list[str]) -> LabelMatcher:
    """One `key op values` test over a label map (semantics of k8s labels.Requirement)."""
    if op == "In":
        allowed = frozenset(values)
        return lambda labels: key in labels and labels[key] in allowed
    if op == "NotIn":
        denied = frozenset(values)
        return lambda labels: key not in labels or labels[key] not in denied
    if op == "Exists":
        return lambda labels: key in labels
    if op == "DoesNotExist":
        return lambda labels: key not in labels
    bound = _parse_int64(values[0])
    assert bound is not None  # validated by the caller

    def compare(labels: Mapping[str, str]) -> bool:
        raw = labels.get(key)
        n = _parse_int64(raw) if isinstance(raw, str) else None
        if n is None:
            return False
        return n > bound if op == "Gt" else n < bound

    return compare


def _all_of(tests: list[LabelMatcher]) -> LabelMatcher:
    if not tests:
        return _always
    if len(tests) == 1:
        return tests[0]
    tests_t = tuple(tests)
    return lambda labels: all(t(labels) for t in tests_t)


def compile_label_map(selector: Any, path: str = "nodeSelector") -> LabelMatcher:
    """Compile an equality map such as a pod's `spec.nodeSelector`: every pair must match."""
    pairs = _mapping(selector, path)
    for key, value in pairs.items():
        validate_label_key(key, path)
        validate_label_value(value, f"{path}[{key}]")
    if not pairs:
        return _always
    items = tuple(pairs.items())
    return lambda labels: all(labels.get(k) == v for k, v in items)


def compile_label_selector(selector: Any, path: str = "selector") -> LabelMatcher:
    """Compile a metav1.LabelSelector. None and `{}` both match every label set."""
    if selector is None:
        return _always
    sel = _mapping(selector, path)
    unknown = sorted(set(sel) - {"matchLabels", "matchExpressions"})
    if unknown:
        raise InvalidSelector(f'{path}: Invalid value: unknown field "{unknown[0]}"')
    tests: list[LabelMatcher] = []
    match_labels = _mapping(sel.get("matchLabels"), f"{path}.matchLabels")
    if match_labels:
        tests.append(compile_label_map(match_labels, f"{path}.matchLabels"))
    for i, expr in enumerate(_list(sel.get("matchExpressions"), f"{path}.matchExpressions")):
        epath = f"{path}.matchExpressions[{i}]"
        key, op, values = _expression(expr, epath, LABEL_SELECTOR_OPERATORS)
        for j, v in enumerate(values):
            validate_label_value(v, f"{epath}.values[{j}]")
        tests.append(_requirement(key, op, values))
    return _all_of(tests)


def _compile_node_expressions(exprs: Any, path: str) -> list[LabelMatcher]:
    tests: list[LabelMatcher] = []
    for i, expr in enumerate(_list(exprs, path)):
        epath = f"{path}[{i}]"
        key, op, values = _expression(expr, epath, NODE_SELECTOR_OPERATORS)
        if op in ("Gt", "Lt") and _parse_int64(values[0]) is None:
            raise invalid_value(f"{epath}.values[0]", values[0], "must be an integer")
        tests.append(_requirement(key, op, values))
    return tests


def _compile_node_fields(fields: Any, path: str) -> list[Callable[[str], bool]]:
    tests: list[Callable[[str], bool]] = []
    for i, expr in enumerate(_list(fields, path)):
        epath = f"{path}[{i}]"
        expr = _mapping(expr, epath)
        key = expr.get("key")
        if key not in NODE_FIELD_KEYS:
            raise unsupported_value(f"{epath}.key", key, NODE_FIELD_KEYS)
        op = expr.get("operator")
        if op not in NODE_FIELD_OPERATORS:
            raise unsupported_value(f"{epath}.operator", op, NODE_FIELD_OPERATORS)
        values = _string_values(expr.get("values"), f"{epath}.values")
        if len(values) != 1:
            raise InvalidSelector(
                f"{epath}.values: Required value: must be only one value when `operator` is "
                "'In' or 'NotIn' for node field selector"
            )
        tests.append(partial(_name_is, values[0], op == "In"))
    return tests


def _name_is(value: str, wanted: bool, name: str) -> bool:
    return (name == value) is wanted


def compile_node_selector(selector: Any, path: str = "nodeSelector") -> NodeMatcher:
    """Compile a core/v1 NodeSelector: terms are ORed, requirements in a term ANDed.

    A term with neither matchExpressions nor matchFields matches no node, and a
    selector with no terms is rejected, both as in the API server and scheduler.
    None matches every node (no required affinity).
    """
    if selector is None:
        return _always
    sel = _mapping(selector, path)
    terms = _list(sel.get("nodeSelectorTerms"), f"{path}.nodeSelectorTerms")
    if not terms:
        raise InvalidSelector(f"{path}.nodeSelectorTerms: Required value: must have at least one node selector term")
    compiled: list[tuple[tuple[LabelMatcher, ...], tuple[Callable[[str], bool], ...]]] = []
    for i, term in enumerate(terms):
        tpath = f"{path}.nodeSelectorTerms[{i}]"
        term = _mapping(term, tpath)
        label_tests = _compile_node_expressions(term.get("matchExpressions"), f"{tpath}.matchExpressions")
        field_tests = _compile_node_fields(term.get("matchFields"), f"{tpath}.matchFields")
        if label_tests or field_tests:
            compiled.append((tuple(label_tests), tuple(field_tests)))
    if not compiled:
        return _never
    terms_t = tuple(compiled)

    def match(labels: Mapping[str, str], name: str) -> bool:
        return any(
            all(t(labels) for t in label_tests) and all(f(name) for f in field_tests)
            for label_tests, field_tests in terms_t
        )

    return match
