"""spec.nodeMaintenance as the decision reads it: how a node is taken out of service around its Job.

validate.py compiles it (`validate_maintenance`); the decision's maintenance step
(maintenance.py) reads this value, never the raw spec. A problem in it stops the rollout
as any other spec problem does: a half-understood drain is worse than none.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from daemonjob import defaults
from daemonjob.domain.spec.selectors import LabelMatcher

__all__ = [
    "DrainOptions",
    "GRACE_PERIOD_MIN",
    "GRACE_RULE",
    "Maintenance",
    "ON_TIMEOUT_FAIL",
    "ON_TIMEOUT_SKIP",
    "ON_TIMEOUT_POLICIES",
    "PATH",
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
