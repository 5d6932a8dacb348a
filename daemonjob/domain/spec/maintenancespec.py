"""spec.nodeMaintenance as the decision reads it: how a node is taken out of service around its Job.

`validate_maintenance` compiles it for the rule book (validate.py); the decision's maintenance step
(maintenance.py) reads this value, never the raw spec. A problem in it stops the rollout
as any other spec problem does: a half-understood drain is worse than none.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from daemonjob import defaults
from daemonjob.domain.spec.labelrules import InvalidSelector
from daemonjob.domain.spec.problems import INVALID_SELECTOR, INVALID_SPEC, Problem, is_int
from daemonjob.domain.spec.problems import show as _show
from daemonjob.domain.spec.rolloutspec import read_duration
from daemonjob.domain.spec.selectors import LabelMatcher, compile_label_selector

__all__ = [
    "DrainOptions",
    "GRACE_PERIOD_MIN",
    "GRACE_RULE",
    "Maintenance",
    "ON_TIMEOUT_FAIL",
    "ON_TIMEOUT_SKIP",
    "ON_TIMEOUT_POLICIES",
    "PATH",
    "validate_maintenance",
    "wants_maintenance",
]

PATH = "spec.nodeMaintenance"
ON_TIMEOUT_FAIL = "Fail"  # the node fails (failedNodes, maxFailedNodes) and is uncordoned
ON_TIMEOUT_SKIP = "Skip"  # the node is uncordoned and left out of this rollout; the others go on
ON_TIMEOUT_POLICIES = (ON_TIMEOUT_FAIL, ON_TIMEOUT_SKIP)
# An eviction with gracePeriodSeconds 0 removes the pod from the API at once while its
# containers may still run on the node, so the drain would end before the node is empty;
# kubectl turns 0 into 1 unless forced. The CRD schema says the same (minimum: 1).
GRACE_PERIOD_MIN = 1
GRACE_RULE = (
    f"must be an integer >= {GRACE_PERIOD_MIN} (0 would delete the pods from the API at once, "
    "while their containers may still run on the node)"
)


@dataclass(frozen=True, slots=True)
class DrainOptions:
    """spec.nodeMaintenance.drain: kubectl drain's choices, evictions through the Eviction API."""

    timeout: timedelta = defaults.DRAIN_TIMEOUT
    grace_period_seconds: int | None = None  # None: each pod's own terminationGracePeriodSeconds
    delete_emptydir_data: bool = False  # pods with emptyDir volumes are evicted only if true
    force: bool = False  # pods that no controller would re-create are evicted only if true
    ignore_pods: LabelMatcher | None = None  # pods whose labels it matches are left alone
    on_timeout: str = ON_TIMEOUT_FAIL


@dataclass(frozen=True, slots=True)
class Maintenance:
    """What a node's turn does around its Job: cordon, drain, then the Job, then uncordon."""

    cordon: bool = False
    drain: DrainOptions | None = None
    keep_failed_cordoned: bool = False  # a node whose Job failed stays cordoned for inspection


def wants_maintenance(spec: Any) -> bool:
    """Whether a spec asks to write Nodes (the namespace allowance applies): cordon or drain set."""
    raw = spec.get("nodeMaintenance") if isinstance(spec, Mapping) else None
    return isinstance(raw, Mapping) and (bool(raw.get("cordon")) or raw.get("drain") is not None)


def _flag(section: Mapping[str, Any], key: str, path: str, problems: list[Problem]) -> bool:
    value = section.get(key)
    if value is None or isinstance(value, bool):
        return bool(value)
    problems.append(Problem(INVALID_SPEC, f"{path}.{key}: Invalid value: {_show(value)}: must be a boolean"))
    return False


def validate_maintenance(spec: Mapping[str, Any], problems: list[Problem]) -> Maintenance | None:
    """spec.nodeMaintenance compiled, None when it asks for nothing or has a problem (appended)."""
    raw = spec.get("nodeMaintenance")
    path = PATH
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        problems.append(Problem(INVALID_SPEC, f"{path}: Invalid value: {_show(raw)}: must be an object"))
        return None
    before = len(problems)
    cordon = _flag(raw, "cordon", path, problems)
    keep = _flag(raw, "keepFailedCordoned", path, problems)
    drain = _drain(raw, problems)
    if drain is not None and not cordon:
        problems.append(
            Problem(
                INVALID_SPEC,
                f"{path}.drain: Invalid value: a drain needs cordon: true "
                "(pods evicted from a schedulable node may come straight back)",
            )
        )
    if len(problems) > before or not (cordon or drain is not None):
        return None
    return Maintenance(cordon=cordon, drain=drain, keep_failed_cordoned=keep)


def _drain(section: Mapping[str, Any], problems: list[Problem]) -> DrainOptions | None:
    raw = section.get("drain")
    path = f"{PATH}.drain"
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        problems.append(Problem(INVALID_SPEC, f"{path}: Invalid value: {_show(raw)}: must be an object"))
        return None
    timeout = read_duration(raw, "timeout", path, problems, positive=True) or defaults.DRAIN_TIMEOUT
    grace = raw.get("gracePeriodSeconds")
    if grace is not None and not (is_int(grace) and grace >= GRACE_PERIOD_MIN):
        problems.append(
            Problem(INVALID_SPEC, f"{path}.gracePeriodSeconds: Invalid value: {_show(grace)}: {GRACE_RULE}")
        )
        grace = None
    on_timeout = raw.get("onTimeout", ON_TIMEOUT_FAIL)
    if on_timeout not in ON_TIMEOUT_POLICIES:
        supported = ", ".join(_show(p) for p in ON_TIMEOUT_POLICIES)
        problems.append(
            Problem(
                INVALID_SPEC, f"{path}.onTimeout: Unsupported value: {_show(on_timeout)}: supported values: {supported}"
            )
        )
        on_timeout = ON_TIMEOUT_FAIL
    ignore = None
    selector = raw.get("ignorePodSelector")
    if selector is not None:
        try:
            ignore = compile_label_selector(selector, f"{path}.ignorePodSelector")
        except InvalidSelector as e:
            problems.append(Problem(INVALID_SELECTOR, e.message))
    return DrainOptions(
        timeout=timeout,
        grace_period_seconds=grace,
        delete_emptydir_data=_flag(raw, "deleteEmptyDirData", path, problems),
        force=_flag(raw, "force", path, problems),
        ignore_pods=ignore,
        on_timeout=on_timeout,
    )
