"""spec.nodeParameters: read by the rule book, given to each node's Job from its node, and
never the cause of a new revision by a node's values."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import pytest

from daemonjob.domain.jobs.jobbody import build_job
from daemonjob.domain.spec.nodeparams import ENV_NODE_NAME, NodeParameter, node_values
from daemonjob.domain.spec.validate import read_spec, validate
from daemonjob.testing.doubles.builders import daemonjob, job_template, node
from daemonjob.testing.doubles.decisions import Given, decide_over

NOW = datetime(2024, 3, 1, 12, 0, 0, tzinfo=timezone.utc)
ZONE = {"env": "ZONE", "fromLabel": "topology.kubernetes.io/zone"}
RACK = {"env": "RACK", "fromAnnotation": "example.com/rack", "default": "none"}


def with_params(*params: Any, **template: Any) -> dict[str, Any]:
    return daemonjob(template=job_template(**template) if template else None, nodeParameters=list(params))


def problems(dj: dict[str, Any]) -> list[str]:
    return [p.message for p in validate(dj).problems]


def env_of(body: dict[str, Any], kind: str = "containers") -> list[list[dict[str, str]]]:
    return [c.get("env") for c in body["spec"]["template"]["spec"].get(kind) or ()]


def test_valid_entries_are_typed_in_order() -> None:
    spec = read_spec(with_params(ZONE, RACK))
    assert spec.node_parameters == (
        NodeParameter("ZONE", "fromLabel", "topology.kubernetes.io/zone"),
        NodeParameter("RACK", "fromAnnotation", "example.com/rack", "none"),
    )
    assert problems(with_params(ZONE, RACK)) == []


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        ({"env": "1ZONE", "fromLabel": "a"}, 'spec.nodeParameters[0].env: Invalid value: "1ZONE": a valid environment'),
        ({"env": "A=B", "fromLabel": "a"}, "spec.nodeParameters[0].env: Invalid value"),
        ({"fromLabel": "a"}, "spec.nodeParameters[0].env: Required value"),
        ({"env": "Z"}, 'spec.nodeParameters[0]: Invalid value: {"env": "Z"}: must set exactly one of'),
        ({"env": "Z", "fromLabel": "a", "fromAnnotation": "b"}, "must set exactly one of fromLabel, fromAnnotation"),
        ({"env": "Z", "fromLabel": "bad key!"}, 'spec.nodeParameters[0].fromLabel: Invalid value: "bad key!"'),
        ({"env": "Z", "fromAnnotation": "a/b/c"}, "spec.nodeParameters[0].fromAnnotation: Invalid value"),
        ({"env": "Z", "fromLabel": "a", "default": 3}, "spec.nodeParameters[0].default: Invalid value: 3"),
        ({"env": ENV_NODE_NAME, "fromLabel": "a"}, "every node Job gets it already"),
        ("ZONE", 'spec.nodeParameters[0]: Invalid value: "ZONE": must be an object'),
    ],
)
def test_an_invalid_entry_is_a_problem_naming_its_field(entry: Any, expected: str) -> None:
    dj = with_params(entry)
    (message,) = problems(dj)
    assert expected in message
    assert read_spec(dj).node_parameters == ()


def test_a_name_twice_or_one_the_template_sets_is_refused() -> None:
    dj = with_params(ZONE, {**RACK, "env": "ZONE"})
    assert problems(dj) == ['spec.nodeParameters[1].env: Duplicate value: "ZONE"']
    template = job_template(container={"env": [{"name": "X", "value": "1"}, {"name": "ZONE", "value": "z"}]})
    dj = daemonjob(template=template, nodeParameters=[ZONE])
    assert problems(dj) == [
        'spec.nodeParameters[0].env: Duplicate value: "ZONE": container "c" of the template sets it too '
        "(spec.jobTemplate.spec.template.spec.containers[0].env[1])"
    ]


def test_not_a_list_is_a_problem() -> None:
    assert problems(daemonjob(nodeParameters={"env": "A"})) == [
        'spec.nodeParameters: Invalid value: {"env": "A"}: must be a list'
    ]


def test_values_come_from_the_node_else_the_default_else_empty() -> None:
    params = read_spec(with_params(ZONE, RACK)).node_parameters
    labelled = node("n1", labels={"topology.kubernetes.io/zone": "eu-1a"})
    labelled["metadata"]["annotations"] = {"example.com/rack": "r7"}
    assert node_values(params, labelled) == (("ZONE", "eu-1a"), ("RACK", "r7"))
    assert node_values(params, node("n2")) == (("ZONE", ""), ("RACK", "none"))
    assert node_values(params, None) == (("ZONE", ""), ("RACK", "none"))


def test_every_container_and_init_container_gets_the_node_name_and_values_first() -> None:
    init = {"name": "prep", "image": "busybox"}
    template = job_template(
        container={"env": [{"name": "WHERE", "value": "$(ZONE)"}]}, pod_spec={"initContainers": [init]}
    )
    dj = daemonjob(template=template, nodeParameters=[ZONE])
    body = build_job(dj, "n1", "rev", node_env=(("ZONE", "eu-1a"),))
    ours = [{"name": ENV_NODE_NAME, "value": "n1"}, {"name": "ZONE", "value": "eu-1a"}]
    assert env_of(body) == [[*ours, {"name": "WHERE", "value": "$(ZONE)"}]]
    assert env_of(body, "initContainers") == [ours]
    assert "env" not in template["spec"]["template"]["spec"]["initContainers"][0]  # the input untouched


def test_without_parameters_the_node_name_alone_and_a_template_setting_it_keeps_its_own() -> None:
    body = build_job(daemonjob(), "n1", "rev")
    assert env_of(body) == [[{"name": ENV_NODE_NAME, "value": "n1"}]]
    own = [{"name": ENV_NODE_NAME, "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}]
    body = build_job(daemonjob(template=job_template(container={"env": own})), "n1", "rev")
    assert env_of(body) == [own]


def test_creates_carry_each_nodes_values_read_when_decided() -> None:
    dj = with_params(ZONE, RACK)
    nodes = [node("a", labels={"topology.kubernetes.io/zone": "z1"}), node("b")]
    nodes[1]["metadata"]["annotations"] = {"example.com/rack": "r2"}
    decision = decide_over(Given(dj, [], nodes, NOW))
    envs = {c.node: c.node_env for c in decision.creates}
    assert envs == {"a": (("ZONE", "z1"), ("RACK", "none")), "b": (("ZONE", ""), ("RACK", "r2"))}
    (created,) = [c.body for c in decision.creates if c.node == "a"]
    assert env_of(created)[0][:3] == [
        {"name": ENV_NODE_NAME, "value": "a"},
        {"name": "ZONE", "value": "z1"},
        {"name": "RACK", "value": "none"},
    ]


def test_the_revision_covers_the_entries_not_the_nodes_values() -> None:
    plain, with_zone = daemonjob(), with_params(ZONE)
    other_default = with_params({**ZONE, "default": "unknown"})
    decided = [
        decide_over(Given(dj, [], [node("a", labels={"topology.kubernetes.io/zone": z})], NOW)).status[
            "currentRevision"
        ]
        for dj, z in ((plain, "z1"), (with_zone, "z1"), (with_zone, "z2"), (other_default, "z1"))
    ]
    assert decided[1] == decided[2]  # the node's value is no part of it
    assert len({decided[0], decided[1], decided[3]}) == 3  # the entries are
    # without entries the revision is the template's hash, as before node parameters existed
    assert read_spec(plain).revision_source is read_spec(plain).job_template


MAINTENANCE = "daemonjob.io/maintenance"


@pytest.mark.parametrize(
    ("entry", "field"),
    [
        ({"env": "M", "fromAnnotation": MAINTENANCE}, "fromAnnotation"),
        ({"env": "N", "fromLabel": "daemonjob.io/name"}, "fromLabel"),
        ({"env": "S", "fromLabel": "nodes.daemonjob.io/x"}, "fromLabel"),
    ],
)
def test_a_daemonjob_io_key_is_refused(entry: dict[str, str], field: str) -> None:
    dj = with_params(ZONE, entry)
    key = entry[field]
    assert problems(dj) == [
        f'spec.nodeParameters[1].{field}: Forbidden: "{key}": keys under daemonjob.io/ are the controllers\' '
        "records on the Node and are never passed to a Job"
    ]
    assert [p.env for p in read_spec(dj).node_parameters] == ["ZONE"]
    assert problems(with_params({"env": "X", "fromLabel": "notdaemonjob.io/x"})) == []


def test_the_controller_never_copies_a_daemonjob_io_key_of_a_spec_that_got_in() -> None:
    """Admitted without the webhook: Stalled for the problem, and no node's Job carries the record."""
    dj = with_params({"env": "M", "fromAnnotation": MAINTENANCE}, ZONE)
    held = node("a", labels={"topology.kubernetes.io/zone": "z1"})
    held["metadata"]["annotations"] = {MAINTENANCE: '{"uid": "u-1", "revision": "r"}'}
    decision = decide_over(Given(dj, [], [held], NOW))
    assert all(dict(c.node_env).get("M") in (None, "") for c in decision.creates)
    assert all(MAINTENANCE not in str(c.body) and "u-1" not in str(c.body) for c in decision.creates)
    stalled = [c for c in decision.status["conditions"] if c["type"] == "Stalled"]
    assert stalled and stalled[0]["status"] == "True" and MAINTENANCE in stalled[0]["message"]
    # and the typed entry, however it was made, reads the default, never the record
    assert NodeParameter("M", "fromAnnotation", MAINTENANCE, "none").value(held) == "none"
