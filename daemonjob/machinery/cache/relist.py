"""What a relist delivers: the fresh list compared with the cache by content, and the deletes
missed while not watching, as tombstones (client-go's DeletedFinalStateUnknown).

A relist compares content, not resourceVersions: a transform may drop the resourceVersion
to save memory, and a change missed while the watch was down must still be delivered.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from daemonjob.machinery.cache.frozen import FrozenDict
from daemonjob.machinery.cache.store import meta_namespace_key

__all__ = ["RelistDiff", "Tombstone", "deleted_object", "diff_relist"]

Obj = Mapping[str, Any]


@dataclass(frozen=True)
class Tombstone:
    """A delete seen only through a relist: `obj` is the last state the cache knew."""

    key: str
    obj: Obj


def deleted_object(obj: Obj | Tombstone) -> Obj:
    """The object a delete handler was given, whether seen by the watch or by a relist."""
    return obj.obj if isinstance(obj, Tombstone) else obj


@dataclass
class RelistDiff:
    """What a relist changed: the new cache content and the events it owes the handlers."""

    objects: list[FrozenDict]  # unchanged objects are the cached instances, kept with their memos
    changes: list[tuple[FrozenDict | None, FrozenDict]]  # (before, now) in list order; before None: added
    deleted: list[Tombstone]


def diff_relist(cached: Mapping[str, FrozenDict], listed: list[FrozenDict]) -> RelistDiff:
    """Compare a fresh list with the cache by content (what handlers read), key by key.

    Cached objects are frozen and share interned parts, so comparing equal ones mostly
    stops at identical sub-objects. Equal content keeps the cached instance: values
    derived from it stay memoised and the listed copy can be freed at once.
    """
    remaining = dict(cached)
    objects: list[FrozenDict] = []
    changes: list[tuple[FrozenDict | None, FrozenDict]] = []
    for obj in listed:
        before = remaining.pop(meta_namespace_key(obj), None)
        if before is not None and before == obj:
            objects.append(before)
            continue
        objects.append(obj)
        changes.append((before, obj))
    deleted = [Tombstone(key, before) for key, before in remaining.items()]
    return RelistDiff(objects, changes, deleted)
