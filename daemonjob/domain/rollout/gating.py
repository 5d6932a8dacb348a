"""What the gates answer: each gate's `Hold`, and `Gating`, every hold with the turns and slots left.

Choosing the actions and the conditions read them; the gates themselves are gates/.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from daemonjob.domain.nodework.maintenance import NodeWork
from daemonjob.domain.rollout.turns import Actions, Turns

__all__ = ["Hold", "Gating"]


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


@dataclass(frozen=True, slots=True)
class Gating:
    """Every gate's hold, in precedence order, and what they leave to choose from: `turns` (the
    slots the gates hold added), `slots` (maxParallel). `stopped`: suspend, the failure budget, no
    run yet, an unrecorded revision or a blocking stall: nothing starts; `probing`: the API server
    rejects creates, so one create probes and nothing is torn down."""

    holds: tuple[Hold, ...]
    turns: Turns
    slots: int | None
    stopped: bool = False
    probing: bool = False

    @property
    def blocked(self) -> bool:
        """Nothing starts and nothing running is torn down."""
        return self.stopped or any(h.blocks for h in self.holds)

    @property
    def limit(self) -> int | None:
        """At most this many turns are taken (None: the slots alone say)."""
        return min((h.limit for h in self.holds if h.limit is not None), default=None)

    def in_force(self, actions: Actions) -> Hold | None:
        """The gate that holds waiting turns back in `actions`, the first by precedence."""
        return next((h for h in self.holds if h.in_force(actions, self.turns.held, self.slots)), None)

    def hold(self, gate: str) -> Hold | None:
        return next((h for h in self.holds if h.gate == gate), None)
