"""The one answer every rollout gate gives (`Hold`) and what it is asked with (`GateContext`).

A gate holds back only new node Jobs (and the delete of a running older Job that would make
way for one); a running Job is never stopped by a gate. Each gate is a pure function of the
decision's reading, so a restarted controller reads the same gate from the same objects.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from daemonjob.domain.rollout.actions import Actions, Turns

if TYPE_CHECKING:
    from daemonjob.domain.nodework.maintenance import NodeWork
    from daemonjob.domain.rollout.conditions import Stall
    from daemonjob.domain.rollout.inputs import DecisionInput
    from daemonjob.domain.rollout.reading import Reading
    from daemonjob.domain.spec.validate import Problem

__all__ = ["GateContext", "Hold", "Gate", "duration_text"]


@dataclass(frozen=True, slots=True)
class GateContext:
    """What a gate is asked with: the reading, the stall, the turns the gates before it let through."""

    reading: Reading
    stall: Stall | None
    turns: Turns
    slots: int | None  # maxParallel as a number of nodes (None: no limit)


@dataclass(frozen=True, slots=True)
class Hold:
    """One gate's answer. What it holds back: every new node (`blocks`), all but `limit` turns,
    some nodes (`turns`, the turns it lets through; None: all of them), `slots` maxParallel
    slots; until when (`wake`: when to look again, None: nothing to wait for by the clock);
    what Reconciling says while it is the gate in force (`reason`, `message`; none: never
    named); `work`: the Node writes it asks for (node maintenance); `marks`, `reads`: the
    health check's Job writes and pod reads."""

    gate: str = ""
    blocks: bool = False
    limit: int | None = None
    turns: Turns | None = None
    slots: int = 0
    reason: str = ""
    message: str = ""
    wake: datetime | None = None
    work: NodeWork | None = None
    marks: tuple[Any, ...] = ()  # verdicts to write on Jobs (the health check's MarkJob)
    reads: tuple[str, ...] = ()  # nodes whose pods the act layer reads for the next decision

    def in_force(self, actions: Actions, held: int, slots: int | None) -> bool:
        """Whether this hold is what keeps turns waiting in `actions`. `held`: the slots held
        by running nodes and by every gate; `slots`: maxParallel."""
        if not self.reason:
            return False
        if self.turns is not None:
            return True  # nodes it took out of the turns wait for it, whatever the slots say
        if not actions.waiting_turns:
            return False
        if self.blocks:
            return True
        if self.limit is not None and actions.limited:
            return True
        return bool(self.slots) and slots is not None and held - self.slots < slots and not actions.free_slots


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
