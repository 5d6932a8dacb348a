"""Frozen decoded JSON: what the caches hold, shared by every reader instead of copied.

A reconcile reads thousands of nodes, and a deep copy per read would dominate its cost,
while a shared mutable object would let one worker corrupt the cache for all others. Each
frozen mapping has a slot for the values a memo keeps on it (`daemonjob.machinery.cache.memo`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NoReturn

from daemonjob.machinery.cache.record import FrozenRecord

__all__ = ["FrozenDict", "freeze", "thaw"]


def _immutable(*_args: Any, **_kwargs: Any) -> NoReturn:
    raise TypeError("cached objects are immutable; use thaw() for a mutable copy")


class FrozenDict(dict):
    """A dict whose contents are frozen recursively and cannot be changed.

    Still a real dict, so `json`/`orjson`, `isinstance(x, dict)` and read access
    work unchanged. Lists become tuples, so a frozen object never compares
    equal to a plain one containing lists: compare `thaw()`ed copies instead.
    """

    __slots__ = ("_hash", "_memo")
    _hash: int | None
    _memo: Any  # daemonjob.machinery.cache.memo's: None, one (key, value) pair, or a dict of them

    def __new__(cls, *args: Any, **kwargs: Any) -> FrozenDict:
        self = dict.__new__(cls)
        dict.update(self, ((k, freeze(v)) for k, v in dict(*args, **kwargs).items()))
        self._hash = None
        self._memo = None
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

    def __hash__(self) -> int:  # type: ignore[override]  # dict's is None: a frozen one hashes
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
    frozen._memo = None
    return frozen


def freeze(obj: Any) -> Any:
    """Return an immutable equivalent of decoded JSON: dicts to FrozenDict, lists to tuples
    (a FrozenRecord is frozen already)."""
    kind = type(obj)
    if kind is dict:
        return _freeze_plain(obj)
    if kind is list:
        return tuple([v if type(v) in _SCALARS else freeze(v) for v in obj])
    if kind in _SCALARS:
        return obj
    if isinstance(obj, (FrozenDict, FrozenRecord)):
        return obj
    if isinstance(obj, Mapping):
        return FrozenDict(obj)
    if kind is tuple:
        items = tuple([v if type(v) in _SCALARS else freeze(v) for v in obj])
        # frozen already (a shared part): the same tuple, so every object holding it shares it
        return obj if all(a is b for a, b in zip(items, obj, strict=True)) else items
    if isinstance(obj, (list, tuple)):
        return tuple(freeze(item) for item in obj)
    if isinstance(obj, (set, frozenset)):
        return frozenset(freeze(item) for item in obj)
    return obj


def thaw(obj: Any) -> Any:
    """Return a plain, mutable deep copy: mappings to dicts, tuples and lists to lists."""
    if isinstance(obj, Mapping):
        return {k: thaw(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [thaw(item) for item in obj]
    if isinstance(obj, (set, frozenset)):
        return {thaw(item) for item in obj}
    return obj
