"""Thread-safe, indexed cache of Kubernetes objects as decoded JSON (client-go `tools/cache`).

Objects are frozen on insert instead of copied on read: a reconcile reads
thousands of nodes, and a deep copy per read would dominate its cost, while a
shared mutable object would let one worker corrupt the cache for all others.
"""

from __future__ import annotations

import builtins
import threading
from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import Any, NoReturn, TypeVar

_T = TypeVar("_T")

__all__ = [
    "FrozenDict",
    "freeze",
    "thaw",
    "derived",
    "meta_namespace_key",
    "IndexFunc",
    "KeyFunc",
    "Store",
]


def _immutable(*_args: Any, **_kwargs: Any) -> NoReturn:
    raise TypeError("cached objects are immutable; use thaw() for a mutable copy")


class FrozenDict(dict):
    """A dict whose contents are frozen recursively and cannot be changed.

    Still a real dict, so `json`/`orjson`, `isinstance(x, dict)` and read access
    work unchanged. Lists become tuples, so a frozen object never compares
    equal to a plain one containing lists: compare `thaw()`ed copies instead.
    """

    __slots__ = ("_hash", "_derived")

    def __new__(cls, *args: Any, **kwargs: Any) -> FrozenDict:
        self = dict.__new__(cls)
        dict.update(self, ((k, freeze(v)) for k, v in dict(*args, **kwargs).items()))
        self._hash = None
        self._derived = None
        return self

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # Contents were set in __new__; dict.__init__ would update them in place.
        pass

    __setitem__ = _immutable
    __delitem__ = _immutable
    __ior__ = _immutable
    clear = _immutable
    pop = _immutable
    popitem = _immutable
    setdefault = _immutable
    update = _immutable

    @classmethod
    def fromkeys(cls, iterable: Iterable[Any], value: Any = None) -> FrozenDict:
        return cls(dict.fromkeys(iterable, value))

    def __hash__(self) -> int:  # type: ignore[override]
        if self._hash is None:
            self._hash = hash(frozenset(self.items()))
        return self._hash

    def __reduce__(self) -> tuple[type[FrozenDict], tuple[dict[Any, Any]]]:
        # The default dict protocol would rebuild the object through __setitem__.
        return (FrozenDict, (dict(self),))

    def __copy__(self) -> FrozenDict:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> FrozenDict:
        # Immutable all the way down, so sharing is as good as copying (like tuple).
        return self

    def __repr__(self) -> str:
        return f"FrozenDict({dict.__repr__(self)})"


_SCALARS = (str, int, float, bool, type(None))


def _freeze_plain(obj: dict[str, Any]) -> FrozenDict:
    """Fast path for decoded JSON (exact dict/list/scalar types): most of a cache fill."""
    frozen = dict.__new__(FrozenDict)
    dict.update(frozen, {k: (v if type(v) in _SCALARS else freeze(v)) for k, v in obj.items()})
    frozen._hash = None
    frozen._derived = None
    return frozen


def freeze(obj: Any) -> Any:
    """Return an immutable equivalent of decoded JSON: dicts to FrozenDict, lists to tuples."""
    kind = type(obj)
    if kind is dict:
        return _freeze_plain(obj)
    if kind is list:
        return tuple([v if type(v) in _SCALARS else freeze(v) for v in obj])
    if kind in _SCALARS:
        return obj
    if isinstance(obj, FrozenDict):
        return obj
    if isinstance(obj, Mapping):
        return FrozenDict(obj)
    if isinstance(obj, (list, tuple)):
        return tuple(freeze(item) for item in obj)
    if isinstance(obj, (set, frozenset)):
        return frozenset(freeze(item) for item in obj)
    return obj


DERIVED_MAX = 32  # values kept per object by default; past it the memo starts over


