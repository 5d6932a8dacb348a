"""Eligibility follows the DaemonSet controller's rules, without default tolerations."""

from __future__ import annotations

from typing import Any

import pytest

from daemonjob.domain.spec.eligibility import (
    InvalidSpec,
    Toleration,
    compile_eligibility,
    compile_tolerations,
)
from daemonjob.domain.spec.labelrules import InvalidSelector
from daemonjob.machinery.cache.frozen import freeze
from daemonjob.machinery.cache.memo import object_memo
from daemonjob.testing.doubles.builders import daemonjob, job_template


def dj(selector: Any = None, **pod_spec: Any) -> dict[str, Any]:
    """`pod_spec` fields (tolerations, affinity, nodeName) laid over the pod's, no container."""
    template = job_template(backoff_limit=None, pod_spec={"containers": [], **pod_spec})
    return daemonjob(nodeSelector=selector, template=template)


def node(
    name: str = "n1",
    labels: dict[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
    unschedulable: bool = False,
) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if taints:
        spec["taints"] = taints
    if unschedulable:
        spec["unschedulable"] = True
    return {"metadata": {"name": name, "labels": labels or {}}, "spec": spec}


def test_plain_node_is_eligible_for_plain_template() -> None:
    e = compile_eligibility(dj())
    assert e.eligible(node())
    assert e.reason(node()) is None


def test_daemonjob_node_selector() -> None:
    e = compile_eligibility(dj({"matchExpressions": [{"key": "role", "operator": "NotIn", "values": ["infra"]}]}))
    assert e.eligible(node(labels={"role": "worker"}))
    assert e.eligible(node())
    assert not e.eligible(node(labels={"role": "infra"}))
    assert "spec.nodeSelector" in (e.reason(node(labels={"role": "infra"})) or "")


def test_pod_template_node_selector_map() -> None:
    e = compile_eligibility(dj(nodeSelector={"disk": "ssd"}))
    assert e.eligible(node(labels={"disk": "ssd"}))
    assert not e.eligible(node(labels={"disk": "hdd"}))
    assert "template.spec.nodeSelector" in (e.reason(node()) or "")


def test_required_node_affinity() -> None:
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]},
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["special"]}]},
                ]
            },
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 1, "preference": {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]}}
            ],
        }
    }
    e = compile_eligibility(dj(affinity=affinity))
    assert e.eligible(node(labels={"zone": "a"}))
    assert e.eligible(node("special"))
    assert not e.eligible(node(labels={"zone": "b"}))
    assert "nodeAffinity" in (e.reason(node(labels={"zone": "b"})) or "")


def test_preferred_affinity_alone_does_not_restrict() -> None:
    affinity = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": []}}
    assert compile_eligibility(dj(affinity=affinity)).eligible(node())


@pytest.mark.parametrize("effect", ["NoSchedule", "NoExecute"])
def test_untolerated_blocking_taint_makes_node_ineligible(effect: str) -> None:
    n = node(taints=[{"key": "dedicated", "value": "gpu", "effect": effect}])
    e = compile_eligibility(dj())
    assert not e.eligible(n)
    assert f'"dedicated=gpu:{effect}"' in (e.reason(n) or "")


def test_prefer_no_schedule_taint_is_ignored() -> None:
    n = node(taints=[{"key": "dedicated", "value": "gpu", "effect": "PreferNoSchedule"}])
    assert compile_eligibility(dj()).eligible(n)


def test_no_default_tolerations_not_ready_node_is_ineligible() -> None:
    n = node(taints=[{"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"}])
    assert not compile_eligibility(dj()).eligible(n)
    tolerant = dj(
        tolerations=[
            {
                "key": "node.kubernetes.io/not-ready",
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": 300,
            }
        ]
    )
    assert compile_eligibility(tolerant).eligible(n)


