"""spec.rollout.window: new nodes start only inside the window, read from the clock."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from daemonjob.domain.gates.hold import Gate, GateContext, duration_text
from daemonjob.domain.rollout.gating import Hold
from daemonjob.domain.shared.timestamps import format_time
from daemonjob.domain.spec.validate import Window

__all__ = ["GATE", "GATE_WINDOW", "WAITING_FOR_WINDOW", "WindowState", "window_state"]

GATE_WINDOW = "window"
WAITING_FOR_WINDOW = "WaitingForWindow"


@dataclass(frozen=True, slots=True)
class WindowState:
    """Whether the rollout's window is open now; if not, when the next one opens."""

    open: bool = True
    opens_at: datetime | None = None  # closed: the next window's start (None: never again)
    closes_at: datetime | None = None  # open: this window's end

    def message(self, window: Window) -> str:
        when = (
            f"the next window opens at {format_time(self.opens_at)}"
            if self.opens_at is not None
            else "no window opens again"
        )
        return (
            f"outside the rollout window ({window.schedule.expression!r} in {window.schedule.zone_name} "
            f"for {duration_text(window.duration)}): no new node is started, running Jobs finish; {when}"
        )


def window_state(window: Window | None, now: datetime) -> WindowState:
    """Open when a tick of the window's schedule lies in (now - duration, now]."""
    if window is None:
        return WindowState()
    start = window.schedule.latest_at_or_before(now)
    if start is not None and now < start + window.duration:
        return WindowState(True, closes_at=start + window.duration)
    return WindowState(False, opens_at=window.schedule.next_after(now))


def hold(at: GateContext) -> Hold:
    """A closed window holds every new node back (the window first: it holds them all)."""
    window = at.reading.checked.rollout.window
    state = window_state(window, at.reading.input.now)
    if state.open or window is None:
        return Hold(GATE_WINDOW)
    return Hold(GATE_WINDOW, blocks=True, reason=WAITING_FOR_WINDOW, message=state.message(window), wake=state.opens_at)


GATE = Gate(hold, {WAITING_FOR_WINDOW: GATE_WINDOW})
