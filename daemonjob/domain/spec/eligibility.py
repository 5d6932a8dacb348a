"""Which nodes a DaemonJob should run on: the DaemonSet controller's rules.

Mirrors `NodeShouldRunDaemonPod` (the template's `nodeName` first, then node affinity
predicates plus untolerated NoSchedule/NoExecute taints) with one deliberate difference: no default
tolerations are added, so a NotReady, unreachable or cordoned node is not
eligible unless the template tolerates it. A Job started there would never run.

Everything user-supplied is validated at compile time; `Eligibility.eligible`
then does only dict lookups, since it runs for every node on every reconcile and
twice per node event.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from daemonjob.domain.shared.memo import Memo, no_memo
from daemonjob.domain.shared.noderecord import record_of
from daemonjob.domain.spec.labelrules import InvalidSelector, validate_label_key
from daemonjob.domain.spec.maintenancespec import wants_maintenance
from daemonjob.domain.spec.selectors import (
    REQUIRED_AFFINITY,
    LabelMatcher,
    NodeMatcher,
    compile_label_map,
    compile_label_selector,
    compile_node_selector,
)

_RULES = "eligibility"  # tags the memo key of eligibility answers on cached nodes

__all__ = [
    "InvalidSpec",
    "Ineligible",
    "Toleration",
    "Eligibility",
    "compile_eligibility",
    "compile_tolerations",
    "UNSCHEDULABLE_TAINT_KEY",
]

UNSCHEDULABLE_TAINT_KEY = "node.kubernetes.io/unschedulable"
NOT_READY_TAINT_KEYS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")

# What kind of rule a node fails, for tools that show one word (`kubectl daemonjob status`).
NOT_SELECTED = "not selected"
CORDONED = "cordoned"
NOT_READY = "NotReady"
TAINTED = "tainted"
BLOCKING_EFFECTS = frozenset({"NoSchedule", "NoExecute"})
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
TOLERATION_OPERATORS = ("Exists", "Equal")

DJ_SELECTOR_PATH = "spec.nodeSelector"
POD_SPEC_PATH = "spec.jobTemplate.spec.template.spec"


class InvalidSpec(InvalidSelector):
    """A DaemonJob spec that cannot be evaluated; `message` names the field."""


@dataclass(frozen=True, slots=True)
class Ineligible:
    """Why a node is not eligible: `kind` one of NOT_SELECTED, CORDONED, NOT_READY, TAINTED."""

    kind: str
    message: str


@dataclass(frozen=True, slots=True)
class Toleration:
    """A validated core/v1 Toleration; `operator` is normalised ("" means Equal)."""

    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""

    def tolerates(self, taint: Mapping[str, Any]) -> bool:
        """k8s `Toleration.ToleratesTaint`: empty effect/key are wildcards."""
        if self.effect and self.effect != taint.get("effect"):
            return False
        if self.key and self.key != taint.get("key"):
            return False
        if self.operator == "Exists":
            return True
        return self.value == (taint.get("value") or "")

    @property
    def tolerates_everything(self) -> bool:
        return not self.key and self.operator == "Exists" and not self.effect


def compile_tolerations(tolerations: Any, path: str = f"{POD_SPEC_PATH}.tolerations") -> tuple[Toleration, ...]:
    """Validate tolerations as the API server would, so a typo fails loudly, not silently."""
    if tolerations is None:
        return ()
    if not isinstance(tolerations, list):
        raise InvalidSpec(f"{path}: Invalid value: must be a list")
    out: list[Toleration] = []
    for i, raw in enumerate(tolerations):
        tpath = f"{path}[{i}]"
        if not isinstance(raw, Mapping):
            raise InvalidSpec(f"{tpath}: Invalid value: must be an object")
        key = raw.get("key") or ""
        operator = raw.get("operator") or "Equal"
        value = raw.get("value") or ""
        effect = raw.get("effect") or ""
        if key:
            try:
                validate_label_key(key, f"{tpath}.key")
            except InvalidSelector as e:
                raise InvalidSpec(e.message) from None
        if not isinstance(value, str):
            raise InvalidSpec(f"{tpath}.value: Invalid value: {value!r}: must be a string")
        if operator not in TOLERATION_OPERATORS:
            allowed = ", ".join(f'"{o}"' for o in TOLERATION_OPERATORS)
            raise InvalidSpec(f'{tpath}.operator: Unsupported value: "{operator}": supported values: {allowed}')
        if not key and operator != "Exists":
            raise InvalidSpec(
                f'{tpath}.operator: Invalid value: "{operator}": operator must be Exists when `key` is empty, '
                'which means "match all values and all keys"'
            )
        if operator == "Exists" and value:
            raise InvalidSpec(
                f"{tpath}.operator: Invalid value: \"{value}\": value must be empty when `operator` is 'Exists'"
            )
        if effect and effect not in TAINT_EFFECTS:
            allowed = ", ".join(f'"{e}"' for e in TAINT_EFFECTS)
            raise InvalidSpec(f'{tpath}.effect: Unsupported value: "{effect}": supported values: {allowed}')
        out.append(Toleration(key=key, operator=operator, value=value, effect=effect))
    return tuple(out)


def _taint_str(taint: Mapping[str, Any]) -> str:
    key, value, effect = taint.get("key", ""), taint.get("value"), taint.get("effect", "")
    return f"{key}={value}:{effect}" if value else f"{key}:{effect}"


class Eligibility:
    """Compiled eligibility rules of one DaemonJob (build with `compile_eligibility`)."""

    __slots__ = (
        "_node_name",
        "_selector",
        "_pod_selector",
        "_affinity",
        "_tolerations",
        "_tolerates_all",
        "_tolerates_cordon",
        "_own_uid",
        "rules",
    )

    def __init__(
        self,
        selector: LabelMatcher | None = None,
        pod_selector: LabelMatcher | None = None,
        affinity: NodeMatcher | None = None,
        tolerations: tuple[Toleration, ...] = (),
        rules: Hashable = None,
        node_name: str | None = None,
        own_uid: str | None = None,
    ) -> None:
        self.rules = rules  # the rules' source, canonical: equal rules, equal answers
        self._node_name = node_name
        self._selector = selector
        self._pod_selector = pod_selector
        self._affinity = affinity
        self._tolerations = tolerations
        self._tolerates_all = any(t.tolerates_everything for t in tolerations)
        cordon = {"key": UNSCHEDULABLE_TAINT_KEY, "effect": "NoSchedule"}
        self._tolerates_cordon = any(t.tolerates(cordon) for t in tolerations)
        self._own_uid = own_uid  # spec.nodeMaintenance: a cordon this DaemonJob wrote does not count

    def eligible(self, node: Mapping[str, Any]) -> bool:
        return self.reason(node) is None

    def eligible_cached(self, node: Mapping[str, Any], memo: Memo = no_memo) -> bool:
        """`eligible`, kept by `memo` per set of rules: DaemonJobs ask it of every node."""
        if self.rules is None:
            return self.eligible(node)
        return memo(node, self.eligible, self.rules)

    def reason(self, node: Mapping[str, Any]) -> str | None:
        """Why `node` is not eligible, or None if it is."""
        verdict = self.ineligible(node)
        return None if verdict is None else verdict.message

    def ineligible(self, node: Mapping[str, Any]) -> Ineligible | None:
        """Why `node` is not eligible (kind and message), or None if it is. Built only on failure."""
        meta = node.get("metadata") or {}
        if self._node_name is not None and self._node_name != meta.get("name"):
            return Ineligible(NOT_SELECTED, f'node is not "{self._node_name}", the {POD_SPEC_PATH}.nodeName')
        labels = meta.get("labels") or {}
        if self._selector is not None and not self._selector(labels):
            return Ineligible(NOT_SELECTED, f"node does not match {DJ_SELECTOR_PATH}")
        if self._pod_selector is not None and not self._pod_selector(labels):
            return Ineligible(NOT_SELECTED, f"node does not match {POD_SPEC_PATH}.nodeSelector")
        if self._affinity is not None and not self._affinity(labels, meta.get("name") or ""):
            return Ineligible(
                NOT_SELECTED, f"node does not match {POD_SPEC_PATH}.affinity.nodeAffinity.{REQUIRED_AFFINITY}"
            )
        spec = node.get("spec") or {}
        if spec.get("unschedulable") and not self._tolerates_cordon and not self._own_cordon(node):
            return Ineligible(
                CORDONED,
                "node is cordoned (spec.unschedulable) and the pod template does not "
                f'tolerate "{UNSCHEDULABLE_TAINT_KEY}:NoSchedule"',
            )
        if self._tolerates_all:
            return None
        for taint in spec.get("taints") or ():
            if taint.get("effect") not in BLOCKING_EFFECTS:
                continue
            if taint.get("key") == UNSCHEDULABLE_TAINT_KEY and self._own_cordon(node):
                continue  # the node controller's taint for our own cordon
            if not any(t.tolerates(taint) for t in self._tolerations):
                kind = NOT_READY if taint.get("key") in NOT_READY_TAINT_KEYS else TAINTED
                return Ineligible(kind, f'node has taint "{_taint_str(taint)}" that the pod template does not tolerate')
        return None

    def _own_cordon(self, node: Mapping[str, Any]) -> bool:
        """The node is cordoned by this DaemonJob's node maintenance (its record says so)."""
        if self._own_uid is None:
            return False
        record = record_of(node)
        return record is not None and record.cordoned and record.uid == self._own_uid


