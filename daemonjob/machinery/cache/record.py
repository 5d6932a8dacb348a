"""Frozen records: a cached kind's few fixed keys kept in slots, read as a mapping.

The Job cache holds tens of thousands of objects of one shape. As frozen dicts, a Job
and its metadata took ~520 bytes (two hash tables); as records 184 (a slot of 8 bytes a
key). Readers see a read-only Mapping like any decoded object, so the domain reads a
cached Job and a Job from a list or a test the same way.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator, Mapping
from operator import attrgetter
from typing import Any, ClassVar, NoReturn

__all__ = ["FrozenRecord"]


class FrozenRecord(Mapping[str, Any]):
    """A read-only mapping over the slots of a subclass; a key whose value is None is absent
    (the API server leaves such keys out rather than send null).

    Subclasses name their keys in `__slots__`; values must already be frozen (they are
    shared, not copied). `_memo` is the object memo's (`daemonjob.machinery.cache.memo`), and
    `_kept` holds the one value kept under the class's `memo_key`, so the value most read
    of each record costs a slot, not a (key, value) pair.
    """

    __slots__ = ("_memo", "_kept")
    _keys: ClassVar[tuple[str, ...]] = ()
    _key_set: ClassVar[frozenset[str]] = frozenset()
    _values: ClassVar[Any]  # the values of every key, in order: an attrgetter, so one C call
    _memo: Any
    _kept: Any
    memo_key: ClassVar[Hashable] = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        own = cls.__dict__.get("__slots__", ())
        cls._keys = (*cls._keys, *((own,) if isinstance(own, str) else own))
        cls._key_set = frozenset(cls._keys)
        getter = attrgetter(*cls._keys)
        cls._values = staticmethod(getter if len(cls._keys) > 1 else lambda obj: (getter(obj),))

    def __init__(self, **values: Any) -> None:
        unknown = values.keys() - self._key_set
        if unknown:
            raise TypeError(f"{type(self).__name__} has no keys {sorted(unknown)}")
        setter = object.__setattr__
        for key in self._keys:
            setter(self, key, values.get(key))
        setter(self, "_memo", None)

    def __setattr__(self, name: str, value: Any) -> NoReturn:
        raise TypeError("cached objects are immutable; use thaw() for a mutable copy")

    __delattr__ = __setattr__  # type: ignore[assignment]

    # -- the Mapping protocol, at C speed where it can be ---------------------------------
    def __getitem__(self, key: str) -> Any:
        if key in self._key_set:
            value = getattr(self, key)
            if value is not None:
                return value
        raise KeyError(key)

    def get(self, key: str, default: Any = None) -> Any:
        if key in self._key_set:
            value = getattr(self, key)
            if value is not None:
                return value
        return default

    def __contains__(self, key: object) -> bool:
        return key in self._key_set and getattr(self, key) is not None

    def __iter__(self) -> Iterator[str]:
        return (key for key, value in zip(self._keys, self._values(self), strict=True) if value is not None)

    def __len__(self) -> int:
        return len(self._keys) - self._values(self).count(None)

    def __bool__(self) -> bool:
        # `job.get("metadata") or {}` asks this of every read: the first key set answers it
        for key in self._keys:
            if getattr(self, key) is not None:
                return True
        return False

    def __eq__(self, other: object) -> bool:
        if type(other) is type(self):
            return self is other or self._values(self) == self._values(other)
        return Mapping.__eq__(self, other)

    def __hash__(self) -> int:
        return hash(self._values(self))

    def __copy__(self) -> FrozenRecord:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> FrozenRecord:
        return self  # immutable all the way down, so sharing is as good as copying

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (type(self), dict(self)))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({dict(self)!r})"


def _rebuild(cls: type[FrozenRecord], values: dict[str, Any]) -> FrozenRecord:
    return cls(**values)
