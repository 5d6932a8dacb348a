import threading

import pytest

from daemonjob.machinery.clock import FakeClock
from daemonjob.machinery.ratelimit import TokenBucket


def test_burst_then_qps():
    clock = FakeClock()
    bucket = TokenBucket(qps=10, burst=100, clock=clock)
    assert all(bucket.try_accept() for _ in range(100))
    assert not bucket.try_accept()
    clock.step(0.05)
    assert not bucket.try_accept()
    clock.step(0.05)
    assert bucket.try_accept()
    assert not bucket.try_accept()
    clock.step(1.0)
    assert sum(bucket.try_accept() for _ in range(20)) == 10


def test_refill_never_exceeds_burst():
    clock = FakeClock()
    bucket = TokenBucket(qps=10, burst=5, clock=clock)
    clock.step(3600)
    assert bucket.tokens() == 5
    assert sum(bucket.try_accept() for _ in range(10)) == 5


def test_reserve_returns_growing_delays():
    clock = FakeClock()
    bucket = TokenBucket(qps=10, burst=100, clock=clock)
    assert [bucket.reserve() for _ in range(100)] == [0.0] * 100
    assert bucket.reserve() == pytest.approx(0.1)
    assert bucket.reserve() == pytest.approx(0.2)
    assert bucket.reserve() == pytest.approx(0.3)
    clock.step(0.3)
    # The outstanding reservations used up the refill.
    assert bucket.reserve() == pytest.approx(0.1)
    assert not bucket.try_accept()


def test_unlimited_when_qps_not_positive():
    for qps in (0, -1):
        bucket = TokenBucket(qps=qps, burst=0, clock=FakeClock())
        assert bucket.unlimited
        assert all(bucket.try_accept() for _ in range(10_000))
        assert bucket.reserve() == 0.0
        bucket.accept()


def test_burst_must_allow_one_token():
    with pytest.raises(ValueError):
        TokenBucket(qps=1, burst=0)


def test_accept_blocks_until_the_clock_provides_a_token():
    clock = FakeClock()
    bucket = TokenBucket(qps=2, burst=1, clock=clock)
    bucket.accept()  # the burst token, no wait
    accepted = threading.Event()
    t = threading.Thread(target=lambda: (bucket.accept(), accepted.set()), daemon=True)
    t.start()
    clock.block_until_waiters(1)
    clock.step(0.4)
    assert not accepted.wait(0.02)
    clock.step(0.1)
    assert accepted.wait(2)
    t.join(2)


def test_concurrent_try_accept_hands_out_exactly_burst():
    bucket = TokenBucket(qps=1, burst=100, clock=FakeClock())
    wins: list[int] = []
    lock = threading.Lock()

    def worker():
        n = sum(bucket.try_accept() for _ in range(50))
        with lock:
            wins.append(n)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(5)
    assert sum(wins) == 100
