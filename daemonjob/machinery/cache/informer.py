"""Reflector + informer: list, then watch, into a Store, calling handlers on each change.

Follows client-go's reflector: list, watch from the list's resourceVersion with bookmarks,
randomised server-side timeouts, relist on 410 Gone, re-watch with backoff on connection
errors; deletes missed while disconnected come out of the relist as tombstones.

A relist compares content, not resourceVersions: a transform may drop the resourceVersion
to save memory, and a change missed while the watch was down must still be delivered.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import structlog
import urllib3

from daemonjob import defaults
from daemonjob.machinery.cache.frozen import FrozenDict, freeze
from daemonjob.machinery.cache.store import IndexFunc, Store, meta_namespace_key
from daemonjob.machinery.client.kube import ApiError, Kube, WatchStream, path_for
from daemonjob.machinery.client.watchstream import Decode
from daemonjob.machinery.process.clock import Clock, RealClock

log = structlog.get_logger("daemonjob.machinery.cache.informer")

Obj = Mapping[str, Any]
Transform = Callable[[dict[str, Any]], Mapping[str, Any]]  # a trimmed dict, or a record (machinery/cache/record.py)


@dataclass(frozen=True)
class Tombstone:
    """A delete seen only through a relist: `obj` is the last state the cache knew."""

    key: str
    obj: Obj


def deleted_object(obj: Obj | Tombstone) -> Obj:
    """The object a delete handler was given, whether seen by the watch or by a relist."""
    return obj.obj if isinstance(obj, Tombstone) else obj


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


def drop_managed_fields(obj: dict[str, Any]) -> dict[str, Any]:
    obj.get("metadata", {}).pop("managedFields", None)
    return obj


class Backoff:
    """Exponential backoff with jitter that resets after a healthy period (client-go's)."""

    def __init__(
        self,
        clock: Clock,
        initial: float = defaults.WATCH_BACKOFF_INITIAL,
        cap: float = defaults.WATCH_BACKOFF_MAX,
        reset_after: float = defaults.WATCH_BACKOFF_RESET,
        jitter: float = 1.0,
        rng: random.Random | None = None,
    ):
        self.clock, self.initial, self.cap, self.reset_after, self.jitter = clock, initial, cap, reset_after, jitter
        self.rng = rng or random.Random()
        self._current = 0.0
        self._last = -float("inf")

    def next(self) -> float:
        now = self.clock.now()
        if now - self._last > self.reset_after:
            self._current = self.initial
        else:
            self._current = min(self._current * 2 or self.initial, self.cap)
        self._last = now
        return self._current * (1 + self.jitter * self.rng.random())


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
