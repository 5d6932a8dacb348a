"""The plan with the drains that timed out folded in (spec.nodeMaintenance.drain.onTimeout)."""

from __future__ import annotations

from dataclasses import replace

from daemonjob.domain.nodework.draintimeouts import DrainTimeouts
from daemonjob.domain.rollout.plan import Plan

__all__ = ["with_drain_timeouts"]


def with_drain_timeouts(plan: Plan, outcomes: DrainTimeouts) -> Plan:
    """The plan with timed-out drains folded in: a failed one counts as a failed node (the
    failure budget spends it), a skipped one is left out of this rollout, as a node kept
    cordoned from an earlier one is; none takes a turn."""
    if not outcomes.done and not outcomes.kept:
        return plan
    done = outcomes.done | outcomes.kept
    starting_nodes = {t.node for t in plan.starting}
    starting = [t for t in plan.starting if t.node not in done]
    failed = sorted(n for n in outcomes.failed if n in starting_nodes)
    skipped = sum(1 for n in starting_nodes if n in outcomes.skipped or n in outcomes.kept)
    return replace(
        plan,
        starting=starting,
        eligible=plan.eligible - skipped,
        failed=plan.failed + len(failed),
        failed_names=sorted([*plan.failed_names, *failed]),
        failed_current_names=sorted([*plan.failed_current_names, *failed]),
    )
