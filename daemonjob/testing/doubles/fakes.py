"""In-memory stand-ins for the controller's informers and writes, for unit tests.

`FakeInformer` is a Store with handlers and no thread: a test delivers changes when it
wants the cache to catch up. `FakeJobControl` records every write, can refuse chosen calls
with an ApiError, and can apply Job writes to a FakeInformer as the API server would.
The fakes of Node writes and report storage are in nodefakes.py.
"""

from __future__ import annotations

import functools
import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from daemonjob.controller.runtime.informers import DAEMONJOB_INDEXERS, JOB_INDEXERS, NODE_INDEXERS, Informers
from daemonjob.controller.runtime.transforms import job_transform, node_transform
from daemonjob.controller.runtime.turnseal import TurnSeal
from daemonjob.machinery.cache.frozen import freeze, thaw
from daemonjob.machinery.cache.informer import Handlers, Tombstone
from daemonjob.machinery.cache.store import IndexFunc, Store, meta_namespace_key
from daemonjob.machinery.client.kube import ApiError

__all__ = ["FakeInformer", "FakeJobControl", "Call", "TEST_SEAL_KEY", "api_error", "fake_informers"]

TEST_SEAL_KEY = b"daemonjob-unit-tests-seal-key-32"  # the fakes' turn seal key: tests build sealed Jobs with it


def api_error(status: int, reason: str = "", message: str = "") -> ApiError:
    """An ApiError as the API server would send it (409 AlreadyExists, 422 Invalid, ...)."""
    default_reason = {
        403: "Forbidden",
        404: "NotFound",
        409: "Conflict",
        422: "Invalid",
        429: "TooManyRequests",
        500: "InternalError",
    }.get(status, "")
    return ApiError(status, reason or default_reason, message or f"HTTP {status}")


class FakeInformer:
    """A synced informer whose changes the test delivers with add/update/delete."""

    def __init__(
        self,
        name: str,
        indexers: Mapping[str, IndexFunc] | None = None,
        transform: Callable[[dict[str, Any]], Mapping[str, Any]] | None = None,
    ) -> None:
        self.name = name
        self.store = Store(dict(indexers or {}))
        self.transform = transform
        self.handlers: list[Handlers] = []
        self.started = False
        self.synced = True
        self.error: str | None = None
        self.sync_listeners: list[Callable[[], None]] = []

    def add_handlers(self, handlers: Handlers) -> None:
        self.handlers.append(handlers)

    def start(self) -> None:
        self.started = True

    def stop(self, timeout: float = 5.0) -> None:
        self.started = False

    def has_synced(self) -> bool:
        return self.synced

    def wait_for_sync(self, timeout: float | None = None) -> bool:
        return self.synced

    def sync_error(self) -> str | None:
        return None if self.synced else self.error

    def add_sync_listener(self, listener: Callable[[], None]) -> None:
        self.sync_listeners.append(listener)

    def fail_list(self, error: str) -> None:
        """The first list fails (or fails again) with `error`: not synced, listeners told."""
        self.synced, self.error = False, error
        for listener in self.sync_listeners:
            listener()

    def list_succeeds(self) -> None:
        self.synced, self.error = True, None
        for listener in self.sync_listeners:
            listener()

    def alive(self) -> bool:
        return True

    def _prepare(self, obj: Mapping[str, Any]) -> Any:
        plain = thaw(obj)
        return freeze(self.transform(plain) if self.transform else plain)

    def add(self, obj: Mapping[str, Any]) -> None:
        """Deliver a create (or an update, if the key is cached)."""
        new = self._prepare(obj)
        old = self.store.get(meta_namespace_key(new))
        self.store.update(new)
        for h in self.handlers:
            if old is None and h.on_add:
                h.on_add(new)
            elif old is not None and h.on_update:
                h.on_update(old, new)

    update = add

    def delete(self, key_or_obj: str | Mapping[str, Any], tombstone: bool = False) -> None:
        key = key_or_obj if isinstance(key_or_obj, str) else meta_namespace_key(key_or_obj)
        old = self.store.delete(key)
        if old is None:
            return
        for h in self.handlers:
            if h.on_delete:
                h.on_delete(Tombstone(key, old) if tombstone else old)


