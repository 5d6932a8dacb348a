"""Label and node selector semantics and validation."""

from __future__ import annotations

import pytest

from daemonjob.domain.spec.labelrules import InvalidSelector
from daemonjob.domain.spec.selectors import compile_label_map, compile_label_selector, compile_node_selector


@pytest.mark.parametrize("selector", [None, {}, {"matchLabels": {}}, {"matchExpressions": []}])
def test_empty_and_none_label_selectors_match_everything(selector: object) -> None:
    match = compile_label_selector(selector)
    assert match({})
    assert match({"a": "b"})


def test_match_labels_all_pairs_must_match() -> None:
    match = compile_label_selector({"matchLabels": {"role": "worker", "zone": "a"}})
    assert match({"role": "worker", "zone": "a", "extra": "x"})
    assert not match({"role": "worker"})
    assert not match({"role": "worker", "zone": "b"})


@pytest.mark.parametrize(
    ("op", "values", "labels", "expected"),
    [
        ("In", ["a", "b"], {"k": "a"}, True),
        ("In", ["a", "b"], {"k": "c"}, False),
        ("In", ["a"], {}, False),
        ("NotIn", ["a"], {"k": "b"}, True),
        ("NotIn", ["a"], {}, True),
        ("NotIn", ["a"], {"k": "a"}, False),
        ("Exists", None, {"k": ""}, True),
        ("Exists", [], {}, False),
        ("DoesNotExist", None, {}, True),
        ("DoesNotExist", None, {"k": "x"}, False),
    ],
)
def test_match_expressions(op: str, values: list[str] | None, labels: dict[str, str], expected: bool) -> None:
    expr: dict[str, object] = {"key": "k", "operator": op}
    if values is not None:
        expr["values"] = values
    assert compile_label_selector({"matchExpressions": [expr]})(labels) is expected


def test_match_labels_and_expressions_are_anded() -> None:
    match = compile_label_selector(
        {
            "matchLabels": {"role": "worker"},
            "matchExpressions": [{"key": "gpu", "operator": "DoesNotExist"}],
        }
    )
    assert match({"role": "worker"})
    assert not match({"role": "worker", "gpu": "a100"})
    assert not match({"role": "infra"})


@pytest.mark.parametrize(
    ("selector", "fragment"),
    [
        ({"matchExpressions": [{"key": "k", "operator": "Like", "values": ["a"]}]}, 'Unsupported value: "Like"'),
        ({"matchExpressions": [{"key": "k", "operator": "In"}]}, "Required value"),
        ({"matchExpressions": [{"key": "k", "operator": "NotIn", "values": []}]}, "Required value"),
        ({"matchExpressions": [{"key": "k", "operator": "Exists", "values": ["a"]}]}, "Forbidden"),
        ({"matchExpressions": [{"key": "k", "operator": "DoesNotExist", "values": ["a"]}]}, "Forbidden"),
        ({"matchExpressions": [{"key": "bad key", "operator": "Exists"}]}, "name part must consist"),
        ({"matchExpressions": [{"key": "k", "operator": "In", "values": ["bad value!"]}]}, "a valid label"),
        ({"matchLabels": {"Bad_Prefix.com/k": "v"}}, "prefix part"),
        ({"matchLabels": {"k": "v" * 64}}, "no more than 63"),
        ({"matchLabels": {"/k": "v"}}, "prefix part must be non-empty"),
        ({"matchLabels": {"k": 3}}, "must be a string"),
        ({"matchLabels": ["k"]}, "must be an object"),
        ({"matchExpressions": {"key": "k"}}, "must be a list"),
        ({"matchLabel": {"k": "v"}}, 'unknown field "matchLabel"'),
    ],
)
def test_invalid_label_selectors_raise_clear_messages(selector: dict[str, object], fragment: str) -> None:
    with pytest.raises(InvalidSelector) as err:
        compile_label_selector(selector, "spec.nodeSelector")
    assert fragment in err.value.message
    assert err.value.message.startswith("spec.nodeSelector")


def test_error_message_names_the_field_path() -> None:
    with pytest.raises(InvalidSelector) as err:
        compile_label_selector(
            {"matchExpressions": [{"key": "a", "operator": "Exists"}, {"key": "k", "operator": "In"}]},
            "spec.nodeSelector",
        )
    assert err.value.message.startswith("spec.nodeSelector.matchExpressions[1].values: Required value")


