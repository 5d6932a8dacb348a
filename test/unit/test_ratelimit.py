import threading

import pytest

from daemonjob.machinery.process.clock import FakeClock
from daemonjob.machinery.queue.ratelimit import TokenBucket


def test_burst_then_qps():
    clock = FakeClock()
    bucket = TokenBucket(qps=10, burst=100, clock=clock)
    assert [bucket.reserve() for _ in range(100)] == [0.0] * 100
    clock.step(0.05)
    clock.step(0.05)
    # Two half tokens of float refill make one whole token: no wait at all.
    assert bucket.reserve() == 0.0
    assert bucket.reserve() == pytest.approx(0.1)
    clock.step(0.1)  # pays back the reservation above
    clock.step(1.0)
    assert [bucket.reserve() for _ in range(10)] == [0.0] * 10
    assert bucket.reserve() == pytest.approx(0.1)


def test_refill_never_exceeds_burst():
    clock = FakeClock()
    bucket = TokenBucket(qps=10, burst=5, clock=clock)
    clock.step(3600)
    assert [bucket.reserve() for _ in range(5)] == [0.0] * 5
    assert bucket.reserve() == pytest.approx(0.1)


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
    assert bucket.reserve() == pytest.approx(0.2)


def test_unlimited_when_qps_not_positive():
    for qps in (0, -1):
        bucket = TokenBucket(qps=qps, burst=0, clock=FakeClock())
        assert bucket.unlimited
        assert all(bucket.reserve() == 0.0 for _ in range(10_000))
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


def test_concurrent_reservations_hand_out_burst_then_queue_fairly():
    bucket = TokenBucket(qps=1, burst=100, clock=FakeClock())
    delays: list[float] = []
    lock = threading.Lock()

    def worker():
        mine = [bucket.reserve() for _ in range(50)]
        with lock:
            delays.extend(mine)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(5)
    # Exactly the burst goes out without waiting; every later reservation waits one
    # interval longer than the one before it, whichever thread made it.
    assert sorted(delays) == [0.0] * 100 + [float(n) for n in range(1, 301)]