def fake_informers(seal: TurnSeal | None = None) -> Informers:
    """The controller's three caches as fakes, with the real indexers and transforms; the Jobs'
    turn records checked with `seal` (default: one on TEST_SEAL_KEY, which tests seal Jobs with)."""
    seal = seal or TurnSeal(TEST_SEAL_KEY)
    return Informers(
        FakeInformer("daemonjobs", indexers=DAEMONJOB_INDEXERS),
        FakeInformer("jobs", indexers=JOB_INDEXERS, transform=functools.partial(job_transform, seal=seal)),
        FakeInformer("nodes", indexers=NODE_INDEXERS, transform=node_transform),
        seal=seal,
    )


@dataclass
class Call:
    verb: str  # create, delete, adopt, status, event, get_job, get_daemonjob
    namespace: str
    name: str
    body: Any = None
    extra: Any = None


@dataclass
class FakeJobControl:
    """Records writes; `errors[(verb, name)]` (or `(verb, "*")`) is raised instead of writing.

    With `jobs` set, created Jobs are kept in `self.objects` and delivered to that informer
    only when the test calls `deliver()`, so "the cache has not caught up" is explicit.
    """

    jobs: FakeInformer | None = None
    errors: dict[tuple[str, str], Exception] = field(default_factory=dict)
    fence: Callable[[], bool] = lambda: True
    calls: list[Call] = field(default_factory=list)
    objects: dict[str, dict[str, Any]] = field(default_factory=dict)  # Jobs the API server holds, by ns/name
    daemonjobs: dict[str, dict[str, Any]] = field(default_factory=dict)  # fresh reads, by ns/name
    pods: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # by label selector
    _pending: list[tuple[str, Any]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def may_write(self) -> bool:
        return self.fence()

    def _maybe_fail(self, verb: str, name: str) -> None:
        exc = self.errors.get((verb, name)) or self.errors.get((verb, "*"))
        if exc is not None:
            raise exc

    def _record(self, verb: str, namespace: str, name: str, body: Any = None, extra: Any = None) -> None:
        with self._lock:
            self.calls.append(Call(verb, namespace, name, body, extra))

    def create_job(self, namespace: str, body: Mapping[str, Any]) -> None:
        name = body["metadata"]["name"]
        self._record("create", namespace, name, body)
        self._maybe_fail("create", name)
        key = f"{namespace}/{name}"
        with self._lock:
            if key in self.objects:
                raise api_error(409, "AlreadyExists", f'jobs.batch "{name}" already exists')
            job = thaw(body)
            job["metadata"].update(namespace=namespace, uid=str(uuid.uuid4()), creationTimestamp="2024-01-01T00:00:00Z")
            self.objects[key] = job
            self._pending.append(("add", job))

    def create_jobs(self, namespace: str, bodies: Sequence[Mapping[str, Any]]) -> list[Exception | None]:
        out: list[Exception | None] = []
        for body in bodies:
            try:
                self.create_job(namespace, body)
            except Exception as exc:
                out.append(exc)
            else:
                out.append(None)
        return out

    def delete_job(self, namespace: str, name: str, uid: str | None, propagation: str = "Foreground") -> None:
        self._record("delete", namespace, name, propagation, uid)
        self._maybe_fail("delete", name)
        key = f"{namespace}/{name}"
        with self._lock:
            job = self.objects.pop(key, None)
            if job is None:
                raise api_error(404, "NotFound", f'jobs.batch "{name}" not found')
            self._pending.append(("delete", job))

    def get_job(self, namespace: str, name: str) -> Mapping[str, Any]:
        self._record("get_job", namespace, name)
        with self._lock:
            job = self.objects.get(f"{namespace}/{name}")
        if job is None:
            raise api_error(404, "NotFound", f'jobs.batch "{name}" not found')
        return job

    def _patched(self, namespace: str, name: str, job_uid: str) -> dict[str, Any]:
        """The Job a patch with a uid precondition applies to, as the API server checks it."""
        job = self.objects.get(f"{namespace}/{name}")
        if job is None:
            raise api_error(404)
        if job["metadata"].get("uid") != job_uid:
            raise api_error(422, "Invalid", "metadata.uid: Invalid value: field is immutable")
        return job

    def adopt_job(self, namespace: str, name: str, job_uid: str, owner: Mapping[str, Any]) -> None:
        self._record("adopt", namespace, name, dict(owner), job_uid)
        self._maybe_fail("adopt", name)
        with self._lock:
            job = self._patched(namespace, name, job_uid)
            refs = [r for r in job["metadata"].get("ownerReferences") or () if r.get("uid") != owner.get("uid")]
            if any(r.get("controller") for r in refs):
                raise api_error(
                    422,
                    "Invalid",
                    "metadata.ownerReferences: Invalid value: Only one reference can have Controller set to true",
                )
            job["metadata"]["ownerReferences"] = [*refs, dict(owner)]  # merged by uid, as the API server does
            self._pending.append(("add", job))

    def relabel_job(
        self, namespace: str, name: str, job_uid: str, labels: Mapping[str, str], annotations: Mapping[str, str]
    ) -> None:
        self._record("relabel", namespace, name, {**labels, **annotations}, job_uid)
        self._maybe_fail("relabel", name)
        with self._lock:
            job = self._patched(namespace, name, job_uid)
            job["metadata"]["labels"] = {**(job["metadata"].get("labels") or {}), **labels}
            job["metadata"]["annotations"] = {**(job["metadata"].get("annotations") or {}), **annotations}
            self._pending.append(("add", job))

    def list_pods(self, namespace: str, label_selector: str) -> list[Mapping[str, Any]]:
        self._record("list_pods", namespace, label_selector)
        self._maybe_fail("list_pods", label_selector)
        return list(self.pods.get(label_selector, ()))

    def patch_job(self, namespace: str, name: str, job_uid: str, patch: Mapping[str, Any]) -> None:
        self._record("patch_job", namespace, name, thaw(patch), job_uid)
        self._maybe_fail("patch_job", name)
        with self._lock:
            job = self._patched(namespace, name, job_uid)
            meta = patch.get("metadata") or {}
            job["metadata"]["annotations"] = {
                **(job["metadata"].get("annotations") or {}),
                **(meta.get("annotations") or {}),
            }
            job["spec"] = {**(job.get("spec") or {}), **(patch.get("spec") or {})}
            self._pending.append(("add", job))

    def get_daemonjob(self, namespace: str, name: str) -> Mapping[str, Any]:
        self._record("get_daemonjob", namespace, name)
        dj = self.daemonjobs.get(f"{namespace}/{name}")
        if dj is None:
            raise api_error(404)
        return dj

    def patch_status(self, namespace: str, name: str, status: Mapping[str, Any], resource_version: str | None) -> None:
        self._record("status", namespace, name, thaw(status), resource_version)
        self._maybe_fail("status", name)

    def record_event(self, obj: Mapping[str, Any], type_: str, reason: str, message: str) -> None:
        self._record("event", obj["metadata"].get("namespace", ""), obj["metadata"]["name"], (type_, reason), message)

    # -- for tests ---------------------------------------------------------------------------
    def put_job(self, job: Mapping[str, Any]) -> None:
        """A Job that exists in the API server already (made by someone else, or orphaned)."""
        meta = job["metadata"]
        with self._lock:
            self.objects[f"{meta['namespace']}/{meta['name']}"] = thaw(job)

    def deliver(self) -> None:
        """Let the cache catch up with every write so far."""
        with self._lock:
            pending, self._pending = self._pending, []
        if self.jobs is None:
            return
        for op, job in pending:
            if op == "add":
                self.jobs.add(job)
            else:
                self.jobs.delete(job)

    def events(self, reason: str) -> list[str]:
        """The messages of the Events recorded with this reason."""
        return [c.extra for c in self.of("event") if c.body[1] == reason]

    def of(self, verb: str) -> list[Call]:
        with self._lock:
            return [c for c in self.calls if c.verb == verb]

    def reset(self) -> None:
        with self._lock:
            self.calls.clear()
