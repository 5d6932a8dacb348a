"""Reflector + informer: list, then watch, into a Store, calling handlers on each change.

Follows client-go's reflector: list, watch from the list's resourceVersion with bookmarks,
randomised server-side timeouts, relist on 410 Gone, re-watch with backoff on connection
errors (backoff.py); deletes missed while disconnected come out of the relist as
tombstones (relist.py). What a consumer registers and reads is in handlers.py.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable, Mapping
from typing import Any

import structlog
import urllib3

from daemonjob import defaults
from daemonjob.machinery.cache.backoff import Backoff
from daemonjob.machinery.cache.frozen import FrozenDict, freeze
from daemonjob.machinery.cache.handlers import Handlers, InformerHooks, SharedInformer
from daemonjob.machinery.cache.relist import RelistDiff, Tombstone, deleted_object, diff_relist
from daemonjob.machinery.cache.store import IndexFunc, Store, meta_namespace_key
from daemonjob.machinery.client.kube import ApiError, Kube, WatchStream, path_for
from daemonjob.machinery.client.watchstream import Decode
from daemonjob.machinery.process.clock import Clock, RealClock

__all__ = [  # the consumer's side and the relist's are re-exported: readers import them from here
    "Backoff",
    "Handlers",
    "Informer",
    "InformerHooks",
    "RelistDiff",
    "SharedInformer",
    "Tombstone",
    "Transform",
    "deleted_object",
    "diff_relist",
    "drop_managed_fields",
]

log = structlog.get_logger("daemonjob.machinery.cache.informer")

Obj = Mapping[str, Any]
Transform = Callable[[dict[str, Any]], Mapping[str, Any]]  # a trimmed dict, or a record (machinery/cache/record.py)


def drop_managed_fields(obj: dict[str, Any]) -> dict[str, Any]:
    obj.get("metadata", {}).pop("managedFields", None)
    return obj


class Informer:
    """One resource kind, one thread, one Store."""

    def __init__(
        self,
        kube: Kube,
        api_version: str,
        plural: str,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        transform: Transform | None = None,
        decode: Decode | None = None,
        indexers: Mapping[str, IndexFunc] | None = None,
        clock: Clock | None = None,
        hooks: InformerHooks | None = None,
        name: str | None = None,
        watch_timeout_min: int = defaults.WATCH_TIMEOUT_MIN,
        backoff: Backoff | None = None,
        rng: random.Random | None = None,
    ):
        self.kube = kube
        self.path = path_for(api_version, plural, namespace)
        self.name = name or plural
        self.selectors = {"labelSelector": label_selector, "fieldSelector": field_selector}
        self.transform = transform
        self.decode = decode  # a watch event's line to its object, when the kind's shape is known
        self.store = Store(dict(indexers or {}))
        self.clock = clock or RealClock()
        self.hooks = hooks or InformerHooks()
        self.watch_timeout_min = watch_timeout_min
        self.handlers: list[Handlers] = []
        self.resource_version = ""
        self._synced = threading.Event()
        self._stopped = threading.Event()
        self._stream: WatchStream | None = None
        self._thread: threading.Thread | None = None
        self.rng = rng if rng is not None else random.Random()  # jitter: backoff and watch timeouts
        self._backoff = backoff or Backoff(self.clock, rng=self.rng)
        self._lists = 0
        self._sync_error: str | None = None
        self._sync_listeners: list[Callable[[], None]] = []

    # -- public --------------------------------------------------------------------------
    def add_handlers(self, handlers: Handlers) -> None:
        """Register before start(): handlers see every object from the first list on."""
        self.handlers.append(handlers)

    def start(self) -> None:
        self._thread = threading.Thread(target=self.run, name=f"informer-{self.name}", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stopped.set()
        stream = self._stream
        if stream is not None:
            stream.close()
        if self._thread is not None:
            self._thread.join(timeout)

    def has_synced(self) -> bool:
        return self._synced.is_set()

    def wait_for_sync(self, timeout: float | None = None) -> bool:
        return self._synced.wait(timeout)

    def sync_error(self) -> str | None:
        return None if self._synced.is_set() else self._sync_error

    def add_sync_listener(self, listener: Callable[[], None]) -> None:
        """Register before start(). Lets a consumer wait for the first list without polling, and
        say why it fails (a 403 on a resource the controller may not list) as soon as it does."""
        self._sync_listeners.append(listener)

    def _sync_state_changed(self) -> None:
        for listener in self._sync_listeners:
            _safe(listener, self.name)

    def alive(self) -> bool:
        return self._thread is None or self._thread.is_alive()

    # -- the loop ------------------------------------------------------------------------
    def run(self) -> None:
        need_list = True
        while not self._stopped.is_set():
            try:
                if need_list:
                    self._list()
                    need_list = False
                self._watch()
            except ApiError as exc:
                if exc.gone:
                    log.info("watch expired, relisting", informer=self.name, message=exc.message)
                    self._restart("expired")
                    need_list = True
                    continue
                need_list = need_list or exc.status in (401, 403, 404)
                self._pause(f"api-{exc.status}", exc)
            except (urllib3.exceptions.HTTPError, OSError, ValueError) as exc:
                if self._stopped.is_set():
                    break
                self._pause("connection", exc)

    def _pause(self, cause: str, exc: BaseException) -> None:
        delay = self._backoff.next()
        error = exc.message if isinstance(exc, ApiError) else str(exc)
        log.warning(
            "watch failed, retrying", informer=self.name, cause=cause, error=error[:300], retry_in=round(delay, 2)
        )
        self._restart(cause)
        if not self._synced.is_set() and error != self._sync_error:
            self._sync_error = error
            self._sync_state_changed()
        self._stopped.wait(delay)

    def _restart(self, cause: str) -> None:
        if self.hooks.on_watch_restart:
            self.hooks.on_watch_restart(self.name, cause)

    def _list(self) -> None:
        """A paged, consistent list, each page trimmed before the next is fetched.

        Decoding a whole unpaged list (tens of MB at thousands of Nodes) would leave a
        heap many times the size of the trimmed cache, which CPython never hands back.
        """
        if self._lists > 0 and self.hooks.on_relist:
            self.hooks.on_relist(self.name)
        if self.hooks.on_list:
            self.hooks.on_list(self.name)
        params: dict[str, Any] = {**self.selectors, "limit": defaults.LIST_PAGE_SIZE}
        prepared: list[FrozenDict] = []
        while True:
            page = self.kube.get(self.path, **params)
            prepared.extend(freeze(self._prepare(obj)) for obj in page.get("items") or ())
            meta = page.get("metadata") or {}
            cont = meta.get("continue")
            del page
            if not cont:
                break
            params = {**self.selectors, "limit": defaults.LIST_PAGE_SIZE, "continue": cont}
        self._lists += 1
        self._replace(prepared, meta.get("resourceVersion", ""))

    def _replace(self, prepared: list[FrozenDict], resource_version: str) -> None:
        diff = diff_relist(dict(self.store.items()), prepared)
        self.store.replace(diff.objects)
        self.resource_version = resource_version
        for before, now in diff.changes:
            if before is None:
                self._emit_add(now)
            else:
                self._emit_update(before, now)
        for tombstone in diff.deleted:
            self._emit_delete(tombstone)
        first = not self._synced.is_set()
        self._synced.set()
        self._sync_error = None
        if first:
            self._sync_state_changed()

    def _watch(self) -> None:
        timeout = self.rng.randint(self.watch_timeout_min, 2 * self.watch_timeout_min - 1)
        params = {
            **self.selectors,
            "resourceVersion": self.resource_version,
            "allowWatchBookmarks": True,
            "timeoutSeconds": timeout,
        }
        read_timeout = timeout + defaults.WATCH_READ_SLACK
        stream = self.kube.watch(self.path, params, read_timeout=read_timeout, decode=self.decode)
        self._stream = stream
        if self._stopped.is_set():
            stream.close()
            return
        for event in stream:
            kind = event.get("type")
            obj = event.get("object") or {}
            if kind == "ERROR":
                raise ApiError(int(obj.get("code") or 500), obj.get("reason", ""), obj.get("message", ""), obj)
            rv = _rv(obj)
            if kind == "BOOKMARK":
                self.resource_version = rv or self.resource_version
                continue
            obj = self._prepare(obj)
            key = meta_namespace_key(obj)
            before = self.store.get(key)
            if kind == "DELETED":
                self.store.delete(obj)
                self._emit_delete(before if before is not None else freeze(obj))
            elif before is None:
                frozen = freeze(obj)
                self.store.add(frozen)  # stores this very instance (it is frozen already)
                self._emit_add(frozen)
            elif before == (frozen := freeze(obj)):
                pass  # nothing a handler reads changed (a heartbeat): keep the instance and its memos
            else:
                self.store.update(frozen)
                self._emit_update(before, frozen)
            self.resource_version = rv or self.resource_version

    def _prepare(self, obj: dict[str, Any]) -> Mapping[str, Any]:
        obj = drop_managed_fields(obj)
        return self.transform(obj) if self.transform else obj

    # -- handler fan-out: handler errors must not kill the reflector ------------------------
    def _emit_add(self, obj: Obj) -> None:
        for h in self.handlers:
            if h.on_add:
                _safe(h.on_add, self.name, obj)

    def _emit_update(self, old: Obj, new: Obj) -> None:
        for h in self.handlers:
            if h.on_update:
                _safe(h.on_update, self.name, old, new)

    def _emit_delete(self, obj: Obj | Tombstone) -> None:
        for h in self.handlers:
            if h.on_delete:
                _safe(h.on_delete, self.name, obj)


def _rv(obj: Obj) -> str:
    return (obj.get("metadata") or {}).get("resourceVersion", "")


def _safe(fn: Callable[..., None], informer: str, *args: Any) -> None:
    try:
        fn(*args)
    except Exception:
        log.exception("event handler failed", informer=informer)