class Derived:
    """`fn(obj)`, computed once per frozen object and kept on it under `key` (default: `fn`).

    A frozen object never changes, so a value derived from it never goes stale;
    a new version of the object is a new object. Plain mappings are not cached.
    Two threads may both compute a missing value: `fn` must be pure, and every `fn`
    given one `key` must give the same answers. `capacity`: values kept per object;
    past it the object's memo starts over, so keys that change (edited rules) cannot
    pile up. Its owner sizes it to the keys in use (one per set of node rules), since a
    capacity below them would clear every memo on every pass.
    """

    def __init__(self, capacity: int = DERIVED_MAX) -> None:
        self.capacity = capacity

    def __call__(self, obj: Mapping[str, Any], fn: Callable[[Any], _T], key: Hashable | None = None) -> _T:
        if type(obj) is not FrozenDict:
            return fn(obj)
        if key is None:
            key = fn
        memo = obj._derived  # None, one (key, value) pair, or a dict of them: most objects need one
        if memo is None:
            value = fn(obj)
            obj._derived = (key, value)
            return value
        if type(memo) is tuple:
            if memo[0] == key:
                return memo[1]
            memo = obj._derived = {memo[0]: memo[1]}
        try:
            return memo[key]
        except KeyError:
            if len(memo) >= self.capacity:
                memo.clear()
            value = memo[key] = fn(obj)
            return value


derived = Derived()


def thaw(obj: Any) -> Any:
    """Return a plain, mutable deep copy: mappings to dicts, tuples and lists to lists."""
    if isinstance(obj, Mapping):
        return {k: thaw(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [thaw(item) for item in obj]
    if isinstance(obj, (set, frozenset)):
        return {thaw(item) for item in obj}
    return obj


KeyFunc = Callable[[Mapping[str, Any]], str]
IndexFunc = Callable[[Mapping[str, Any]], Iterable[str]]


def meta_namespace_key(obj: Mapping[str, Any]) -> str:
    """`namespace/name`, or `name` for cluster-scoped objects."""
    metadata = obj.get("metadata")
    if not isinstance(metadata, Mapping) or not metadata.get("name"):
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
        # index name -> indexed value -> keys of the objects carrying it
        self._indices: dict[str, dict[str, set[str]]] = {n: {} for n in self._indexers}

    # --- writes ---

    def add(self, obj: Mapping[str, Any]) -> FrozenDict | None:
        """Insert or replace `obj`; returns the object it replaced, if any."""
        frozen = freeze(obj)
        key = self._key_func(frozen)
        with self._lock:
            values = self._index_values(frozen)
            old = self._items.get(key)
            if old is not None:
                self._unindex(key, old)
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
            indices: dict[str, dict[str, set[str]]] = {n: {} for n in self._indexers}
            for key, frozen in items.items():
                for name, values in self._index_values(frozen).items():
                    for value in values:
                        indices[name].setdefault(value, set()).add(key)
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

    def by_index(self, index_name: str, value: str) -> builtins.list[FrozenDict]:
        """Objects whose index function yields `value`, ordered by key."""
        with self._lock:
            keys = sorted(self._index_for(index_name).get(value, ()))
            return [self._items[k] for k in keys]

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._items

    # --- internals ---

    def _index_for(self, index_name: str) -> dict[str, set[str]]:
        try:
            return self._indices[index_name]
        except KeyError:
            raise KeyError(f"index {index_name!r} does not exist") from None

    def _index_values(self, obj: FrozenDict) -> dict[str, set[str]]:
        # Computed before any change, so a failing index function leaves the store as it was.
        return {name: set(func(obj)) for name, func in self._indexers.items()}

    def _index(self, key: str, values: dict[str, set[str]]) -> None:
        for name, vals in values.items():
            index = self._indices[name]
            for value in vals:
                index.setdefault(value, set()).add(key)

    def _unindex(self, key: str, obj: FrozenDict) -> None:
        for name, func in self._indexers.items():
            index = self._indices[name]
            for value in set(func(obj)):
                keys = index.get(value)
                if keys is None:
                    continue
                keys.discard(key)
                if not keys:
                    del index[value]
