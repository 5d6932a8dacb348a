"""API timestamps: RFC3339 at second precision, read and written as metav1.Time serialises."""

from __future__ import annotations

import functools
from datetime import datetime, timezone
from typing import Any

__all__ = ["TIME_FORMAT", "parse_time", "format_time"]

TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"


def parse_time(value: Any) -> datetime | None:
    """Parse an RFC3339 API timestamp to an aware UTC datetime; None if absent or malformed."""
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=timezone.utc)
    if not isinstance(value, str) or not value:
        return None
    return _parse_text(value)


@functools.lru_cache(maxsize=4096)
def _parse_text(value: str) -> datetime | None:
    """Cached: timestamps have second precision, so thousands of Jobs share each one."""
    text = value[:-1] + "+00:00" if value.endswith(("Z", "z")) else value
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)


def format_time(value: datetime) -> str:
    """RFC3339 in UTC at second precision, as metav1.Time serialises."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=timezone.utc)
    return value.astimezone(timezone.utc).strftime(TIME_FORMAT)
