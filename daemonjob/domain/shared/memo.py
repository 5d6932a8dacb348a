"""The memo the domain uses to keep values derived from cached objects.

The caches freeze their objects and can keep a value computed from one on the object
itself (`daemonjob.machinery.cache.memo.ObjectMemo`). The domain must not import the caches, so
the memo is a parameter: the controller passes its ObjectMemo, and everyone else gets
`no_memo`, which keeps nothing and gives the same answers.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from typing import Any, Protocol, TypeVar

__all__ = ["Memo", "no_memo"]

_T = TypeVar("_T")


class Memo(Protocol):
    """`fn(obj)`, possibly kept under `key` (default: `fn`); `fn` must be pure."""

    def __call__(self, obj: Mapping[str, Any], fn: Callable[[Any], _T], key: Hashable | None = None) -> _T: ...


def no_memo(obj: Mapping[str, Any], fn: Callable[[Any], _T], key: Hashable | None = None) -> _T:
    """The memo that keeps nothing."""
    return fn(obj)
