"""spec.rollout.pauseBetweenNodes: a node's success holds its maxParallel slot a while.

Read from the Jobs' completion times (the Jobs are the record), so a restart reads the same
pause. Only with maxParallel: without slots there is nothing to hold.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from datetime import datetime, timedelta

from daemonjob.domain.gates.hold import Gate, GateContext, duration_text
from daemonjob.domain.rollout.gating import Hold
from daemonjob.domain.rollout.plan import Plan
from daemonjob.domain.shared.timestamps import format_time

__all__ = ["GATE", "GATE_PAUSE", "PAUSING_BETWEEN_NODES", "PauseHold", "pause_hold"]

GATE_PAUSE = "pauseBetweenNodes"
PAUSING_BETWEEN_NODES = "PausingBetweenNodes"


@dataclass(frozen=True, slots=True)
class PauseHold:
    """Slots held by nodes whose Job succeeded less than pauseBetweenNodes ago."""

    held: int = 0
    until: datetime | None = None  # when the first of them frees its slot
    node: str | None = None  # the node whose success holds that slot

    def message(self, pause: timedelta) -> str:
        assert self.until is not None, "a hold of no slot has no message"
        slots = "1 maxParallel slot" if self.held == 1 else f"{self.held} maxParallel slots"
        return (
            f"pauseBetweenNodes {duration_text(pause)}: {slots} paused after a node's Job succeeded; "
            f"the next node starts at {format_time(self.until)} (after node {self.node})"
        )


def pause_hold(plan: Plan, pause: timedelta | None, now: datetime) -> PauseHold:
    """The slots that nodes' recent successes hold: a success at t holds its slot until t + pause."""
    if pause is None or not plan.successes:
        return PauseHold()
    since = now - pause
    first = bisect.bisect_right(plan.successes, since, key=lambda s: s[0])
    recent = plan.successes[first:]
    if not recent:
        return PauseHold()
    finished, node = recent[0]
    return PauseHold(len(recent), finished + pause, node)


def hold(at: GateContext) -> Hold:
    pause = at.reading.checked.rollout.pause
    if at.slots is None or pause is None:
        return Hold(GATE_PAUSE)
    state = pause_hold(at.reading.plan, pause, at.reading.input.now)
    if not state.held:
        return Hold(GATE_PAUSE)
    return Hold(
        GATE_PAUSE, slots=state.held, reason=PAUSING_BETWEEN_NODES, message=state.message(pause), wake=state.until
    )


GATE = Gate(hold, {PAUSING_BETWEEN_NODES: GATE_PAUSE})
