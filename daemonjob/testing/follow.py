"""The watch loop the test bed's watchers share: list, then follow every change in
resourceVersion order, relisting after 410 Gone and re-watching after connection trouble."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from daemonjob.machinery.client.kube import Kube, WatchStream

__all__ = ["Follower"]


class Follower:
    """Calls `relist()` once, then `observe(kind, obj)` for each event, from a thread of its own,
    until `stop()`. Both are called with `lock` held."""

    def __init__(
        self,
        kube: Kube,
        path: str,
        params: Mapping[str, Any],
        lock: threading.Lock,
        relist: Callable[[], str],
        observe: Callable[[str, dict[str, Any]], None],
        name: str,
    ) -> None:
        self.kube, self.path, self.params, self.lock = kube, path, dict(params), lock
        self._relist, self._observe, self.name = relist, observe, name
        self.relists = 0
        self.errors: list[str] = []
        self._rv = ""
        self._stop = threading.Event()
        self._stream: WatchStream | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        with self.lock:
            self._rv = self._relist()
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        with self.lock:
            stream = self._stream
        if stream is not None:
            stream.close()
        if self._thread is not None:
            self._thread.join(10)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                stream = self.kube.watch(
                    self.path,
                    {**self.params, "resourceVersion": self._rv, "allowWatchBookmarks": True, "timeoutSeconds": 120},
                    read_timeout=150,
                )
                with self.lock:
                    self._stream = stream
                if self._stop.is_set():
                    stream.close()
                    return
                for event in stream:
                    kind, obj = event.get("type") or "", event.get("object") or {}
                    if kind == "ERROR":
                        if obj.get("code") == 410:
                            self.relists += 1
                            with self.lock:
                                self._rv = self._relist()
                        break
                    with self.lock:
                        self._rv = obj["metadata"]["resourceVersion"]
                        if kind != "BOOKMARK":
                            self._observe(kind, obj)
            except Exception as exc:
                if self._stop.is_set():
                    return
                self.errors.append(repr(exc))
                time.sleep(0.2)
