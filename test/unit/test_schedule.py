"""Schedule math and the schedule step, with injected times (no clock, no cluster)."""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from daemonjob.domain.jobs.contract import job_run
from daemonjob.domain.schedule import cron
from daemonjob.domain.schedule import runs as sch
from daemonjob.domain.schedule.cron import InvalidSchedule, due_tick, parse_schedule
from daemonjob.domain.schedule.runids import tick_run_id, trigger_run_id
from daemonjob.domain.schedule.runs import ANNOTATION_RUN_NOW, SKIP_DEADLINE, SKIP_FORBID, SKIP_MISSED, SKIP_SUSPENDED
from daemonjob.domain.shared.apinames import LABEL_RUN
from daemonjob.domain.spec.validate import read_spec
from daemonjob.testing.doubles.builders import daemonjob

UTC = timezone.utc
NONE: frozenset[str | None] = frozenset()
PREVIOUS: frozenset[str | None] = frozenset({"20260101t000000z"})  # a slow earlier run
LABEL_VALUE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def at(text: str) -> datetime:
    """An instant written in UTC: `2026-03-29 01:00`."""
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def ticks(expression: str, zone: str | None, after: datetime, n: int) -> list[datetime]:
    s = parse_schedule(expression, zone)
    out: list[datetime] = []
    t: datetime | None = after
    for _ in range(n):
        assert t is not None
        t = s.next_after(t)
        assert t is not None
        out.append(t)
    return out


def dj(
    status: dict[str, Any] | None = None, created: str = "2026-01-01 00:00", run_now: str | None = None, **spec: Any
) -> dict[str, Any]:
    """Created at `created` (in `at`'s notation), run-now annotated with `run_now` if given."""
    return daemonjob(
        "nightly",
        created=at(created).strftime("%Y-%m-%dT%H:%M:%SZ"),
        annotations=None if run_now is None else {ANNOTATION_RUN_NOW: run_now},
        status=dict(status or {}),
        **spec,
    )


def schedule_step(obj: dict[str, Any], now: datetime, active_runs: Any) -> sch.ScheduleStep:
    """The schedule's step of `obj`, its spec read by the rule book as decide reads it."""
    return sch.schedule_step(obj, read_spec(obj).runs, now, active_runs)


def applied(obj: dict[str, Any], step: sch.ScheduleStep) -> dict[str, Any]:
    """The DaemonJob after the controller merged the step's status (None removes a field)."""
    status = dict(obj["status"])
    status["observedGeneration"] = 1
    for key, value in step.status.items():
        if value is None:
            status.pop(key, None)
        else:
            status[key] = value
    return {**obj, "status": status}


# ---------------------------------------------------------------- parsing


@pytest.mark.parametrize(
    "expression",
    [
        "0 3 * * *",
        "*/15 * * * *",
        "0 0 1-7 * MON",
        "30 2 * JAN-MAR,DEC sun",
        "0 0-23/2 * * 1-5",
        "@hourly",
        "@daily",
        "@weekly",
        "@monthly",
        "@yearly",
        "@annually",
        "@midnight",
        "  0   3 * * *  ",
    ],
)
def test_valid_schedules_parse(expression: str) -> None:
    s = parse_schedule(expression)
    assert s.zone_name == "UTC"
    assert s.next_after(at("2026-01-01 00:00")) is not None


@pytest.mark.parametrize(
    ("expression", "detail"),
    [
        ("61 * * * *", "Bad minute"),
        ("0 24 * * *", "Bad hour"),
        ("0 0 32 * *", "Bad day-of-month"),
        ("0 0 30 2 *", "Bad day-of-month"),
        ("0 0 * 13 *", "Bad month"),
        ("0 0 * * FUNDAY", "Bad day-of-week"),
        ("* * *", "expected exactly 5 fields"),
        ("0 * * * * *", "expected exactly 5 fields"),
        ("@every 5m", "unknown macro"),
        ("@fortnightly", "unknown macro"),
        ("TZ=Europe/Berlin 0 3 * * *", "use spec.timeZone"),
        ("", "must be a cron expression"),
    ],
)
def test_invalid_schedules_say_why(expression: str, detail: str) -> None:
    with pytest.raises(InvalidSchedule) as info:
        parse_schedule(expression)
    assert info.value.reason == "InvalidSchedule"
    assert info.value.message.startswith(f'spec.schedule: Invalid value: "{expression}": ')
    assert detail in info.value.message


