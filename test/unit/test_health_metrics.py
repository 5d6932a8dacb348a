"""The per-DaemonJob series the alerts read: conditions, last progress, schedule ticks."""

from __future__ import annotations

from datetime import datetime, timezone

from prometheus_client import generate_latest

from daemonjob.controller.metrics.health import previous_tick
from daemonjob.controller.metrics.metrics import Metrics
from daemonjob.testing.doubles.builders import daemonjob
from daemonjob.testing.prom import metric_value

T0 = datetime(2026, 11, 23, 12, 0, tzinfo=timezone.utc)


def dj(schedule: str | None = None, created: str = "2026-11-01T00:00:00Z") -> dict:
    """Created on 1 November 2026 unless told, before every tick these tests look at."""
    return daemonjob(created=created, schedule=schedule)


def status(**fields: object) -> dict:
    conditions = [{"type": "Reconciling", "status": "True"}, {"type": "Stalled", "status": "False"}]
    return {
        "desiredNodes": 3,
        "activeNodes": 1,
        "succeededNodes": 1,
        "failedNodes": 0,
        "pendingNodes": 1,
        "currentRevision": "abc",
        "conditions": conditions,
        **fields,
    }


def value(m: Metrics, name: str, **labels: str) -> float | None:
    return metric_value(generate_latest(m.registry).decode(), name, {"namespace": "ops", "name": "audit", **labels})


def test_conditions_follow_kube_state_metrics_spelling() -> None:
    m = Metrics()
    m.health.observe(dj(), status(), T0)
    assert value(m, "daemonjob_status_condition", type="Reconciling", status="true") == 1
    assert value(m, "daemonjob_status_condition", type="Reconciling", status="false") == 0
    assert value(m, "daemonjob_status_condition", type="Stalled", status="false") == 1
    assert value(m, "daemonjob_status_condition", type="Complete") is None  # absent condition: no series


def test_last_progress_moves_only_when_counts_change() -> None:
    m = Metrics()
    m.health.observe(dj(), status(), T0)
    later = T0.replace(hour=13)
    m.health.observe(dj(), status(), later)
    assert value(m, "daemonjob_last_progress_time_seconds") == T0.timestamp()
    m.health.observe(dj(), status(succeededNodes=2, activeNodes=0), later)
    assert value(m, "daemonjob_last_progress_time_seconds") == later.timestamp()


def test_forget_drops_every_health_series() -> None:
    m = Metrics()
    d = dj("0 3 * * *")
    st = status(nextScheduleTime="2026-11-24T03:00:00Z", lastScheduleTime="2026-11-23T03:00:00Z")
    m.set_status("ops", "audit", "uid-1", st)
    m.health.observe(d, st, T0)
    assert value(m, "daemonjob_previous_schedule_time_seconds") is not None
    m.forget("ops", "audit", "uid-1")
    text = generate_latest(m.registry).decode()
    assert 'name="audit"' not in text


def test_previous_tick_is_the_tick_before_the_latest() -> None:
    st = {"nextScheduleTime": "2026-11-24T03:00:00Z"}
    assert previous_tick(dj("0 3 * * *"), st, T0) == datetime(2026, 11, 22, 3, 0, tzinfo=timezone.utc)
    at_tick = datetime(2026, 11, 23, 3, 0, tzinfo=timezone.utc)
    assert previous_tick(dj("0 3 * * *"), st, at_tick) == datetime(2026, 11, 22, 3, 0, tzinfo=timezone.utc)


def test_weekday_schedule_spans_the_weekend() -> None:
    monday = datetime(2026, 11, 23, 4, 0, tzinfo=timezone.utc)  # a Monday
    tick = previous_tick(dj("0 3 * * 1-5"), {"nextScheduleTime": "x"}, monday)
    assert tick == datetime(2026, 11, 20, 3, 0, tzinfo=timezone.utc)  # Friday


def test_no_previous_tick_when_suspended_unscheduled_invalid_or_too_new() -> None:
    st = {"nextScheduleTime": "2026-11-24T03:00:00Z"}
    assert previous_tick(dj("0 3 * * *"), {}, T0) is None  # suspended: no next tick
    assert previous_tick(dj(), st, T0) is None
    assert previous_tick(dj("0 25 * * *"), st, T0) is None
    assert previous_tick(dj("0 3 * * *", created="2026-11-22T12:00:00Z"), st, T0) is None


def test_measured_limiter_observes_waits() -> None:
    from daemonjob.controller.metrics.limiter import MeasuredLimiter

    class Bucket:
        calls = 0

        def accept(self) -> None:
            Bucket.calls += 1

    m = Metrics()
    MeasuredLimiter(Bucket(), m.limiter_wait).accept()
    assert Bucket.calls == 1
    text = generate_latest(m.registry).decode()
    assert metric_value(text, "daemonjob_api_rate_limiter_wait_seconds_count") == 1


def test_run_counters_start_at_zero_for_scheduled_daemonjobs_and_go_with_them() -> None:
    m = Metrics()
    st = status(nextScheduleTime="2026-11-24T03:00:00Z")
    m.set_status("ops", "audit", "uid-1", st)
    m.observe_health(dj("0 3 * * *"), st, T0)
    assert value(m, "daemonjob_runs_started_total") == 0
    assert value(m, "daemonjob_runs_skipped_total", reason="ConcurrencyForbid") == 0
    assert value(m, "daemonjob_runs_finished_total", result="failed") == 0
    m.forget("ops", "audit", "uid-1")
    assert value(m, "daemonjob_runs_started_total") is None


def test_unscheduled_daemonjobs_get_no_run_counters() -> None:
    m = Metrics()
    m.observe_health(dj(), status(), T0)
    assert value(m, "daemonjob_runs_started_total") is None
