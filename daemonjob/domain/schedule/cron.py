"""Cron schedules: a parsed `spec.schedule` in its `spec.timeZone`, and its ticks.

Pure: instants are passed in (aware datetimes). Semantics are schedule.py's (the CronJob's
where they apply, Debian cron's across daylight-saving changes).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone, tzinfo
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

__all__ = [
    "DEFAULT_TIME_ZONE",
    "INVALID_SCHEDULE",
    "INVALID_TIME_ZONE",
    "MISSED_COUNT_LIMIT",
    "DueTick",
    "InvalidSchedule",
    "Schedule",
    "aware",
    "due_tick",
    "parse_schedule",
    "quoted",
    "time_zone_of",
]

DEFAULT_TIME_ZONE = "UTC"

# Missed ticks are counted one by one up to this many (for the Event); past it the count
# says "more than", and the latest tick is found without walking every one of them.
MISSED_COUNT_LIMIT = 1000

INVALID_SCHEDULE = "InvalidSchedule"
INVALID_TIME_ZONE = "InvalidTimeZone"

_MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_ONE_SECOND = timedelta(seconds=1)


def quoted(value: Any) -> str:
    """A value as the API server quotes it in a field error."""
    text = str(value).replace("\\", "\\\\").replace('"', '\\"')
    return f'"{text}"'


class InvalidSchedule(ValueError):
    """A schedule or zone that cannot be used; `message` is fit for a Stalled condition."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


@dataclass(frozen=True, slots=True)
class Schedule:
    """A parsed cron expression in a zone; every instant in and out is aware, out in UTC."""

    expression: str  # as written in spec.schedule
    cron: str  # the 5-field form (macros expanded)
    zone_name: str
    zone: tzinfo = field(repr=False, compare=False)

    def next_after(self, instant: datetime) -> datetime | None:
        """The first tick strictly after `instant` (None if there is none within 50 years)."""
        start = aware(instant).astimezone(self.zone)
        try:
            it = CronSim(self.cron, start)
            # Guard for wall-clock arithmetic across a repeated hour: a tick is only ever
            # accepted if it lies after the instant on the real (UTC) time line.
            for _ in range(8):
                tick = next(it).astimezone(timezone.utc)
                if tick > instant:
                    return tick
        except StopIteration:
            return None
        return None

    def latest_at_or_before(self, instant: datetime) -> datetime | None:
        """The last tick at or before `instant`, confirmed by forward iteration (None if none)."""
        start = (aware(instant).replace(microsecond=0) + _ONE_SECOND).astimezone(self.zone)
        try:
            candidate = next(CronSim(self.cron, start, reverse=True)).astimezone(timezone.utc)
        except StopIteration:
            return None
        # Reverse iteration can disagree with forward iteration around a DST change (it may
        # land a day early, or on a time forward iteration never yields); forward iteration
        # is the definition, so walk forward from just before the candidate.
        latest = None
        tick = self.next_after(candidate - _ONE_SECOND)
        for _ in range(MISSED_COUNT_LIMIT):
            if tick is None or tick > instant:
                break
            latest = tick
            tick = self.next_after(tick)
        return latest


def aware(instant: datetime) -> datetime:
    if instant.tzinfo is None:
        raise ValueError("schedule times must be timezone-aware")
    return instant


def time_zone_of(name: Any) -> tuple[str, tzinfo]:
    if name is None or name == "":
        return DEFAULT_TIME_ZONE, timezone.utc
    if not isinstance(name, str):
        raise InvalidSchedule(INVALID_TIME_ZONE, f"spec.timeZone: Invalid value: {quoted(name)}: must be a string")
    if name == "UTC":
        return name, timezone.utc
    try:
        # Local (the machine's zone) is refused: the point of the field is not to depend on it.
        if name == "Local" or name.startswith(("/", ".")) or ".." in name:
            raise ValueError(name)
        return name, ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise InvalidSchedule(
            INVALID_TIME_ZONE,
            f"spec.timeZone: Invalid value: {quoted(name)}: unknown time zone (use an IANA name such as "
            '"Europe/Berlin" or "UTC")',
        ) from None