@pytest.mark.parametrize("zone", ["Mars/Olympus_Mons", "Local", "../etc/passwd", "/etc/localtime", "europe/berlin"])
def test_invalid_time_zones_say_why(zone: str) -> None:
    with pytest.raises(InvalidSchedule) as info:
        parse_schedule("0 3 * * *", zone)
    assert info.value.reason == "InvalidTimeZone"
    assert info.value.message.startswith(f'spec.timeZone: Invalid value: "{zone}": unknown time zone')


def test_time_zone_defaults_to_utc_and_is_used() -> None:
    assert ticks("0 3 * * *", None, at("2026-06-01 00:00"), 1) == [at("2026-06-01 03:00")]
    assert ticks("0 3 * * *", "UTC", at("2026-06-01 00:00"), 1) == [at("2026-06-01 03:00")]
    # 03:00 in Berlin in summer (UTC+2) and in Tokyo (UTC+9, no DST).
    assert ticks("0 3 * * *", "Europe/Berlin", at("2026-06-01 00:00"), 1) == [at("2026-06-01 01:00")]
    assert ticks("0 3 * * *", "Asia/Tokyo", at("2026-06-01 00:00"), 1) == [at("2026-06-01 18:00")]


# ---------------------------------------------------------------- DST and calendars


def test_spring_forward_gap_fires_when_the_clock_jumps() -> None:
    # Europe/Berlin 2026-03-29: 02:00 CET -> 03:00 CEST; 02:30 does not exist that night.
    assert ticks("30 2 * * *", "Europe/Berlin", at("2026-03-28 12:00"), 3) == [
        at("2026-03-29 01:00"),  # 03:00 CEST, the moment the clock jumps
        at("2026-03-30 00:30"),  # 02:30 CEST
        at("2026-03-31 00:30"),
    ]


def test_spring_forward_keeps_elapsed_time_for_frequent_ticks() -> None:
    got = ticks("*/30 * * * *", "Europe/Berlin", at("2026-03-29 00:00"), 4)
    assert got == [at("2026-03-29 00:30"), at("2026-03-29 01:00"), at("2026-03-29 01:30"), at("2026-03-29 02:00")]


def test_fall_back_repeat_fires_a_fixed_time_tick_once() -> None:
    # Europe/Berlin 2026-10-25: 03:00 CEST -> 02:00 CET; 02:30 happens twice.
    assert ticks("30 2 * * *", "Europe/Berlin", at("2026-10-24 12:00"), 2) == [
        at("2026-10-25 00:30"),  # 02:30 CEST, the first 02:30
        at("2026-10-26 01:30"),  # the next day; not 02:30 CET on the 25th
    ]
    s = parse_schedule("30 2 * * *", "Europe/Berlin")
    # Reconciled during the second 02:30 after running the first: nothing is due.
    due = due_tick(s, at("2026-10-25 00:30"), at("2026-10-25 01:45"), None)
    assert (due.tick, due.count) == (None, 0)


def test_fall_back_hourly_ticks_follow_elapsed_time() -> None:
    got = ticks("0 * * * *", "Europe/Berlin", at("2026-10-24 23:30"), 4)
    # 02:00 CEST, 02:00 CET, 03:00 CET: an hour apart each, never a step back.
    assert got == [at("2026-10-25 00:00"), at("2026-10-25 01:00"), at("2026-10-25 02:00"), at("2026-10-25 03:00")]
    s = parse_schedule("*/15 * * * *", "Europe/Berlin")
    # From inside the repeated hour (02:15 CET) the next tick is 02:30 CET, not 02:30 CEST.
    assert s.next_after(at("2026-10-25 01:15")) == at("2026-10-25 01:30")


def test_month_ends() -> None:
    got = ticks("0 0 31 * *", None, at("2026-01-01 00:00"), 5)
    assert [t.strftime("%m-%d") for t in got] == ["01-31", "03-31", "05-31", "07-31", "08-31"]
    leap = ticks("0 0 29 2 *", None, at("2026-01-01 00:00"), 1)
    assert leap == [at("2028-02-29 00:00")]


