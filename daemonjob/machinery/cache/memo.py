"""The memo of the caches: values derived from a frozen object, kept on the object itself.

The domain reads it through its `Memo` protocol (`daemonjob.domain.shared.memo`); a new version of
an object is a new object, so a kept value never goes stale.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from typing import Any, TypeVar

from daemonjob.machinery.cache.frozen import FrozenDict
from daemonjob.machinery.cache.record import FrozenRecord

__all__ = ["ObjectMemo", "MEMO_CAPACITY", "object_memo"]

_T = TypeVar("_T")

MEMO_CAPACITY = 32  # values kept per object by default; past it the memo starts over


class ObjectMemo:
    """`fn(obj)`, computed once per frozen object and kept on it under `key` (default: `fn`).

    A frozen object never changes, so a value derived from it never goes stale;
    a new version of the object is a new object. Plain mappings are not cached.
    Two threads may both no_memo a missing value: `fn` must be pure, and every `fn`
    given one `key` must give the same answers. `capacity`: values kept per object;
    past it the object's memo starts over, so keys that change (edited rules) cannot
    pile up. Its owner sizes it to the keys in use (one per set of node rules), since a
    capacity below them would clear every memo on every pass.
    """

    def __init__(self, capacity: int = MEMO_CAPACITY) -> None:
        self.capacity = capacity

    def __call__(self, obj: Mapping[str, Any], fn: Callable[[Any], _T], key: Hashable | None = None) -> _T:
        if key is None:
            key = fn
        if type(obj) is FrozenDict:
            kept: FrozenDict | FrozenRecord = obj
        elif isinstance(obj, FrozenRecord):
            if key is obj.memo_key:
                try:
                    return obj._kept
                except AttributeError:
                    value = fn(obj)
                    _set_kept(obj, value)  # one slot: threads racing write equal values
                    return value
            kept = obj
        else:
            return fn(obj)
        memo = kept._memo  # None, one (key, value) pair, or a dict of them
        if memo is None:
            value = fn(obj)
            _set_memo(kept, (key, value))
            return value
        if type(memo) is tuple:
            if memo[0] == key:
                return memo[1]
            memo = {memo[0]: memo[1]}
            _set_memo(kept, memo)
        try:
            return memo[key]
        except KeyError:
            if len(memo) >= self.capacity:
                memo.clear()
            value = memo[key] = fn(obj)
            return value


def _set_memo(obj: Any, value: Any) -> None:
    object.__setattr__(obj, "_memo", value)  # a FrozenRecord refuses plain attribute writes


_set_kept = FrozenRecord._kept.__set__


object_memo = ObjectMemo()
