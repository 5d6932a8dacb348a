"""The rollout's gates (spec.rollout): what holds new node Jobs back, read from the plan and the time.

Each gate is a pure function of the decision's input, so a restarted controller reads the
same gate from the same objects: the pause from the Jobs' completion times (the Jobs are the
record), the window from the clock. A gate holds back only new node Jobs (and the delete of a
running older Job that would make way for one); a running Job is never stopped by a gate.
Each says what it waits for and until when, and the instant to look again.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from daemonjob.domain.jobs import TERMINATING, format_time
from daemonjob.domain.order import GATE_AFTER, GATE_EXCLUSION, WAITING_FOR_DEPENDENCIES, WAITING_FOR_EXCLUSION_GROUP
from daemonjob.domain.plan import JobView, Plan
from daemonjob.domain.validate import Window, scaled

__all__ = [
    "GATES",
    "gate_in_force",
    "CanaryState",
    "canary_state",
    "canary_nodes",
    "canary_message",
    "ANNOTATION_PROMOTE",
    "CANARY_PAUSED",
    "WAITING_FOR_CANARY",
    "CANARY_FAILED",
    "GATE_CANARY",
    "GateWait",
    "PauseHold",
    "WindowState",
    "pause_hold",
    "window_state",
    "PAUSING_BETWEEN_NODES",
    "WAITING_FOR_WINDOW",
    "GATE_PAUSE",
    "GATE_WINDOW",
    "GATE_ALERTS",
    "HALTED_BY_ALERTS",
    "ALERTS_UNKNOWN",
]

# Reconciling reasons while a gate holds the rollout
PAUSING_BETWEEN_NODES = "PausingBetweenNodes"
WAITING_FOR_WINDOW = "WaitingForWindow"

CANARY_PAUSED = "CanaryPaused"
WAITING_FOR_CANARY = "WaitingForCanary"
CANARY_FAILED = "CanaryFailed"  # the Failed condition's reason: a canary node failed

# The annotation that promotes a canaried revision (or run): its value names it
ANNOTATION_PROMOTE = "daemonjob.io/promote"

CANARY_NODES_SHOWN = 10

# Gate names (the status and metrics name the gate in force)
GATE_PAUSE = "pauseBetweenNodes"
GATE_WINDOW = "window"
GATE_CANARY = "canary"
GATE_ALERTS = "alerts"
GATES = (GATE_WINDOW, GATE_CANARY, GATE_PAUSE, GATE_ALERTS, GATE_EXCLUSION, GATE_AFTER)

# spec.rollout.haltOnAlerts (alertgate.py): a matching alert fires, or the firing alerts are unknown
HALTED_BY_ALERTS = "HaltedByAlerts"
ALERTS_UNKNOWN = "AlertsUnknown"


@dataclass(frozen=True, slots=True)
class GateWait:
    """The gate in force: turns are waiting because of it. `reason` and `message` go to
    Reconciling; `wake`: when to look again (None: nothing to wait for by the clock)."""

    gate: str
    reason: str
    message: str
    wake: datetime | None


@dataclass(frozen=True, slots=True)
class PauseHold:
    """Slots held by nodes whose Job succeeded less than pauseBetweenNodes ago."""

    held: int = 0
    until: datetime | None = None  # when the first of them frees its slot
    node: str | None = None  # the node whose success holds that slot

    def message(self, pause: timedelta) -> str:
        slots = "1 maxParallel slot" if self.held == 1 else f"{self.held} maxParallel slots"
        return (
            f"pauseBetweenNodes {_duration_text(pause)}: {slots} paused after a node's Job succeeded; "
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
            f"for {_duration_text(window.duration)}): no new node is started, running Jobs finish; {when}"
        )


def window_state(window: Window | None, now: datetime) -> WindowState:
    """Open when a tick of the window's schedule lies in (now - duration, now]."""
    if window is None:
        return WindowState()
    start = window.schedule.latest_at_or_before(now)
    if start is not None and now < start + window.duration:
        return WindowState(True, closes_at=start + window.duration)
    return WindowState(False, opens_at=window.schedule.next_after(now))


def _duration_text(value: timedelta) -> str:
    seconds = int(value.total_seconds())
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    text = "".join(f"{n}{u}" for n, u in ((hours, "h"), (minutes, "m"), (secs, "s")) if n)
    return text or "0s"


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


def canary_message(state: CanaryState, nodes: list[str], name: str) -> str:
    shown = ", ".join(nodes[:CANARY_NODES_SHOWN]) + (
        f" (+{len(nodes) - CANARY_NODES_SHOWN} more)" if len(nodes) > CANARY_NODES_SHOWN else ""
    )
    if state.paused:
        return (
            f"canary of {state.target} succeeded on {shown}; the other nodes wait for a promote: "
            f"kubectl daemonjob promote {name} (annotation {ANNOTATION_PROMOTE}={state.target})"
        )
    return f"canary of {state.target} on {state.count} node(s) first: {shown}; the other nodes wait for it"


def gate_in_force(status: Mapping[str, Any]) -> tuple[str, str] | None:
    """(gate, reason) of the gate a written status says holds the rollout: its Reconciling reason."""
    for cond in status.get("conditions") or ():
        if isinstance(cond, Mapping) and cond.get("type") == "Reconciling" and cond.get("status") == "True":
            gate = _GATE_OF_REASON.get(cond.get("reason"))
            return (gate, str(cond.get("reason"))) if gate is not None else None
    return None


_GATE_OF_REASON = {
    WAITING_FOR_WINDOW: GATE_WINDOW,
    PAUSING_BETWEEN_NODES: GATE_PAUSE,
    CANARY_PAUSED: GATE_CANARY,
    WAITING_FOR_CANARY: GATE_CANARY,
    HALTED_BY_ALERTS: GATE_ALERTS,
    ALERTS_UNKNOWN: GATE_ALERTS,
    WAITING_FOR_EXCLUSION_GROUP: GATE_EXCLUSION,
    WAITING_FOR_DEPENDENCIES: GATE_AFTER,
}