# ---------------------------------------------------------------- missed ticks


def test_only_the_latest_missed_tick_runs_and_the_rest_are_counted() -> None:
    s = parse_schedule("0 * * * *")
    due = due_tick(s, at("2026-01-01 00:00"), at("2026-01-01 05:30"), None)
    assert (due.tick, due.latest, due.count, due.superseded, due.previous) == (
        at("2026-01-01 05:00"),
        at("2026-01-01 05:00"),
        5,
        4,
        at("2026-01-01 04:00"),
    )


def test_no_tick_yet_and_exact_tick() -> None:
    s = parse_schedule("0 * * * *")
    assert due_tick(s, at("2026-01-01 00:00"), at("2026-01-01 00:59"), None).tick is None
    assert due_tick(s, at("2026-01-01 00:00"), at("2026-01-01 01:00"), None).tick == at("2026-01-01 01:00")


def test_starting_deadline() -> None:
    s = parse_schedule("0 * * * *")
    base, now = at("2026-01-01 00:00"), at("2026-01-01 05:30")
    late = due_tick(s, base, now, 600)
    assert (late.tick, late.latest) == (None, at("2026-01-01 05:00"))
    assert due_tick(s, base, now, 1800).tick == at("2026-01-01 05:00")  # exactly at the deadline: runs
    assert due_tick(s, base, now, 1799).tick is None
    assert due_tick(s, base, now, 0).tick is None
    assert due_tick(s, base, at("2026-01-01 05:00"), 0).tick == at("2026-01-01 05:00")


def test_a_long_downtime_is_not_walked_tick_by_tick() -> None:
    s = parse_schedule("* * * * *")
    due = due_tick(s, at("2026-01-01 00:00"), at("2026-01-05 12:34:56"), None)
    assert due.tick == at("2026-01-05 12:34")
    assert due.more and due.count == cron.MISSED_COUNT_LIMIT
    assert due.previous == at("2026-01-05 12:33")


def test_a_clock_jumping_back_never_yields_a_tick_at_or_before_the_last() -> None:
    s = parse_schedule("0 * * * *")
    last = at("2026-01-01 05:00")
    for now in (at("2026-01-01 05:00"), at("2026-01-01 04:10"), at("2025-12-31 23:00")):
        assert due_tick(s, last, now, None) == cron.DueTick(None, None, 0, False)


# ---------------------------------------------------------------- run identity


def test_run_ids_are_compact_label_values() -> None:
    assert tick_run_id(at("2026-11-23 03:00")) == "20261123t030000z"
    berlin = datetime(2026, 11, 23, 4, 0, tzinfo=parse_schedule("0 0 * * *", "Europe/Berlin").zone)
    assert tick_run_id(berlin) == "20261123t030000z"  # always UTC
    for trigger in ("1", "2026-11-23T10:15:00Z", "Re-run please!", "x" * 300, "🚀", "--"):
        run = trigger_run_id("20261123t030000z", trigger)
        assert LABEL_VALUE.match(run) and len(run) <= 63, run
        assert run == trigger_run_id("20261123t030000z", trigger)  # deterministic
    assert trigger_run_id(None, "2026-11-23T10:15:00Z").startswith("now-2026-11-23t10-15-00z-")
    assert trigger_run_id("a", "1") != trigger_run_id("b", "1")


# ---------------------------------------------------------------- the step


def test_a_new_daemonjob_runs_a_tick_it_missed_before_its_first_reconcile() -> None:
    obj = dj(schedule="0 1 * * *", created="2026-01-01 00:00")
    step = schedule_step(obj, at("2026-01-01 01:30"), active_runs=NONE)
    assert step.start == sch.RunStart("20260101t010000z", at("2026-01-01 01:00"), None, False)
    assert step.current_run == "20260101t010000z"
    assert step.status == {
        "lastScheduleTime": "2026-01-01T01:00:00Z",
        "nextScheduleTime": "2026-01-02T01:00:00Z",
        "observedSchedule": "0 1 * * * (UTC)",
        "currentRun": "20260101t010000z",
    }
    assert step.requeue_at == at("2026-01-02 01:00")
    assert step.requeue_after(at("2026-01-01 01:30")) == 23.5 * 3600
    assert [e.reason for e in step.events] == ["RunStarted"]


