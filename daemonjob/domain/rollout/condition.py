"""A condition as a decision holds it (`Condition`, `Stall`, `Conditions`) and its API form.

The condition types and the reasons the other steps share are here too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from daemonjob.domain.shared.messages import condition_message

__all__ = [
    "COMPLETE",
    "FAILED_CONDITION",
    "RECONCILING",
    "STALLED",
    "Condition",
    "Stall",
    "Conditions",
    "plural",
    "render",
    "turned_true",
]

# Condition types, in the order they appear in the status
COMPLETE = "Complete"
FAILED_CONDITION = "Failed"
RECONCILING = "Reconciling"
STALLED = "Stalled"

HELD_SHOWN = 3  # names shown in a condition's message, the rest counted


@dataclass(frozen=True, slots=True)
class Condition:
    status: bool
    reason: str
    message: str


@dataclass(frozen=True, slots=True)
class Stall:
    """Why the rollout cannot go on by itself. `event`: the Warning Event reason announcing it
    (None: another condition's Event does); `on_message`: announce a changed message too."""

    condition: Condition
    event: str | None = None
    on_message: bool = False
    blocks: bool = False  # nothing starts, nothing running is torn down
    probing: bool = False  # the API server rejects creates: one probe, nothing torn down


@dataclass(frozen=True, slots=True)
class Conditions:
    complete: Condition
    failed: Condition
    reconciling: Condition
    stalled: Stall

    def by_type(self) -> tuple[tuple[str, Condition], ...]:
        return (
            (COMPLETE, self.complete),
            (FAILED_CONDITION, self.failed),
            (RECONCILING, self.reconciling),
            (STALLED, self.stalled.condition),
        )


def plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def render(
    previous: Mapping[str, Mapping[str, Any]], kind: str, cond: Condition, now: str, generation: Any
) -> dict[str, Any]:
    """The API form; lastTransitionTime is kept while the status stays the same."""
    status = "True" if cond.status else "False"
    prev = previous.get(kind) or {}
    since = prev.get("lastTransitionTime") if prev.get("status") == status else None
    out: dict[str, Any] = {
        "type": kind,
        "status": status,
        "reason": cond.reason,
        "message": condition_message(cond.message),
        "lastTransitionTime": since or now,
    }
    if generation is not None:
        out["observedGeneration"] = generation
    return out


def turned_true(
    previous: Mapping[str, Mapping[str, Any]], kind: str, cond: Condition, on_message: bool = False
) -> bool:
    """True when `cond` is True now and was not, or was True for another reason (or message)."""
    prev = previous.get(kind) or {}
    if not cond.status:
        return False
    if prev.get("status") != "True" or prev.get("reason") != cond.reason:
        return True
    return on_message and prev.get("message") != condition_message(cond.message)
