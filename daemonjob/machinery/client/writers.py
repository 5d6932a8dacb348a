"""A fixed set of writer threads that map a function over items, for a pass's writes.

`Executor.map` makes a Future, with its Condition and lock, for every item: at thousands
of Job creates per pass that bookkeeping costs as much as preparing the requests. Here a
call hands the threads at most `width` drainers that take items from one shared iterator.

The calling thread drains too. The threads are shared by every worker, and a drainer holds
its thread until its call's items are all taken, so a pass that creates a thousand Jobs
keeps the threads for its whole batch: a node join's one create would otherwise wait behind
it. Draining on the caller, a pass's writes always move, and a pass of one write (a node
join, per DaemonJob) never waits for a thread at all.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol, TypeVar

__all__ = ["MapAll", "WriterPool"]

T = TypeVar("T")
R = TypeVar("R")


class MapAll(Protocol):
    """What a pass's writes run through: `WriterPool.map`, or a plain `map` in tests."""

    def __call__(self, fn: Callable[[T], R], items: Iterable[T], /) -> Iterable[R]: ...


class WriterPool:
    def __init__(self, width: int, name: str = "writer") -> None:
        self.width = max(1, width)
        self._executor = ThreadPoolExecutor(max_workers=self.width, thread_name_prefix=name)

    def map(self, fn: Callable[[T], R], items: Iterable[T]) -> list[R]:
        """`fn` over `items` on the pool's threads, results in the items' order. Every item is
        tried; if `fn` raised, the first such exception is raised once all are done."""
        todo = list(items)
        results: list[R | None] = [None] * len(todo)
        errors: list[BaseException] = []
        indexes = iter(range(len(todo)))
        lock = threading.Lock()

        def drain() -> None:
            while True:
                with lock:
                    i = next(indexes, None)
                if i is None:
                    return
                try:
                    results[i] = fn(todo[i])
                except Exception as exc:
                    with lock:
                        errors.append(exc)

        helpers = [self._executor.submit(drain) for _ in range(min(self.width, len(todo)) - 1)]
        drain()  # on the calling thread: its items move even while every writer serves other passes
        for helper in helpers:
            helper.result()
        if errors:
            raise errors[0]
        return results  # type: ignore[return-value]  # every slot was filled

    def shutdown(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)