def test_a_restart_before_the_status_write_computes_the_same_run() -> None:
    obj = dj(schedule="0 1 * * *")
    first = schedule_step(obj, at("2026-01-01 01:00:05"), active_runs=NONE)
    # Restarted after creating some of the run's Jobs: they do not block their own run.
    again = schedule_step(obj, at("2026-01-01 01:03:00"), active_runs={"20260101t010000z"})
    assert first.start is not None and again.start is not None
    assert first.start.run == again.start.run
    # Once written, the tick is handled: nothing starts again, whatever is active.
    done = applied(obj, first)
    for active in (NONE, {"20260101t010000z"}):
        later = schedule_step(done, at("2026-01-01 01:10"), active_runs=active)
        assert later.start is None and later.skipped == () and later.current_run == "20260101t010000z"


def test_step_without_schedule_is_quiet() -> None:
    step = schedule_step(dj(), at("2026-01-01 01:30"), active_runs=NONE)
    assert step == sch.ScheduleStep()


def test_after_downtime_only_the_latest_tick_runs_and_the_skipped_are_reported() -> None:
    obj = dj(
        schedule="0 * * * *", status={"lastScheduleTime": "2026-01-01T00:00:00Z", "observedSchedule": "0 * * * * (UTC)"}
    )
    step = schedule_step(obj, at("2026-01-01 05:30"), active_runs=NONE)
    assert step.start is not None and step.start.scheduled_time == at("2026-01-01 05:00")
    assert step.skipped == (sch.SkippedTicks(SKIP_MISSED, 4, at("2026-01-01 04:00")),)
    assert "skipped 4 ticks up to 2026-01-01T04:00:00Z" in step.events[0].message
    assert step.status["lastScheduleTime"] == "2026-01-01T05:00:00Z"


def test_a_tick_past_the_starting_deadline_is_skipped() -> None:
    obj = dj(
        schedule="0 * * * *",
        startingDeadlineSeconds=600,
        status={"lastScheduleTime": "2026-01-01T00:00:00Z", "observedSchedule": "0 * * * * (UTC)"},
    )
    step = schedule_step(obj, at("2026-01-01 05:30"), active_runs=NONE)
    assert step.start is None
    assert [s.reason for s in step.skipped] == [SKIP_MISSED, SKIP_DEADLINE]
    assert step.status["lastSkippedTime"] == "2026-01-01T05:00:00Z"
    assert step.status["lastSkipReason"] == SKIP_DEADLINE
    assert "lastScheduleTime" not in step.status
    # Skipped is handled: the next reconcile before 06:00 does nothing.
    assert schedule_step(applied(obj, step), at("2026-01-01 05:31"), active_runs=NONE).start is None
    assert schedule_step(applied(obj, step), at("2026-01-01 06:00:30"), active_runs=NONE).start is not None


def test_forbid_skips_the_tick_while_a_run_is_active_and_never_starts_it_late() -> None:
    obj = dj(
        schedule="0 * * * *",
        status={
            "lastScheduleTime": "2026-01-01T00:00:00Z",
            "currentRun": "20260101t000000z",
            "observedSchedule": "0 * * * * (UTC)",
        },
    )
    step = schedule_step(obj, at("2026-01-01 01:00:02"), active_runs=PREVIOUS)
    assert step.start is None and step.current_run == "20260101t000000z"
    assert step.skipped == (sch.SkippedTicks(SKIP_FORBID, 1, at("2026-01-01 01:00")),)
    assert step.events[0].type == "Warning" and step.events[0].reason == SKIP_FORBID
    assert step.status["lastSkipReason"] == SKIP_FORBID
    assert step.requeue_at == at("2026-01-01 02:00")
    # The slow run finishes at 01:20: the skipped tick stays skipped.
    after = schedule_step(applied(obj, step), at("2026-01-01 01:20"), active_runs=NONE)
    assert after.start is None and after.skipped == ()
    # The next tick runs.
    nxt = schedule_step(applied(obj, step), at("2026-01-01 02:00"), active_runs=NONE)
    assert nxt.start is not None and nxt.start.run == "20260101t020000z" and not nxt.start.replace


