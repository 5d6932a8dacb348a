import threading
from datetime import timedelta, timezone

import pytest

from daemonjob.machinery.process.clock import Clock, FakeClock, RealClock


def start(target, *args):
    t = threading.Thread(target=target, args=args, daemon=True)
    t.start()
    return t


def test_both_clocks_satisfy_the_protocol():
    assert isinstance(RealClock(), Clock)
    assert isinstance(FakeClock(), Clock)


def test_real_clock_is_monotonic_and_utc():
    clock = RealClock()
    a = clock.now()
    assert clock.now() >= a
    assert clock.wall().tzinfo is not None
    assert clock.wall().utcoffset() == timedelta(0)


def test_real_clock_wait_with_no_time_left_returns_at_once():
    cond = threading.Condition()
    with cond:
        assert RealClock().wait(cond, 0) is False


def test_fake_clock_moves_only_when_stepped():
    clock = FakeClock(start=10.0)
    wall = clock.wall()
    assert clock.now() == 10.0
    clock.step(2.5)
    assert clock.now() == 12.5
    assert clock.wall() - wall == timedelta(seconds=2.5)
    assert clock.wall().tzinfo == timezone.utc
    with pytest.raises(ValueError):
        clock.step(-1)


def test_fake_sleep_returns_only_once_time_has_passed():
    clock = FakeClock()
    done = threading.Event()
    t = start(lambda: (clock.sleep(5), done.set()))
    clock.block_until_waiters(1)
    clock.step(4.9)
    assert not done.wait(0.02)
    clock.step(0.1)
    assert done.wait(2)
    t.join(2)
    assert clock.waiters() == 0


def test_fake_wait_times_out_on_step_and_reports_it():
    clock = FakeClock()
    cond = threading.Condition()
    result: list[bool] = []

    def waiter():
        with cond:
            result.append(clock.wait(cond, 1.0))

    t = start(waiter)
    clock.block_until_waiters(1)
    clock.step(1.0)
    t.join(2)
    assert result == [False]


def test_fake_wait_returns_true_when_notified_before_deadline():
    clock = FakeClock()
    cond = threading.Condition()
    result: list[bool] = []

    def waiter():
        with cond:
            result.append(clock.wait(cond, 100.0))

    t = start(waiter)
    clock.block_until_waiters(1)
    with cond:
        cond.notify_all()
    t.join(2)
    assert result == [True]


def test_fake_wait_without_time_left_does_not_block():
    clock = FakeClock()
    cond = threading.Condition()
    with cond:
        assert clock.wait(cond, 0) is False
        assert clock.wait(cond, -1) is False


def test_block_until_waiters_times_out():
    with pytest.raises(TimeoutError):
        FakeClock().block_until_waiters(1, timeout=0.01)
