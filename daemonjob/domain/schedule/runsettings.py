"""The schedule fields of the spec read once into `Runs`, with every problem of them.

spec.schedule, spec.timeZone, spec.concurrencyPolicy and spec.startingDeadlineSeconds.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from daemonjob.domain.schedule.cron import InvalidSchedule, Schedule, parse_schedule, quoted, time_zone_of

__all__ = [
    "FORBID",
    "REPLACE",
    "CONCURRENCY_POLICIES",
    "DEFAULT_CONCURRENCY_POLICY",
    "INVALID_SCHEDULE_SPEC",
    "Runs",
    "read_runs",
]

FORBID = "Forbid"
REPLACE = "Replace"
CONCURRENCY_POLICIES = (FORBID, REPLACE)
DEFAULT_CONCURRENCY_POLICY = FORBID

INVALID_SCHEDULE_SPEC = "InvalidSpec"

_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class Runs:
    """spec.schedule, spec.timeZone, spec.concurrencyPolicy and spec.startingDeadlineSeconds, read
    once (`read_runs`): `problem` is the first thing wrong with them, as the schedule step stops at it."""

    expression: Any = None  # spec.schedule as written (None: no schedule)
    time_zone: Any = None  # spec.timeZone as written
    schedule: Schedule | None = None  # the two parsed, None when unset or invalid
    policy: str = DEFAULT_CONCURRENCY_POLICY
    deadline: int | None = None  # startingDeadlineSeconds
    problem: InvalidSchedule | None = None
    suspended: bool = False  # spec.suspend is true: a tick is consumed, no run starts

    @property
    def scheduled(self) -> bool:
        return self.expression is not None

    @property
    def replaces(self) -> bool:
        """Replace: an active Job of another run than status.currentRun is deleted (its node then
        starts the current run). Forbid: no new run starts while one is active, so none exists
        unless the policy changed mid-run; such a Job is left to finish and its node waits."""
        return self.policy == REPLACE


def _deadline(value: Any) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    if value is None:
        return None
    raise InvalidSchedule(
        INVALID_SCHEDULE_SPEC,
        f"spec.startingDeadlineSeconds: Invalid value: {quoted(value)}: must be an integer >= 0",
    )


def _policy(value: Any) -> str:
    if value is None:
        return DEFAULT_CONCURRENCY_POLICY
    if value in CONCURRENCY_POLICIES:
        return str(value)
    supported = ", ".join(quoted(p) for p in CONCURRENCY_POLICIES)
    raise InvalidSchedule(
        INVALID_SCHEDULE_SPEC,
        f"spec.concurrencyPolicy: Unsupported value: {quoted(value)}: supported values: {supported}",
    )


def _checked(check: Callable[[], _T], problems: list[InvalidSchedule]) -> _T | None:
    try:
        return check()
    except InvalidSchedule as e:
        problems.append(e)
        return None


def read_runs(
    expression: Any, time_zone: Any, policy: Any, deadline: Any, suspend: Any
) -> tuple[Runs, list[InvalidSchedule]]:
    """The schedule fields' values (as written) read, and every problem of them at once."""
    problems: list[InvalidSchedule] = []
    read_policy = _checked(lambda: _policy(policy), problems)
    read_deadline = _checked(lambda: _deadline(deadline), problems)
    ahead = list(problems)
    _checked(lambda: time_zone_of(time_zone), problems)
    if expression is not None:
        _checked(lambda: parse_schedule(expression), problems)
    # The step stops at the first problem: the policy, the deadline, then the schedule in its
    # zone (the zone's problem first), or the zone alone without a schedule.
    timed = problems[len(ahead) :]
    schedule = None
    if expression is not None:
        timed = []
        schedule = _checked(lambda: parse_schedule(expression, time_zone), timed)
    first = [*ahead, *timed]
    runs = Runs(
        expression,
        time_zone,
        schedule,
        read_policy or DEFAULT_CONCURRENCY_POLICY,
        read_deadline,
        first[0] if first else None,
        suspend is True,
    )
    return runs, problems
