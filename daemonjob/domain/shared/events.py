"""The Events a decision (and the act layer) posts on a DaemonJob: their type and triple."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["NORMAL", "WARNING", "EventSpec"]

# Event types, as the Events API spells them
NORMAL = "Normal"
WARNING = "Warning"


@dataclass(frozen=True, slots=True)
class EventSpec:
    """An Event to post: its type (NORMAL or WARNING), reason and message."""

    type: str
    reason: str
    message: str
