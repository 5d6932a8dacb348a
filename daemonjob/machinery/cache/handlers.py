"""What a consumer of an informer sees: the handlers it registers, the hooks metrics observe,
and the `SharedInformer` protocol the real informer and the tests' fakes both offer."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from daemonjob.machinery.cache.relist import Tombstone
from daemonjob.machinery.cache.store import Store

__all__ = ["Handlers", "InformerHooks", "SharedInformer"]

Obj = Mapping[str, Any]


@dataclass
class Handlers:
    on_add: Callable[[Obj], None] | None = None
    on_update: Callable[[Obj, Obj], None] | None = None
    on_delete: Callable[[Obj | Tombstone], None] | None = None


@dataclass
class InformerHooks:
    """Observation points for metrics; each gets the informer's name."""

    on_list: Callable[[str], None] | None = None
    on_relist: Callable[[str], None] | None = None
    on_watch_restart: Callable[[str, str], None] | None = None  # name, cause


class SharedInformer(Protocol):
    """What a consumer of an informer uses; `Informer` is the real one, tests pass fakes."""

    name: str
    store: Store

    def add_handlers(self, handlers: Handlers) -> None: ...

    def start(self) -> None: ...

    def stop(self, timeout: float = 5.0) -> None: ...

    def has_synced(self) -> bool: ...

    def wait_for_sync(self, timeout: float | None = None) -> bool: ...

    def sync_error(self) -> str | None:
        """Why the informer has not synced yet (its last list failed), else None."""
        ...

    def add_sync_listener(self, listener: Callable[[], None]) -> None:
        """Called when the informer syncs, and when a failed first list fails differently."""
        ...

    def alive(self) -> bool:
        """False when started and its thread has died."""
        ...