def test_forbid_is_the_default_and_replace_replaces() -> None:
    status = {"lastScheduleTime": "2026-01-01T00:00:00Z", "observedSchedule": "0 * * * * (UTC)"}
    step = schedule_step(
        dj(schedule="0 * * * *", concurrencyPolicy="Replace", status=status),
        at("2026-01-01 01:00"),
        active_runs=PREVIOUS,
    )
    assert step.start is not None and step.start.replace
    assert "replaced" in step.events[-1].message
    quiet = schedule_step(
        dj(schedule="0 * * * *", concurrencyPolicy="Replace", status=status), at("2026-01-01 01:00"), active_runs=NONE
    )
    assert quiet.start is not None and not quiet.start.replace
    assert read_spec(dj(concurrencyPolicy="Replace")).runs.replaces
    assert not read_spec(dj(concurrencyPolicy="Forbid")).runs.replaces and not read_spec(dj()).runs.replaces


def test_suspend_consumes_ticks_and_unsuspend_waits_for_the_next() -> None:
    status = {"lastScheduleTime": "2026-01-01T00:00:00Z", "observedSchedule": "0 * * * * (UTC)"}
    obj = dj(schedule="0 * * * *", suspend=True, status=status)
    step = schedule_step(obj, at("2026-01-01 01:00"), active_runs=NONE)
    assert step.start is None
    assert step.skipped == (sch.SkippedTicks(SKIP_SUSPENDED, 1, at("2026-01-01 01:00")),)
    assert step.events[0].type == "Normal"
    assert step.status["nextScheduleTime"] is None  # nothing will run while suspended...
    assert step.requeue_at == at("2026-01-01 02:00")  # ...but the next tick is consumed on time
    resumed = applied(obj, step)
    resumed["spec"] = {**resumed["spec"], "suspend": False}
    later = schedule_step(resumed, at("2026-01-01 01:40"), active_runs=NONE)
    assert later.start is None and later.status["nextScheduleTime"] == "2026-01-01T02:00:00Z"


def test_a_schedule_added_or_edited_later_starts_at_its_next_tick() -> None:
    # An unscheduled DaemonJob reconciled before gets a schedule at 12:00: 03:00 is not run.
    obj = dj(schedule="0 3 * * *", status={"observedGeneration": 4, "currentRevision": "abc"})
    step = schedule_step(obj, at("2026-01-10 12:00"), active_runs=NONE)
    assert step.start is None and step.skipped == ()
    assert step.status["nextScheduleTime"] == "2026-01-11T03:00:00Z"
    # Edited from 03:00 to 04:00 at noon: today's 04:00 does not run now.
    ran = {"lastScheduleTime": "2026-01-10T03:00:00Z", "observedSchedule": "0 3 * * * (UTC)", "observedGeneration": 5}
    edited = schedule_step(dj(schedule="0 4 * * *", status=ran), at("2026-01-10 12:00"), active_runs=NONE)
    assert edited.start is None and edited.status["nextScheduleTime"] == "2026-01-11T04:00:00Z"
    assert edited.status["observedSchedule"] == "0 4 * * * (UTC)"
    # A zone edit is an edit too.
    moved = schedule_step(
        dj(schedule="0 3 * * *", timeZone="Asia/Tokyo", status=ran), at("2026-01-10 12:00"), active_runs=NONE
    )
    assert moved.start is None and moved.status["nextScheduleTime"] == "2026-01-10T18:00:00Z"


