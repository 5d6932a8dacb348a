"""What a decision reads from its input before the API's troubles come in (`Reading`)."""

from __future__ import annotations

from dataclasses import dataclass

from daemonjob.domain.nodework.draintimeouts import DrainTimeouts
from daemonjob.domain.rollout.canarystate import CanaryState
from daemonjob.domain.rollout.inputs import DecisionInput
from daemonjob.domain.rollout.plan import Plan
from daemonjob.domain.rollout.stalls import FailureBudget
from daemonjob.domain.schedule.runs import ScheduleStep
from daemonjob.domain.spec.revision import Revision
from daemonjob.domain.spec.validate import Validation

__all__ = ["Reading"]


@dataclass(frozen=True, slots=True)
class Reading:
    """The revision, the validated spec, the schedule's step, the plan per node, the failure
    budget: what the API's troubles do not change, so `Decision.after_act` concludes again from it."""

    input: DecisionInput
    revision: Revision
    checked: Validation
    step: ScheduleStep
    idle: str | None  # why a scheduled DaemonJob starts nothing yet (no run has started)
    missing: list[str]  # referenced ConfigMaps that do not exist
    plan: Plan
    budget: FailureBudget
    canary: CanaryState
    drain_timeouts: DrainTimeouts | None = None  # drains timed out in this revision or run (nodeMaintenance)
