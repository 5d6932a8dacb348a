"""The reflector's retry backoff: 0.8 s doubling to 30 s, jittered, reset after a healthy period."""

import random

from daemonjob.machinery.cache.informer import Backoff, drop_managed_fields
from daemonjob.machinery.process.clock import FakeClock


def test_backoff_doubles_to_the_cap_without_jitter() -> None:
    clock = FakeClock()
    b = Backoff(clock, jitter=0.0)
    delays = []
    for _ in range(8):
        delays.append(b.next())
        clock.step(1)
    assert delays == [0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30.0, 30.0]


def test_backoff_resets_after_a_healthy_period() -> None:
    clock = FakeClock()
    b = Backoff(clock, jitter=0.0, reset_after=120)
    b.next()
    clock.step(1)
    assert b.next() == 1.6
    clock.step(121)
    assert b.next() == 0.8


def test_jitter_stays_within_one_base_delay() -> None:
    clock = FakeClock()
    b = Backoff(clock, jitter=1.0, rng=random.Random(7))
    first = b.next()
    assert 0.8 <= first <= 1.6


def test_managed_fields_are_dropped() -> None:
    obj = {"metadata": {"name": "a", "managedFields": [{"manager": "x"}]}}
    assert drop_managed_fields(obj) == {"metadata": {"name": "a"}}