def test_a_schedule_removed_and_added_again_waits_for_its_next_tick() -> None:
    every_minute = dj(schedule="* * * * *")
    ran = applied(every_minute, schedule_step(every_minute, at("2026-01-10 12:00:01"), active_runs=NONE))
    assert ran["status"]["lastScheduleTime"] == "2026-01-10T12:00:00Z"
    removed = {**ran, "spec": {k: v for k, v in ran["spec"].items() if k != "schedule"}}
    forgot = applied(removed, schedule_step(removed, at("2026-01-10 12:00:30"), active_runs=NONE))
    for field in ("observedSchedule", "lastScheduleTime", "nextScheduleTime"):
        assert field not in forgot["status"], field
    assert forgot["status"]["currentRun"] == ran["status"]["currentRun"]  # the run's record stays
    # re-added 5 s into a later minute: the tick of 12:02 passed while it was gone and does not run
    again = {**forgot, "spec": {**forgot["spec"], "schedule": "* * * * *"}}
    step = schedule_step(again, at("2026-01-10 12:02:05"), active_runs=NONE)
    assert step.start is None and step.skipped == ()
    assert step.status["nextScheduleTime"] == "2026-01-10T12:03:00Z"
    assert schedule_step(applied(again, step), at("2026-01-10 12:03:01"), active_runs=NONE).start is not None


def test_a_backwards_clock_does_not_start_a_run_twice() -> None:
    status = {
        "lastScheduleTime": "2026-01-01T05:00:00Z",
        "currentRun": "20260101t050000z",
        "observedSchedule": "0 * * * * (UTC)",
    }
    obj = dj(schedule="0 * * * *", status=status)
    for now in (at("2026-01-01 05:00"), at("2026-01-01 04:59"), at("2026-01-01 03:00")):
        step = schedule_step(obj, now, active_runs=NONE)
        assert step.start is None and step.skipped == ()
        assert step.requeue_at == at("2026-01-01 06:00")


def test_dst_gap_in_the_step() -> None:
    status = {"lastScheduleTime": "2026-03-28T01:30:00Z", "observedSchedule": "30 2 * * * (Europe/Berlin)"}
    obj = dj(schedule="30 2 * * *", timeZone="Europe/Berlin", status=status)
    assert schedule_step(obj, at("2026-03-29 00:59"), active_runs=NONE).start is None
    step = schedule_step(obj, at("2026-03-29 01:00:01"), active_runs=NONE)
    assert step.start is not None and step.start.run == "20260329t010000z"


def test_run_now_starts_one_run() -> None:
    obj = dj(run_now="1")
    step = schedule_step(obj, at("2026-01-01 10:00"), active_runs=NONE)
    assert step.start is not None and step.start.trigger == "1" and step.start.scheduled_time is None
    assert step.status == {"lastRunNowTrigger": "1", "currentRun": step.start.run}
    assert step.requeue_at is None  # no schedule: nothing to wake up for
    done = applied(obj, step)
    assert schedule_step(done, at("2026-01-01 10:05"), active_runs=NONE).start is None
    # A new value is a new run; reusing an old value later is also a new run.
    second = schedule_step(
        {**done, "metadata": {**done["metadata"], "annotations": {ANNOTATION_RUN_NOW: "2"}}},
        at("2026-01-01 11:00"),
        active_runs=NONE,
    )
    assert second.start is not None and second.start.run != step.start.run
    done2 = applied(done, second)
    third = schedule_step(
        {**done2, "metadata": {**done2["metadata"], "annotations": {ANNOTATION_RUN_NOW: "1"}}},
        at("2026-01-01 12:00"),
        active_runs=NONE,
    )
    assert third.start is not None and third.start.run not in (step.start.run, second.start.run)


def test_run_now_waits_under_forbid_and_while_suspended_and_replaces_under_replace() -> None:
    waiting = schedule_step(dj(run_now="go"), at("2026-01-01 10:00"), active_runs=PREVIOUS)
    assert waiting.start is None and "waits" in (waiting.waiting or "")
    assert "lastRunNowTrigger" not in waiting.status  # not consumed: it starts once the run is done
    assert [e.reason for e in waiting.events] == ["RunNowWaiting"]
    assert schedule_step(dj(run_now="go"), at("2026-01-01 10:20"), active_runs=NONE).start is not None
    suspended = schedule_step(dj(run_now="go", suspend=True), at("2026-01-01 10:00"), active_runs=NONE)
    assert suspended.start is None and "suspended" in (suspended.waiting or "")
    replace = schedule_step(dj(run_now="go", concurrencyPolicy="Replace"), at("2026-01-01 10:00"), active_runs=PREVIOUS)
    assert replace.start is not None and replace.start.replace


