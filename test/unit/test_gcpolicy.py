"""What survived a full collection is frozen; a cycle that became garbage is reclaimed at the next full walk."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from daemonjob.machinery.cache.gcpolicy import FreezeSurvivors


class Node:
    def __init__(self) -> None:
        self.other: Node | None = None


def cycle() -> weakref.ref[Node]:
    a, b = Node(), Node()
    a.other, b.other = b, a
    return weakref.ref(a)


@pytest.fixture
def policy() -> Iterator[tuple[FreezeSurvivors, list[float]]]:
    now = [0.0]
    p = FreezeSurvivors(full_every=600, clock=lambda: now[0])
    p.install()
    yield p, now
    p.uninstall()
    gc.unfreeze()
    gc.collect()


def test_the_caches_are_frozen_once_filled_and_survivors_after_each_full_collection(policy):
    p, _ = policy
    cache = [{"n": i} for i in range(1000)]
    p.freeze_now()
    assert gc.get_freeze_count() >= len(cache)
    gc.unfreeze()
    gc.collect()  # a full collection: its survivors frozen again
    assert gc.get_freeze_count() >= len(cache)


def test_a_frozen_cycle_waits_for_the_next_full_walk(policy):
    p, now = policy
    held = [Node(), Node()]
    held[0].other, held[1].other = held[1], held[0]
    ref = weakref.ref(held[0])
    p.freeze_now()  # the cycle is alive here, so frozen with the rest
    held.clear()  # now garbage, but frozen
    gc.collect()
    assert ref() is not None  # frozen: full collections in between do not walk it
    now[0] = 601
    gc.collect()
    assert ref() is None and p.full_walks == 1


def test_young_garbage_cycles_are_collected_as_ever(policy):
    p, _ = policy
    p.freeze_now()
    ref = cycle()
    gc.collect()
    assert ref() is None
