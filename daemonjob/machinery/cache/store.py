"""Thread-safe, indexed cache of Kubernetes objects as decoded JSON (client-go `tools/cache`).

Objects are frozen on insert (`daemonjob.machinery.cache.frozen`) instead of copied on read.
"""

from __future__ import annotations

import builtins
import sys
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from daemonjob.machinery.cache.frozen import FrozenDict, freeze

__all__ = ["meta_namespace_key", "IndexFunc", "KeyFunc", "Store", "Tagged"]


KeyFunc = Callable[[Mapping[str, Any]], str]


@dataclass(frozen=True)
class Tagged:
    """An index whose entries carry a tag: `func` yields (value, tag) pairs, and
    `by_index(name, value, tag)` reads one tag's objects under a value without reading the
    others (a node's Jobs of one DaemonJob, among the Jobs of every DaemonJob there). The tag
    sits where a plain index keeps None, so it costs no memory of its own."""

    func: Callable[[Mapping[str, Any]], Iterable[tuple[str, str]]]


IndexFunc = Callable[[Mapping[str, Any]], Iterable[str]] | Tagged
Entries = dict[str, str | None]  # an index value's object keys, each with its tag (None: untagged)


def _tags(pairs: Iterable[tuple[str, str]]) -> Entries:
    """A tagged index's entries, each tag one shared string: a tag is one of a few values (an
    owner id) that an index function builds anew for each object, and each entry would keep
    its own copy (about 100 bytes a Job at 10 DaemonJobs)."""
    return {value: sys.intern(tag) if type(tag) is str else tag for value, tag in pairs}


def meta_namespace_key(obj: Mapping[str, Any]) -> str:
    """`namespace/name`, or `name` for cluster-scoped objects."""
    metadata = obj.get("metadata")
    # dict first: a cached object's metadata is one (FrozenDict), and the Mapping check is an ABC's, slow per event
    if not (isinstance(metadata, dict) or isinstance(metadata, Mapping)) or not metadata.get("name"):
        raise ValueError("object has no metadata.name")
    namespace = metadata.get("namespace")
    name = metadata["name"]
    return f"{namespace}/{name}" if namespace else name


