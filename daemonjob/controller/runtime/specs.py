"""Each DaemonJob's spec as the rule book read it, kept per generation.

A pass, a node event and an alert change all read a DaemonJob's typed spec; the spec of a
cached object only changes with its generation, which the API server keeps, so it is read
once per generation (and uid: a DaemonJob deleted and re-created starts over), not per pass
nor per status write. A plain object (not from a cache) is read each time.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any

from daemonjob.domain.spec.validate import Validation, validate
from daemonjob.machinery.cache.frozen import FrozenDict, thaw

__all__ = ["SpecCache"]


def _version(dj: Mapping[str, Any]) -> str:
    meta = dj["metadata"]
    generation = meta.get("generation")
    # without a generation (objects not from the API server) every version is read again
    version = generation if generation is not None else f"rv:{meta.get('resourceVersion', '')}"
    return f"{version}/{meta.get('uid', '')}"


class SpecCache:
    """`get(key, dj)`: `dj`'s spec read (`Validation`), kept until its generation changes."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_key: dict[str, tuple[str, Validation]] = {}
        self.on_change: Callable[[], None] | None = None  # told when a key's spec is read anew or dropped

    def get(self, key: str, dj: Mapping[str, Any], keep: bool = True) -> Validation:
        """`keep=False` for a version that is not the cache's current one (an old or a deleted
        DaemonJob's): read if need be, never kept."""
        if type(dj) is not FrozenDict:  # not a cached object: its generation may not follow its spec
            return validate(dj)
        version = _version(dj)
        with self._lock:
            cached = self._by_key.get(key)
            if cached is not None and cached[0] == version:
                return cached[1]
        checked = validate(thaw(dj))  # the rule book reads plain lists
        if not keep:
            return checked
        with self._lock:
            self._by_key[key] = (version, checked)
        if self.on_change is not None:
            self.on_change()
        return checked

    def forget(self, key: str) -> None:
        with self._lock:
            self._by_key.pop(key, None)
        if self.on_change is not None:
            self.on_change()

    def items(self) -> list[tuple[str, Validation]]:
        with self._lock:
            return [(k, v[1]) for k, v in self._by_key.items()]