@pytest.mark.parametrize(
    ("toleration", "tolerated"),
    [
        ({"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}, True),
        ({"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}, True),  # Equal is the default
        ({"key": "dedicated", "value": "cpu", "effect": "NoSchedule"}, False),
        ({"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}, True),
        ({"key": "dedicated", "operator": "Exists"}, True),  # empty effect matches all
        ({"key": "dedicated", "operator": "Exists", "effect": "NoExecute"}, False),
        ({"key": "other", "operator": "Exists"}, False),
        ({"operator": "Exists"}, True),  # empty key + Exists tolerates everything
        ({"operator": "Exists", "effect": "NoExecute"}, False),
        ({"key": "dedicated", "value": "gpu"}, True),
    ],
)
def test_toleration_matching(toleration: dict[str, str], tolerated: bool) -> None:
    n = node(taints=[{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}])
    assert compile_eligibility(dj(tolerations=[toleration])).eligible(n) is tolerated


def test_every_blocking_taint_must_be_tolerated() -> None:
    n = node(
        taints=[
            {"key": "a", "effect": "NoSchedule"},
            {"key": "b", "effect": "NoExecute"},
            {"key": "c", "effect": "PreferNoSchedule"},
        ]
    )
    only_a = dj(tolerations=[{"key": "a", "operator": "Exists"}])
    both = dj(tolerations=[{"key": "a", "operator": "Exists"}, {"key": "b", "operator": "Exists"}])
    assert not compile_eligibility(only_a).eligible(n)
    assert '"b:NoExecute"' in (compile_eligibility(only_a).reason(n) or "")
    assert compile_eligibility(both).eligible(n)


def test_cordoned_node_is_ineligible_unless_tolerated() -> None:
    n = node(unschedulable=True)
    e = compile_eligibility(dj())
    assert not e.eligible(n)
    assert "cordoned" in (e.reason(n) or "")
    tolerant = dj(
        tolerations=[{"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}]
    )
    assert compile_eligibility(tolerant).eligible(n)
    assert compile_eligibility(dj(tolerations=[{"operator": "Exists"}])).eligible(n)
    wrong_effect = dj(
        tolerations=[{"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoExecute"}]
    )
    assert not compile_eligibility(wrong_effect).eligible(n)


@pytest.mark.parametrize(
    ("bad", "fragment"),
    [
        (dj({"matchExpressions": [{"key": "k", "operator": "In"}]}), "spec.nodeSelector.matchExpressions[0].values"),
        (dj(nodeSelector={"bad key": "v"}), "spec.jobTemplate.spec.template.spec.nodeSelector"),
        (
            dj(
                affinity={
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {"matchExpressions": [{"key": "k", "operator": "Gt", "values": ["x"]}]}
                            ]
                        }
                    }
                }
            ),
            "must be an integer",
        ),
        (dj(tolerations=[{"key": "k", "operator": "Maybe"}]), 'Unsupported value: "Maybe"'),
        (dj(tolerations=[{"key": "", "operator": "Equal", "value": "v"}]), "operator must be Exists"),
        (dj(tolerations=[{"key": "k", "operator": "Exists", "value": "v"}]), "value must be empty"),
        (dj(tolerations=[{"key": "k", "effect": "Sometimes"}]), 'Unsupported value: "Sometimes"'),
        (dj(tolerations={"key": "k"}), "must be a list"),
    ],
)
def test_invalid_specs_raise_invalid_spec(bad: dict[str, Any], fragment: str) -> None:
    with pytest.raises(InvalidSpec) as err:
        compile_eligibility(bad)
    assert fragment in err.value.message
    assert isinstance(err.value, InvalidSelector)


def test_toleration_defaults() -> None:
    (t,) = compile_tolerations([{"key": "k", "value": "v"}])
    assert t == Toleration(key="k", operator="Equal", value="v", effect="")
    assert compile_tolerations(None) == ()


def test_eligibility_does_not_mutate_inputs() -> None:
    import copy

    spec = dj({"matchLabels": {"a": "b"}}, tolerations=[{"operator": "Exists"}])
    n = node(labels={"a": "b"}, taints=[{"key": "x", "effect": "NoSchedule"}], unschedulable=True)
    spec_copy, node_copy = copy.deepcopy(spec), copy.deepcopy(n)
    e = compile_eligibility(spec)
    assert e.eligible(n)
    assert spec == spec_copy and n == node_copy


def test_compiles_from_a_thawed_cached_daemonjob() -> None:
    """Cached objects are frozen (tuples for lists); the controller compiles from a thawed copy."""
    from daemonjob.machinery.cache.frozen import freeze, thaw

    dj = freeze(
        {
            "spec": {
                "nodeSelector": {"matchExpressions": [{"key": "a", "operator": "Exists"}]},
                "jobTemplate": {"spec": {"template": {"spec": {"tolerations": [{"operator": "Exists"}]}}}},
            }
        }
    )
    elig = compile_eligibility(thaw(dj))
    assert elig.eligible({"metadata": {"name": "n", "labels": {"a": "1"}}, "spec": {}})
    assert not elig.eligible({"metadata": {"name": "n", "labels": {}}, "spec": {}})


def test_answers_kept_on_cached_nodes_follow_the_rules_that_asked() -> None:
    """Each set of rules gets its own answer on a frozen node; equal rules share one."""
    nodes = [
        freeze(node("a", labels={"pool": "x"})),
        freeze(node("b", labels={"pool": "y"}, taints=[{"key": "k", "effect": "NoSchedule"}])),
    ]
    only_x = compile_eligibility(dj({"matchLabels": {"pool": "x"}}))
    tolerant = compile_eligibility(dj(tolerations=[{"operator": "Exists"}]))
    also_x = compile_eligibility(dj({"matchLabels": {"pool": "x"}}))
    for _ in range(2):  # the second round reads the kept answers
        assert [only_x.eligible_cached(n, object_memo) for n in nodes] == [True, False]
        assert [tolerant.eligible_cached(n, object_memo) for n in nodes] == [True, True]
        assert [also_x.eligible_cached(n, object_memo) for n in nodes] == [True, False]
    assert only_x.rules == also_x.rules != tolerant.rules
    plain = node("b", labels={"pool": "y"}, taints=[{"key": "k", "effect": "NoSchedule"}])
    assert tolerant.eligible_cached(plain, object_memo) and not only_x.eligible_cached(plain, object_memo)


def test_template_node_name_is_checked_first_as_by_the_daemonset_controller() -> None:
    rules = compile_eligibility(
        {
            "spec": {
                "jobTemplate": {
                    "spec": {"template": {"spec": {"nodeName": "b", "tolerations": [{"operator": "Exists"}]}}}
                }
            }
        }
    )
    a, b = node("a"), node("b", unschedulable=True)
    assert not rules.eligible(a) and 'node is not "b"' in (rules.reason(a) or "")
    assert rules.eligible(b)  # the other rules still apply: it tolerates the cordon
    assert compile_eligibility({"spec": {"jobTemplate": {"spec": {"template": {"spec": {"nodeName": ""}}}}}}).eligible(
        a
    )
    with pytest.raises(InvalidSpec, match="nodeName"):
        compile_eligibility({"spec": {"jobTemplate": {"spec": {"template": {"spec": {"nodeName": 3}}}}}})


def test_an_ineligible_node_says_which_kind_of_rule_it_fails() -> None:
    e = compile_eligibility(dj({"matchLabels": {"role": "worker"}}))
    worker = {"role": "worker"}
    kinds = {
        "not selected": node(labels={"role": "infra"}),
        "cordoned": node(labels=worker, unschedulable=True),
        "NotReady": node(labels=worker, taints=[{"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}]),
        "tainted": node(labels=worker, taints=[{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]),
    }
    for kind, n in kinds.items():
        verdict = e.ineligible(n)
        assert verdict is not None and verdict.kind == kind and verdict.message == e.reason(n)
    assert e.ineligible(node(labels=worker)) is None
