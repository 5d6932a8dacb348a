"""The controller's spec cache: a DaemonJob's spec is read once per generation (and uid)."""

from __future__ import annotations

from typing import Any

from daemonjob.controller.runtime.specs import SpecCache
from daemonjob.machinery.cache.frozen import freeze
from daemonjob.testing.doubles.builders import daemonjob

KEY = "ops/audit"


def cached(generation: int, uid: str = "dj-uid", **spec: Any) -> Any:
    return freeze(daemonjob(generation=generation, uid=uid, **spec))


def test_read_once_per_generation_and_again_for_a_new_one_or_a_new_uid() -> None:
    specs = SpecCache()
    first = specs.get(KEY, cached(1, maxParallel=2))
    assert specs.get(KEY, cached(1, maxParallel=2)) is first  # a status write: same generation
    edited = specs.get(KEY, cached(2, maxParallel=3))
    assert edited.settings.max_parallel == 3
    recreated = specs.get(KEY, cached(2, uid="other", maxParallel=4))
    assert recreated.settings.max_parallel == 4


def test_plain_objects_and_old_versions_are_read_but_not_kept() -> None:
    specs = SpecCache()
    current = specs.get(KEY, cached(2, maxParallel=3))
    plain = daemonjob(maxParallel=5)
    assert specs.get(KEY, plain).settings.max_parallel == 5
    assert specs.get(KEY, cached(1, maxParallel=1), keep=False).settings.max_parallel == 1
    assert specs.items() == [(KEY, current)]


def test_forget_drops_the_key_and_tells_the_listener() -> None:
    specs = SpecCache()
    told: list[int] = []
    specs.on_change = lambda: told.append(len(specs.items()))
    specs.get(KEY, cached(1))
    specs.forget(KEY)
    assert told == [1, 0] and specs.items() == []
