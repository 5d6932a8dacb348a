"""What a pass raises when some of its writes failed."""

from __future__ import annotations

from daemonjob.controller.runtime.events import error_message

__all__ = ["ReconcileError"]


class ReconcileError(Exception):
    """Some actions of a pass failed; the rest were carried out and the status written."""

    def __init__(self, errors: list[Exception]):
        self.errors = errors
        shown = "; ".join(error_message(e) for e in errors[:3])
        super().__init__(f"{len(errors)} action(s) failed: {shown}")