def test_a_tick_and_a_trigger_together_start_one_run() -> None:
    obj = dj(
        schedule="0 * * * *",
        run_now="x",
        status={"lastScheduleTime": "2026-01-01T00:00:00Z", "observedSchedule": "0 * * * * (UTC)"},
    )
    step = schedule_step(obj, at("2026-01-01 01:00"), active_runs=NONE)
    assert step.start is not None and step.start.run == "20260101t010000z"
    assert step.status["lastRunNowTrigger"] == "x"


@pytest.mark.parametrize(
    ("spec", "reason", "text"),
    [
        ({"schedule": "0 25 * * *"}, "InvalidSchedule", 'spec.schedule: Invalid value: "0 25 * * *": Bad hour'),
        (
            {"schedule": "0 3 * * *", "timeZone": "Nowhere/City"},
            "InvalidTimeZone",
            'spec.timeZone: Invalid value: "Nowhere/City"',
        ),
        ({"timeZone": "Nowhere/City"}, "InvalidTimeZone", "spec.timeZone"),
        (
            {"schedule": "0 3 * * *", "concurrencyPolicy": "Allow"},
            "InvalidSpec",
            'spec.concurrencyPolicy: Unsupported value: "Allow"',
        ),
        ({"schedule": "0 3 * * *", "startingDeadlineSeconds": -1}, "InvalidSpec", "spec.startingDeadlineSeconds"),
    ],
)
def test_invalid_spec_is_a_problem_and_starts_nothing(spec: dict[str, Any], reason: str, text: str) -> None:
    step = schedule_step(dj(run_now="1", **spec), at("2026-01-01 10:00"), active_runs=NONE)
    assert step.problem is not None and step.problem.reason == reason
    assert step.problem.message.startswith(text)
    assert step.start is None and step.requeue_at is None and step.status == {"nextScheduleTime": None}


def test_removing_the_schedule_clears_what_it_remembers_of_it_and_keeps_the_run() -> None:
    status = {
        "lastScheduleTime": "2026-01-01T01:00:00Z",
        "nextScheduleTime": "2026-01-01T02:00:00Z",
        "currentRun": "20260101t010000z",
    }
    step = schedule_step(dj(status=status), at("2026-01-01 01:30"), active_runs=NONE)
    assert step.status == {"nextScheduleTime": None, "lastScheduleTime": None}
    assert step.current_run == "20260101t010000z"


def test_naive_times_are_refused() -> None:
    with pytest.raises(ValueError):
        schedule_step(dj(schedule="0 * * * *"), datetime(2026, 1, 1), active_runs=NONE)
    with pytest.raises(ValueError):
        parse_schedule("0 * * * *").next_after(datetime(2026, 1, 1))


def test_job_run_reads_the_label() -> None:
    assert job_run({"metadata": {"labels": {LABEL_RUN: "20261123t030000z"}}}) == "20261123t030000z"
    assert job_run({"metadata": {}}) is None


def test_schedule_math_is_fast_enough_to_run_in_every_reconcile() -> None:
    # Not a timing assertion: a bound on work. A year of daily ticks is walked without
    # trouble, and a long downtime on a per-minute schedule stays bounded by the limit.
    s = parse_schedule("0 3 * * *", "Europe/Berlin")
    due = due_tick(s, at("2026-01-01 00:00"), at("2026-12-31 23:00"), None)
    assert due.count == 365 and not due.more
    assert due.tick == at("2026-12-31 02:00")
    assert due.latest is not None and due.latest - timedelta(days=1) == due.previous


def test_only_other_runs_block_or_are_replaced() -> None:
    status = {"lastScheduleTime": "2026-01-01T00:00:00Z", "observedSchedule": "0 * * * * (UTC)"}
    # Jobs from before the DaemonJob had runs (no label) count as another run.
    legacy = schedule_step(dj(schedule="0 * * * *", status=status), at("2026-01-01 01:00"), active_runs={None})
    assert legacy.start is None and legacy.skipped[0].reason == SKIP_FORBID
    own = schedule_step(
        dj(schedule="0 * * * *", concurrencyPolicy="Replace", status=status),
        at("2026-01-01 01:00"),
        active_runs={"20260101t010000z"},
    )
    assert own.start is not None and not own.start.replace
