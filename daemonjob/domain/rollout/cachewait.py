"""Reconciling while the controller waits for its cache to show its own writes: named, never silent."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from daemonjob.domain.rollout.condition import HELD_SHOWN, RECONCILING, Condition, plural, render

__all__ = ["WAITING_FOR_CACHE", "CacheWait", "cache_wait_condition", "with_cache_wait"]

WAITING_FOR_CACHE = "WaitingForCache"


@dataclass(frozen=True, slots=True)
class CacheWait:
    """Facts from the controller: its own writes the cache has not shown past their deadline,
    still unconfirmed after a check against the API server."""

    creates: Sequence[str]
    deletes: Sequence[str]
    seconds: float  # how long the oldest has been pending


def cache_wait_condition(wait: CacheWait) -> Condition:
    """Reconciling=True naming the Jobs the controller waits to see, so a wait is never silent."""
    parts = []
    for names, what in ((wait.creates, "created"), (wait.deletes, "deleted")):
        if names:
            more = f" (+{len(names) - HELD_SHOWN} more)" if len(names) > HELD_SHOWN else ""
            shown = ", ".join(names[:HELD_SHOWN]) + more
            parts.append(f"{plural(len(names), what + ' Job')}: {shown}")
    message = (
        f"waiting for the cache to show {' and '.join(parts)} (for {wait.seconds:.0f}s); "
        "nothing new is started for this DaemonJob until the watch delivers it, or it proves lost "
        "(the API server does not hold it, or the watch has shown later writes)"
    )
    return Condition(True, WAITING_FOR_CACHE, message)


def with_cache_wait(
    status: Mapping[str, Any], wait: CacheWait, previous: Mapping[str, Mapping[str, Any]], now: str, generation: Any
) -> dict[str, Any]:
    """`status` with its Reconciling condition saying what the controller waits for."""
    cond = render(previous, RECONCILING, cache_wait_condition(wait), now, generation)
    conditions = [cond if c.get("type") == RECONCILING else c for c in status.get("conditions") or ()]
    if not any(c.get("type") == RECONCILING for c in conditions):
        conditions.append(cond)
    return {**status, "conditions": conditions}
