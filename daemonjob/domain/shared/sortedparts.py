"""Lists kept sorted while a plan's parts are added and removed one node at a time."""

from __future__ import annotations

import bisect
from typing import Any

__all__ = ["sorted_apply"]


def sorted_apply(items: list[Any], item: Any, sign: int, insort: bool, key: Any = None) -> None:
    """Insert `item` into, or remove it from, a list kept sorted (by `key`); without `insort`,
    append (the caller sorts once)."""
    if sign > 0:
        if insort:
            bisect.insort(items, item, key=key)
        else:
            items.append(item)
        return
    at = bisect.bisect_left(items, item if key is None else key(item), key=key)
    while at < len(items) and items[at] != item:
        at += 1
    if at < len(items):
        del items[at]