class Store:
    """Objects keyed by `key_func`, with named secondary indexes kept in step on every write.

    Everything returned is frozen and shared with the cache; writers pass plain
    or frozen dicts and the store freezes them (freezing a FrozenDict is free,
    so a caller may freeze first and hand the same object to event handlers).
    """

    def __init__(
        self,
        indexers: Mapping[str, IndexFunc] | None = None,
        key_func: KeyFunc = meta_namespace_key,
    ) -> None:
        self._lock = threading.Lock()
        self._key_func = key_func
        self._items: dict[str, FrozenDict] = {}
        self._indexers: dict[str, IndexFunc] = dict(indexers or {})
        # index name -> indexed value -> keys of the objects carrying it, with their tags
        # Each index value's keys as a dict used as an ordered set: at 5000 keys it is 100 KB where
        # a set is 260, at ten keys 450 B where a set is 730 (a Job is in four indexes).
        self._indices: dict[str, dict[str, Entries]] = {n: {} for n in self._indexers}

    # --- writes ---

    def add(self, obj: Mapping[str, Any]) -> FrozenDict | None:
        """Insert or replace `obj`; returns the object it replaced, if any."""
        frozen = freeze(obj)
        key = self._key_func(frozen)
        with self._lock:
            values = self._index_values(frozen)
            old = self._items.get(key)
            if old is not None:
                self._unindex(key, old, keep=values)
            self._items[key] = frozen
            self._index(key, values)
            return old

    def update(self, obj: Mapping[str, Any]) -> FrozenDict | None:
        """Same as `add`: the cache does not distinguish create from update."""
        return self.add(obj)

    def delete(self, obj_or_key: Mapping[str, Any] | str) -> FrozenDict | None:
        """Remove an object (given itself or its key); returns what was removed."""
        key = obj_or_key if isinstance(obj_or_key, str) else self._key_func(obj_or_key)
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._unindex(key, old)
            return old

    def replace(self, objs: Iterable[Mapping[str, Any]]) -> dict[str, FrozenDict]:
        """Swap the whole content for `objs` (a relist).

        Returns the objects that vanished, keyed by key, with their last known
        state, so deletions missed while not watching can still be delivered.
        """
        items: dict[str, FrozenDict] = {}
        for obj in objs:
            frozen = freeze(obj)
            items[self._key_func(frozen)] = frozen
        with self._lock:
            indices: dict[str, dict[str, Entries]] = {n: {} for n in self._indexers}
            for key, frozen in items.items():
                for name, values in self._index_values(frozen).items():
                    for value, tag in values.items():
                        indices[name].setdefault(value, {})[key] = tag
            vanished = {k: v for k, v in self._items.items() if k not in items}
            self._items = items
            self._indices = indices
            return vanished

    # --- reads ---

    def get(self, key: str) -> FrozenDict | None:
        with self._lock:
            return self._items.get(key)

    def list(self) -> builtins.list[FrozenDict]:
        with self._lock:
            return list(self._items.values())

    def keys(self) -> builtins.list[str]:
        with self._lock:
            return list(self._items)

    def items(self) -> builtins.list[tuple[str, FrozenDict]]:
        """A consistent snapshot of (key, object) pairs."""
        with self._lock:
            return list(self._items.items())

    def by_index(self, index_name: str, value: str, tag: str | None = None) -> builtins.list[FrozenDict]:
        """Objects whose index function yields `value`, ordered by key; with `tag` (a Tagged
        index), only those it tags so, found by their entries alone."""
        with self._lock:
            entries = self._index_for(index_name).get(value)
            if not entries:
                return []
            if tag is None:
                keys = sorted(entries)
            else:
                keys = sorted([k for k, t in entries.items() if t == tag])
            return [self._items[k] for k in keys]

    def count_index(self, index_name: str, value: str) -> int:
        """How many objects the index names under `value`, none of them read: a check per event
        costs no sort of the keys."""
        with self._lock:
            return len(self._index_for(index_name).get(value, ()))

    def indexed(self, index_name: str) -> builtins.list[FrozenDict]:
        """Every object the index names under some value, ordered by key."""
        with self._lock:
            keys = sorted({k for ks in self._index_for(index_name).values() for k in ks})
            return [self._items[k] for k in keys]

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._items

    # --- internals ---

    def _index_for(self, index_name: str) -> dict[str, Entries]:
        try:
            return self._indices[index_name]
        except KeyError:
            raise KeyError(f"index {index_name!r} does not exist") from None

    def _index_values(self, obj: FrozenDict) -> dict[str, Entries]:
        # Computed before any change, so a failing index function leaves the store as it was.
        return {
            name: _tags(func.func(obj)) if isinstance(func, Tagged) else dict.fromkeys(func(obj))
            for name, func in self._indexers.items()
        }

    def _index(self, key: str, values: dict[str, Entries]) -> None:
        for name, vals in values.items():
            index = self._indices[name]
            for value, tag in vals.items():
                index.setdefault(value, {})[key] = tag

    def _unindex(self, key: str, obj: FrozenDict, keep: dict[str, Entries] | None = None) -> None:
        """`keep`: the values an update indexes the object under again, left in place: their
        entries keep the key object the first add stored (an update's key is an equal string of
        its own: taken out and put back, every entry held a second copy, 80 bytes per Job)."""
        for name, func in self._indexers.items():
            index = self._indices[name]
            kept = keep[name] if keep is not None else {}
            for value in {v for v, _ in func.func(obj)} if isinstance(func, Tagged) else set(func(obj)):
                if value in kept:
                    continue
                keys = index.get(value)
                if keys is None:
                    continue
                keys.pop(key, None)
                if not keys:
                    del index[value]
