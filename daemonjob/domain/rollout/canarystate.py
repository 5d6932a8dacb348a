"""spec.rollout.canary's state for the current revision or run, read with the plan.

How many canary nodes may still start, whether one failed, or all succeeded and the rest waits
for a promote (the annotation naming the revision or run). The gate is gates/canary.py.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from daemonjob.domain.jobs.contract import TERMINATING
from daemonjob.domain.jobs.jobview import JobView
from daemonjob.domain.rollout.plan import Plan
from daemonjob.domain.spec.validate import scaled

__all__ = ["ANNOTATION_PROMOTE", "CANARY_FAILED", "CanaryState", "canary_state", "canary_nodes"]

CANARY_FAILED = "CanaryFailed"  # the Failed condition's reason: a canary node failed

# The annotation that promotes a canaried revision (or run): its value names it
ANNOTATION_PROMOTE = "daemonjob.io/promote"


@dataclass(frozen=True, slots=True)
class CanaryState:
    """spec.rollout.canary for the current revision or run, until it is promoted.

    The canary nodes are the first `count` nodes to start it (in the order turns are taken),
    as the Jobs record: a node with a Job of it, or whose older Job is being deleted to make way
    for one, is one of them. `limit`: how many more may start (None: the canary holds nothing)."""

    limit: int | None = None
    count: int = 0
    target: str = ""  # the revision or run to promote
    failed: bool = False  # a canary node failed it: the rollout stops
    paused: bool = False  # every canary node succeeded: the rest waits for a promote


def canary_state(canary: int | str | None, plan: Plan, target: str, promoted: str | None, never: bool) -> CanaryState:
    """`target`: the current run, else the current revision; `promoted`: the promote annotation.
    With rerunPolicy Never, nodes keep older revisions and no canary applies."""
    if canary is None or never or promoted == target or not plan.desired:
        return CanaryState()
    count = min(plan.desired, max(1, scaled(canary, plan.desired, round_up=True)))
    making_way = max(0, plan.busy - plan.active - len(plan.replacing))  # older Jobs being deleted for one
    started = plan.active + plan.succeeded + plan.failed + making_way
    failed = bool(plan.failed_current_names)
    paused = not failed and started >= count and plan.active == 0 and not making_way
    return CanaryState(max(0, count - started), count, target, failed, paused)


def canary_nodes(views: Iterable[JobView], revision: str, run: str | None) -> list[str]:
    """The nodes with a Job of the current revision and run: the canary nodes while it holds."""
    return sorted(
        {v.node for v in views if v.node and v.revision == revision and v.run == run and v.state != TERMINATING}
    )
