"""The writer pool a pass's creates and deletes are fanned out on."""

from __future__ import annotations

import threading
import time

import pytest

from daemonjob.machinery.client.writers import WriterPool


def test_results_come_in_the_items_order_with_at_most_width_at_once() -> None:
    pool = WriterPool(4, "test")
    lock = threading.Lock()
    running, most = 0, 0

    def work(i: int) -> int:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        time.sleep(0.001 * (i % 3))  # finish out of order
        with lock:
            running -= 1
        return i * i

    try:
        assert pool.map(work, range(50)) == [i * i for i in range(50)]
        assert 1 <= most <= 4
        assert pool.map(work, []) == []
    finally:
        pool.shutdown()


def test_every_item_is_tried_and_the_first_error_is_raised_at_the_end() -> None:
    pool = WriterPool(3, "test")
    tried: list[int] = []
    lock = threading.Lock()

    def work(i: int) -> int:
        with lock:
            tried.append(i)
        if i % 7 == 3:
            raise ValueError(f"item {i}")
        return i

    try:
        with pytest.raises(ValueError, match="item"):
            pool.map(work, range(20))
        assert sorted(tried) == list(range(20))
    finally:
        pool.shutdown()
