"""The kept plan checked against one decided from scratch (controller.py's step 5)."""

from __future__ import annotations

import dataclasses

from daemonjob.controller.metrics.metrics import Metrics
from daemonjob.controller.passes.observe import Observation, Observer
from daemonjob.controller.runtime.keptplans import KeptPlans
from daemonjob.domain.decision.decide import NODE_COUNT_FIELDS, Decision, decide

__all__ = ["PlanSelfCheck"]


class PlanSelfCheck:
    def __init__(self, plans: KeptPlans, observer: Observer, metrics: Metrics) -> None:
        self.plans, self.observer, self.metrics = plans, observer, metrics

    def check(self, observed: Observation, kept: Decision) -> tuple[Decision, bool]:
        """The kept plan's decision against one from scratch, in a pass that had nothing to do
        while no urgent pass waits or runs (so a check never delays a create, nor a joined node's
        first Jobs: a full plan of every node holds the GIL tens of milliseconds), compared
        without acting on either: a difference is a bug, logged, counted and repaired (the plan
        is loaded whole, and the DaemonJob passed over again at once), unless an event marked
        the DaemonJob's nodes between the two reads (the full plan read newer caches: checked
        again at a later pass). Returns the decision to report and whether it was repaired."""
        assert kept.reading is not None
        full = decide(dataclasses.replace(kept.reading.input, kept_plan=self.observer.full_plan(observed)))
        self.metrics.plan_checks.inc()
        same = (
            kept.status == full.status
            and kept.deletes == full.deletes
            and [(c.node, c.name) for c in kept.creates] == [(c.node, c.name) for c in full.creates]
        )
        if same:
            return kept, False
        if self.plans.marked(observed.uid):  # a Job or node changed between the two reads: not a difference
            observed.log.debug("plan self-check inconclusive: the caches changed in between; checked again soon")
            self.plans.check_soon(observed.uid)
            return kept, False
        self.metrics.plan_differences.inc()
        observed.log.warning(
            "the kept plan differed from a full one; repaired",
            kept={k: kept.status.get(k) for k in NODE_COUNT_FIELDS},
            full={k: full.status.get(k) for k in NODE_COUNT_FIELDS},
            creates=(len(kept.creates), len(full.creates)),
            deletes=(len(kept.deletes), len(full.deletes)),
        )
        self.plans.reload(observed.uid)
        return full, True
