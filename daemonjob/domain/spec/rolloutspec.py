"""spec.rollout as the decision reads it: the gates that hold new nodes back, and its parse.

The rule book (validate.py) reads the section with `read_rollout`; an invalid gate adds a
problem (so nothing starts: Stalled) and reads as unset. The gates (gates.py, alertgate.py)
read the `Rollout` value, never the raw spec.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from daemonjob import defaults
from daemonjob.domain.schedule.cron import InvalidSchedule, Schedule, parse_schedule
from daemonjob.domain.spec.problems import INVALID_SPEC, Problem, is_int, show, too_many

__all__ = ["AlertMatcher", "Window", "Rollout", "read_rollout", "parse_duration", "read_duration", "PERCENT_RE"]

PERCENT_RE = re.compile(r"^([0-9]+)%$")
_DURATION_RE = re.compile(r"^(?:[0-9]+(?:h|m|s))+$")
_DURATION_PART_RE = re.compile(r"([0-9]+)(h|m|s)")
_DURATION_UNITS = {"h": 3600, "m": 60, "s": 1}
_LABEL_NAME_RE = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")  # Prometheus' label names


@dataclass(frozen=True, slots=True)
class Window:
    """spec.rollout.window: new node Jobs start only from a tick of `schedule` for `duration`."""

    schedule: Schedule
    duration: timedelta


AlertMatcher = tuple[tuple[str, str], ...]  # (label, value) pairs, sorted: every one must be equal


@dataclass(frozen=True, slots=True)
class Rollout:
    """The gates of spec.rollout, each None when unset (it lets everything through)."""

    pause: timedelta | None = None  # pauseBetweenNodes
    window: Window | None = None
    canary: int | str | None = None  # a count of nodes, or a percentage of the desired nodes
    halt_on_alerts: tuple[AlertMatcher, ...] = ()  # haltOnAlerts: any firing alert one of them matches halts


def parse_duration(value: Any) -> timedelta | None:
    """A duration as Kubernetes objects write one, in hours, minutes and seconds ("1h30m", "90s");
    None if `value` is not one."""
    if not isinstance(value, str) or not _DURATION_RE.match(value):
        return None
    return timedelta(seconds=sum(int(n) * _DURATION_UNITS[u] for n, u in _DURATION_PART_RE.findall(value)))


def read_duration(
    section: Mapping[str, Any], key: str, path: str, problems: list[Problem], positive: bool = False
) -> timedelta | None:
    value = section.get(key)
    if value is None:
        return None
    parsed = parse_duration(value)
    if parsed is None or (positive and not parsed):
        least = "longer than 0s, " if positive else ""
        problems.append(
            Problem(
                INVALID_SPEC,
                f"{path}.{key}: Invalid value: {show(value)}: must be a duration "
                f'{least}in hours, minutes and seconds such as "5m" or "1h30m"',
            )
        )
        return None
    return parsed


def read_rollout(raw: Any, problems: list[Problem]) -> Rollout:
    """spec.rollout's gates; an invalid gate adds a problem (so nothing starts: Stalled)."""
    if raw is None:
        return Rollout()
    if not isinstance(raw, Mapping):
        problems.append(Problem(INVALID_SPEC, f"spec.rollout: Invalid value: {show(raw)}: must be an object"))
        return Rollout()
    pause = read_duration(raw, "pauseBetweenNodes", "spec.rollout", problems)
    return Rollout(
        pause=pause or None,
        window=_window(raw, problems),
        canary=_canary(raw, problems),
        halt_on_alerts=_halt_on_alerts(raw, problems),
    )


def _window(rollout: Mapping[str, Any], problems: list[Problem]) -> Window | None:
    raw = rollout.get("window")
    path = "spec.rollout.window"
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        problems.append(Problem(INVALID_SPEC, f"{path}: Invalid value: {show(raw)}: must be an object"))
        return None
    duration = read_duration(raw, "duration", path, problems, positive=True)
    if raw.get("duration") is None:
        problems.append(Problem(INVALID_SPEC, f"{path}.duration: Required value"))
    try:
        schedule = parse_schedule(raw.get("schedule"), raw.get("timeZone"))
    except InvalidSchedule as e:
        # the schedule's own checks name spec.schedule and spec.timeZone: the window's fields here
        message = e.message.replace("spec.schedule", f"{path}.schedule").replace("spec.timeZone", f"{path}.timeZone")
        problems.append(Problem(e.reason, message))
        return None
    return Window(schedule, duration) if duration is not None else None


def _canary(rollout: Mapping[str, Any], problems: list[Problem]) -> int | str | None:
    value = rollout.get("canary")
    if value is None or (is_int(value) and value >= 1):
        return value
    match = PERCENT_RE.match(value) if isinstance(value, str) else None
    if match and 1 <= int(match.group(1)) <= 100:
        return value
    problems.append(
        Problem(
            INVALID_SPEC,
            f"spec.rollout.canary: Invalid value: {show(value)}: must be an integer "
            'of at least 1 or a percentage from "1%" to "100%"',
        )
    )
    return None


def _halt_on_alerts(rollout: Mapping[str, Any], problems: list[Problem]) -> tuple[AlertMatcher, ...]:
    """spec.rollout.haltOnAlerts: a list of equality matchers over alert labels. A matcher with
    no label would match every alert, so it is refused rather than read as "halt always"."""
    raw = rollout.get("haltOnAlerts")
    path = "spec.rollout.haltOnAlerts"
    if raw is None:
        return ()
    if not isinstance(raw, list):
        problems.append(Problem(INVALID_SPEC, f"{path}: Invalid value: {show(raw)}: must be a list of label matchers"))
        return ()
    if too_many(raw, defaults.HALT_ON_ALERTS_MAX, path, problems):
        return ()
    matchers: list[AlertMatcher] = []
    for i, item in enumerate(raw):
        at = f"{path}[{i}]"
        if not isinstance(item, Mapping) or not item:
            problems.append(
                Problem(
                    INVALID_SPEC,
                    f"{at}: Invalid value: {show(item)}: must map at least one "
                    "alert label to its value, such as {alertname: NodeNotReady}",
                )
            )
            continue
        if len(item) > defaults.HALT_ON_ALERTS_MAX:
            problems.append(
                Problem(
                    INVALID_SPEC, f"{at}: Too many: {len(item)}: must have at most {defaults.HALT_ON_ALERTS_MAX} labels"
                )
            )
            continue
        bad = False
        for label, value in item.items():
            if not isinstance(label, str) or not _LABEL_NAME_RE.match(label):
                problems.append(
                    Problem(
                        INVALID_SPEC,
                        f"{at}: Invalid value: {show(label)}: an alert label name must match [a-zA-Z_][a-zA-Z0-9_]*",
                    )
                )
                bad = True
            elif not isinstance(value, str):
                problems.append(Problem(INVALID_SPEC, f"{at}.{label}: Invalid value: {show(value)}: must be a string"))
                bad = True
        if not bad:
            matchers.append(tuple(sorted(item.items())))
    return tuple(matchers)
