"""Durations the way kubectl prints and reads them."""

from __future__ import annotations

import re
from datetime import datetime

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def human_duration(seconds: float) -> str:
    """k8s.io/apimachinery `duration.HumanDuration`: the AGE and DURATION of `kubectl get`."""
    if seconds < -1:
        return "<invalid>"
    if seconds < 0:
        return "0s"
    s = int(seconds)
    if s < 60 * 2:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        rest = s % 60
        return f"{minutes}m" if rest == 0 else f"{minutes}m{rest}s"
    if minutes < 60 * 3:
        return f"{minutes}m"
    hours = minutes // 60
    if hours < 8:
        rest = minutes % 60
        return f"{hours}h" if rest == 0 else f"{hours}h{rest}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        rest = hours % 24
        return f"{hours // 24}d" if rest == 0 else f"{hours // 24}d{rest}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        days = (hours // 24) % 365
        return f"{hours // 24 // 365}y" if days == 0 else f"{hours // 24 // 365}y{days}d"
    return f"{hours // 24 // 365}y"


def between(start: datetime | None, end: datetime | None) -> str:
    """human_duration from start to end; empty when either is unknown."""
    if start is None or end is None:
        return ""
    return human_duration((end - start).total_seconds())


def parse_duration(text: str) -> float:
    """Seconds in a Go-style duration ("90s", "5m", "1h30m", "2d"; a bare number is seconds).

    Raises ValueError with the text, for a one-line error.
    """
    text = text.strip()
    try:
        value = float(text)
    except ValueError:
        pass
    else:
        if value < 0:
            raise ValueError(f"invalid duration {text!r}: must not be negative")
        return value
    pos, total = 0, 0.0
    for match in _DURATION.finditer(text):
        if match.start() != pos:
            break
        total += float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        pos = match.end()
    if pos != len(text) or not text:
        raise ValueError(f"invalid duration {text!r}: use e.g. 30s, 5m, 1h30m")
    return total