def _get(obj: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(obj, Mapping):
            return None
        obj = obj.get(key)
    return obj


def compile_eligibility(dj: Mapping[str, Any]) -> Eligibility:
    """Compile the node rules of a DaemonJob; raises InvalidSpec on an unusable spec."""
    spec = dj.get("spec") or {}
    pod_spec = _get(spec, "jobTemplate", "spec", "template", "spec") or {}
    if not isinstance(pod_spec, Mapping):
        raise InvalidSpec(f"{POD_SPEC_PATH}: Invalid value: must be an object")
    try:
        raw_selector = spec.get("nodeSelector") if isinstance(spec, Mapping) else None
        selector = compile_label_selector(raw_selector, DJ_SELECTOR_PATH) if raw_selector else None
        raw_pod_selector = pod_spec.get("nodeSelector")
        pod_selector = (
            compile_label_map(raw_pod_selector, f"{POD_SPEC_PATH}.nodeSelector") if raw_pod_selector else None
        )
        affinity_path = f"{POD_SPEC_PATH}.affinity.nodeAffinity.{REQUIRED_AFFINITY}"
        raw_affinity = _get(pod_spec, "affinity", "nodeAffinity", REQUIRED_AFFINITY)
        affinity = compile_node_selector(raw_affinity, affinity_path) if raw_affinity is not None else None
    except InvalidSpec:
        raise
    except InvalidSelector as e:
        raise InvalidSpec(e.message) from None
    tolerations = compile_tolerations(pod_spec.get("tolerations"))
    node_name = pod_spec.get("nodeName")
    if node_name is not None and not isinstance(node_name, str):
        raise InvalidSpec(f"{POD_SPEC_PATH}.nodeName: Invalid value: {node_name!r}: must be a string")
    node_name = node_name or None  # "" means unset, as for the DaemonSet controller
    own_uid = ((dj.get("metadata") or {}).get("uid") or "") if wants_maintenance(spec) else None
    try:
        rules: Hashable = (
            _RULES,
            orjson.dumps(
                [raw_selector, raw_pod_selector, raw_affinity, pod_spec.get("tolerations"), node_name, own_uid],
                option=orjson.OPT_SORT_KEYS,
            ),
        )
    except TypeError:  # not JSON (e.g. an integer beyond 64 bits): answers are not kept
        rules = None
    return Eligibility(selector, pod_selector, affinity, tolerations, rules, node_name, own_uid)
