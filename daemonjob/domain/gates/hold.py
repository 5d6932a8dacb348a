"""What a rollout gate is asked with (`GateContext`) and how the gate step runs it (`Gate`); the
one answer every gate gives, `Hold`, is rollout/gating.py's.

A gate holds back only new node Jobs (and the delete of a running older Job that would make
way for one); a running Job is never stopped by a gate. Each gate is a pure function of the
decision's reading, so a restarted controller reads the same gate from the same objects.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta

from daemonjob.domain.rollout.condition import Stall
from daemonjob.domain.rollout.gating import Hold
from daemonjob.domain.rollout.inputs import DecisionInput
from daemonjob.domain.rollout.reading import Reading
from daemonjob.domain.rollout.turns import Turns
from daemonjob.domain.spec.validate import Problem

__all__ = ["GateContext", "Gate", "duration_text"]


@dataclass(frozen=True, slots=True)
class GateContext:
    """What a gate is asked with: the reading, the stall, the turns the gates before it let through."""

    reading: Reading
    stall: Stall | None
    turns: Turns
    slots: int | None  # maxParallel as a number of nodes (None: no limit)


def _no_problems(inp: DecisionInput) -> list[Problem]:
    return []


@dataclass(frozen=True, slots=True)
class Gate:
    """A gate as the step runs it. `hold`: its answer for one decision; `problems`: what it finds
    wrong with the spec before anything is decided (they stall the rollout, which every gate
    reads); `reasons`: its Reconciling reasons -> the gate name they report."""

    hold: Callable[[GateContext], Hold]
    reasons: Mapping[str, str] = field(default_factory=dict)
    problems: Callable[[DecisionInput], list[Problem]] = _no_problems

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(self.reasons.values()))


def duration_text(value: timedelta) -> str:
    """A duration as the spec writes one: 1h30m, 45s."""
    seconds = int(value.total_seconds())
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    text = "".join(f"{n}{u}" for n, u in ((hours, "h"), (minutes, "m"), (secs, "s")) if n)
    return text or "0s"
