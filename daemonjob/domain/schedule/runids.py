"""A run's name, the same in every process: a tick's time, or a run-now trigger with a hash."""

from __future__ import annotations

import hashlib
import re
from datetime import datetime, timezone

from daemonjob.domain.schedule.cron import aware

__all__ = ["tick_run_id", "trigger_run_id"]

_RUN_ID_FORMAT = "%Y%m%dt%H%M%Sz"
_TRIGGER_TEXT = re.compile(r"[^a-z0-9]+")
_TRIGGER_PREFIX_MAX = 40
_HASH_LENGTH = 10


def tick_run_id(tick: datetime) -> str:
    """`20261123t030000z`: the tick in UTC, a label value that sorts by time."""
    return aware(tick).astimezone(timezone.utc).strftime(_RUN_ID_FORMAT)


def trigger_run_id(previous_run: str | None, trigger: str) -> str:
    """`now-<readable trigger>-<hash>`: deterministic, so a restart mid-start finds the same run.

    The hash covers the previous run too, so reusing an old trigger value later is a new run.
    """
    readable = _TRIGGER_TEXT.sub("-", trigger.lower()).strip("-")[:_TRIGGER_PREFIX_MAX].strip("-")
    digest = hashlib.sha256(f"{previous_run or ''}\x00{trigger}".encode()).hexdigest()[:_HASH_LENGTH]
    return f"now-{readable}-{digest}" if readable else f"now-{digest}"