def test_label_map_matches_exact_pairs() -> None:
    match = compile_label_map({"disk": "ssd"})
    assert match({"disk": "ssd", "x": "y"})
    assert not match({"disk": "hdd"})
    assert not match({})
    assert compile_label_map(None)({})


def _node_selector(*terms: dict[str, object]) -> dict[str, object]:
    return {"nodeSelectorTerms": list(terms)}


def test_node_selector_terms_are_ored_and_requirements_anded() -> None:
    match = compile_node_selector(
        _node_selector(
            {
                "matchExpressions": [
                    {"key": "zone", "operator": "In", "values": ["a"]},
                    {"key": "gpu", "operator": "Exists"},
                ]
            },
            {"matchExpressions": [{"key": "role", "operator": "In", "values": ["infra"]}]},
        )
    )
    assert match({"zone": "a", "gpu": "1"}, "n1")
    assert not match({"zone": "a"}, "n1")
    assert match({"role": "infra"}, "n1")
    assert not match({}, "n1")


@pytest.mark.parametrize(
    ("op", "bound", "value", "expected"),
    [
        ("Gt", "4", "5", True),
        ("Gt", "4", "4", False),
        ("Lt", "4", "3", True),
        ("Lt", "4", "4", False),
        ("Gt", "4", "five", False),
        ("Lt", "-1", "-2", True),
    ],
)
def test_node_selector_gt_lt(op: str, bound: str, value: str, expected: bool) -> None:
    match = compile_node_selector(
        _node_selector({"matchExpressions": [{"key": "cpus", "operator": op, "values": [bound]}]})
    )
    assert match({"cpus": value}, "n") is expected
    assert not match({}, "n")


def test_node_selector_match_fields_on_name() -> None:
    match = compile_node_selector(
        _node_selector({"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]})
    )
    assert match({}, "n1")
    assert not match({}, "n2")
    not_in = compile_node_selector(
        _node_selector({"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["n1"]}]})
    )
    assert not not_in({}, "n1")
    assert not_in({}, "n2")


def test_node_selector_fields_and_expressions_in_one_term_are_anded() -> None:
    match = compile_node_selector(
        _node_selector(
            {
                "matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}],
                "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}],
            }
        )
    )
    assert match({"zone": "a"}, "n1")
    assert not match({"zone": "a"}, "n2")
    assert not match({"zone": "b"}, "n1")


def test_empty_node_selector_term_matches_nothing_and_none_matches_all() -> None:
    assert not compile_node_selector(_node_selector({}))({"a": "b"}, "n")
    assert compile_node_selector(None)({}, "n")


@pytest.mark.parametrize(
    ("selector", "fragment"),
    [
        ({"nodeSelectorTerms": []}, "at least one node selector term"),
        (_node_selector({"matchExpressions": [{"key": "k", "operator": "Gt", "values": ["x"]}]}), "must be an integer"),
        (_node_selector({"matchExpressions": [{"key": "k", "operator": "Lt", "values": ["1", "2"]}]}), "single value"),
        (_node_selector({"matchExpressions": [{"key": "k", "operator": "Gt"}]}), "single value"),
        (
            _node_selector({"matchExpressions": [{"key": "k", "operator": "Near", "values": ["1"]}]}),
            'Unsupported value: "Near"',
        ),
        (_node_selector({"matchExpressions": [{"key": "k", "operator": "In"}]}), "Required value"),
        (_node_selector({"matchExpressions": [{"key": "k", "operator": "Exists", "values": ["a"]}]}), "Forbidden"),
        (
            _node_selector({"matchFields": [{"key": "metadata.labels", "operator": "In", "values": ["a"]}]}),
            "metadata.name",
        ),
        (
            _node_selector({"matchFields": [{"key": "metadata.name", "operator": "Exists"}]}),
            'Unsupported value: "Exists"',
        ),
        (
            _node_selector({"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["a", "b"]}]}),
            "only one value",
        ),
    ],
)
def test_invalid_node_selectors(selector: dict[str, object], fragment: str) -> None:
    with pytest.raises(InvalidSelector) as err:
        compile_node_selector(selector, "affinity")
    assert fragment in err.value.message
    assert err.value.message.startswith("affinity")
