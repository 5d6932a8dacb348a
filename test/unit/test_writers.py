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


def test_a_call_moves_while_every_writer_serves_another_calls_batch() -> None:
    """A node join's one create must not wait behind a large batch holding every thread."""
    pool = WriterPool(2, "test")
    release = threading.Event()
    started = threading.Semaphore(0)

    def held(i: int) -> int:
        started.release()
        release.wait(10)
        return i

    big = threading.Thread(target=pool.map, args=(held, range(10)))
    big.start()
    try:
        for _ in range(2):  # the batch holds both of its drainers, the pool's thread among them
            assert started.acquire(timeout=5)
        answered: list[list[int]] = []
        small = threading.Thread(target=lambda: answered.append(pool.map(lambda i: i + 1, [1])))
        small.start()
        small.join(5)
        assert answered == [[2]], "the one write waited for the batch"
        assert not release.is_set()
    finally:
        release.set()
        big.join(10)
        pool.shutdown()