def parse_schedule(expression: Any, time_zone: Any = None) -> Schedule:
    """Validate `spec.schedule` (5 fields or a macro) and `spec.timeZone` (IANA, default UTC)."""
    zone_name, zone = time_zone_of(time_zone)
    if not isinstance(expression, str) or not expression.strip():
        raise InvalidSchedule(
            INVALID_SCHEDULE, f"spec.schedule: Invalid value: {quoted(expression)}: must be a cron expression"
        )
    text = " ".join(expression.split())
    if text.upper().startswith(("TZ=", "CRON_TZ=")):
        raise InvalidSchedule(
            INVALID_SCHEDULE,
            f"spec.schedule: Invalid value: {quoted(expression)}: TZ and CRON_TZ are not supported "
            "in spec.schedule, use spec.timeZone",
        )
    cron = _MACROS.get(text.lower(), text)
    if cron.startswith("@"):
        macros = ", ".join(sorted(_MACROS))
        raise InvalidSchedule(
            INVALID_SCHEDULE, f"spec.schedule: Invalid value: {quoted(expression)}: unknown macro (one of {macros})"
        )
    if len(cron.split()) != 5:
        raise InvalidSchedule(
            INVALID_SCHEDULE,
            f"spec.schedule: Invalid value: {quoted(expression)}: expected exactly 5 fields "
            f"(minute hour day-of-month month day-of-week), found {len(cron.split())}",
        )
    try:
        CronSim(cron, datetime(2000, 1, 1, tzinfo=timezone.utc))
    except CronSimError as e:
        raise InvalidSchedule(INVALID_SCHEDULE, f"spec.schedule: Invalid value: {quoted(expression)}: {e}") from None
    schedule = Schedule(expression=expression, cron=cron, zone_name=zone_name, zone=zone)
    return schedule


@dataclass(frozen=True, slots=True)
class DueTick:
    """The ticks in (base, now]: `tick` is the one to run now, if any."""

    tick: datetime | None  # the latest tick, when within the starting deadline
    latest: datetime | None  # the latest tick, run or not
    count: int  # ticks in (base, now], counted up to MISSED_COUNT_LIMIT
    more: bool  # there were more than `count`
    previous: datetime | None = None  # the tick before the latest, if after base

    @property
    def superseded(self) -> int:
        """Ticks older than the latest: missed, never run (only the latest may run)."""
        return self.count if self.more else max(0, self.count - 1)


def due_tick(schedule: Schedule, base: datetime, now: datetime, deadline_seconds: int | None) -> DueTick:
    """The CronJob's getMostRecentScheduleTime: the latest tick after `base` and not after `now`.

    Ticks are strictly after `base` (the last tick handled), so a clock that jumps back
    never yields a tick at or before it, and a tick is never run twice.
    """
    if now <= base:
        return DueTick(None, None, 0, False)
    latest: datetime | None = None
    previous: datetime | None = None
    count = 0
    tick = schedule.next_after(base)
    while tick is not None and tick <= now and count < MISSED_COUNT_LIMIT:
        previous, latest, count = latest, tick, count + 1
        tick = schedule.next_after(tick)
    more = False
    if tick is not None and tick <= now:  # the count limit was reached
        jump = schedule.latest_at_or_before(now)
        if jump is not None and (latest is None or jump > latest):
            before = schedule.latest_at_or_before(jump - _ONE_SECOND)
            previous, latest, more = (before if before and before > base else latest), jump, True
    if latest is None:
        return DueTick(None, None, 0, False)
    late = deadline_seconds is not None and latest + timedelta(seconds=deadline_seconds) < now
    return DueTick(None if late else latest, latest, count, more, previous)
