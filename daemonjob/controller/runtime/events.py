"""Kubernetes Events about DaemonJobs, posted off the reconcile path, and the texts they share.

Workers only enqueue; one thread posts. Repeats of the same (object, reason, message) within
a window are dropped, in the spirit of client-go's event correlator, so a DaemonJob stuck on
a bad template does not write an Event per retry.
"""

from __future__ import annotations

import queue
import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import structlog
from cachetools import TTLCache

from daemonjob.controller.runtime.fence import Fence, NotLeader, always, as_fence
from daemonjob.domain.shared.apinames import API_VERSION, KIND
from daemonjob.domain.shared.messages import event_message
from daemonjob.domain.shared.timestamps import format_time
from daemonjob.machinery.client.kube import ApiError, Kube, path_for
from daemonjob.machinery.process.clock import Clock, RealClock

log = structlog.get_logger("daemonjob.controller.runtime.events")
COMPONENT = "daemonjob-controller"
DEDUP_WINDOW = 600.0
MAX_QUEUED = 10_000
EVENT_NAMES_SHOWN = 5


def names_shown(names: Sequence[str]) -> str:
    """A short list for an Event: the first few names and how many more."""
    shown = ", ".join(names[:EVENT_NAMES_SHOWN])
    more = len(names) - EVENT_NAMES_SHOWN
    return shown + (f" (+{more} more)" if more > 0 else "")


def error_message(exc: BaseException) -> str:
    """What the API server said (its Status message), else the error's text."""
    return exc.message if isinstance(exc, ApiError) else str(exc)


class EventRecorder:
    def __init__(
        self, kube: Kube, host: str = "", *, clock: Clock | None = None, fence: Fence | Callable[[], bool] = always
    ):
        self.kube = kube
        self.host = host
        self.clock = clock or RealClock()
        self.fence = as_fence(fence)  # checked again when posting: the queue may outlive leadership
        self._queue: queue.Queue[dict[str, Any] | None] = queue.Queue(MAX_QUEUED)
        self._seen: TTLCache[tuple[str, str, str], bool] = TTLCache(maxsize=100_000, ttl=DEDUP_WINDOW)
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="event-recorder", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        try:
            self._queue.put_nowait(None)
        except queue.Full:
            pass
        self._thread.join(timeout)

    def event(self, obj: Mapping[str, Any], type_: str, reason: str, message: str) -> None:
        message = event_message(message)  # cut first: the dedup key holds it for the window too
        meta = obj["metadata"]
        key = (meta.get("uid", ""), reason, message)
        with self._lock:
            if key in self._seen:
                return
            self._seen[key] = True
        now = format_time(self.clock.wall())
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": f"{meta['name']}.{uuid.uuid4().hex[:16]}", "namespace": meta["namespace"]},
            "involvedObject": {
                "apiVersion": obj.get("apiVersion", API_VERSION),
                "kind": obj.get("kind", KIND),
                "name": meta["name"],
                "namespace": meta["namespace"],
                "uid": meta.get("uid", ""),
                "resourceVersion": meta.get("resourceVersion", ""),
            },
            "type": type_,
            "reason": reason,
            "message": message,
            "source": {"component": COMPONENT, "host": self.host},
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
            "reportingComponent": COMPONENT,
            "reportingInstance": self.host,
        }
        try:
            self._queue.put_nowait(body)
        except queue.Full:
            log.warning("event dropped: queue full", reason=reason)

    def _run(self) -> None:
        while True:
            body = self._queue.get()
            if body is None:
                return
            try:
                with self.fence.writing("Event") as fenced:
                    self.kube.create(path_for("v1", "events", body["metadata"]["namespace"]), body, **fenced)
            except NotLeader:
                continue
            except ApiError as exc:
                if not exc.not_found:  # namespace being deleted
                    log.warning("event not recorded", reason=body["reason"], error=str(exc))
            except Exception as exc:  # connection trouble: events are best effort
                log.warning("event not recorded", reason=body["reason"], error=str(exc))
