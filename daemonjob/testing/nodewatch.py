"""A watch on a set of Nodes that records what node maintenance must bound: how many were
cordoned under a DaemonJob's record at once, and every cordon and uncordon of each node.

Read from the API server (every change, in resourceVersion order), never from the
controller under test.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Self

from daemonjob.domain.maintenance import ANNOTATION_MAINTENANCE
from daemonjob.machinery.kube import Kube, WatchStream, path_for

__all__ = ["NodeWatcher"]


def _cordoned(node: dict[str, Any]) -> bool:
    return bool((node.get("spec") or {}).get("unschedulable"))


def _recorded(node: dict[str, Any]) -> bool:
    return ANNOTATION_MAINTENANCE in ((node.get("metadata") or {}).get("annotations") or {})


@dataclass
class NodeWatcher:
    kube: Kube
    selector: str  # a label selector of the nodes followed
    cordons: Counter[str] = field(default_factory=Counter)  # node -> schedulable -> unschedulable transitions
    uncordons: Counter[str] = field(default_factory=Counter)
    max_held: int = 0  # most nodes at once carrying a record and cordoned
    _nodes: dict[str, dict[str, Any]] = field(default_factory=dict)
    _rv: str = ""
    _stop: threading.Event = field(default_factory=threading.Event)
    _stream: WatchStream | None = None
    _thread: threading.Thread | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __enter__(self) -> Self:
        listed = self.kube.get(path_for("v1", "nodes"), labelSelector=self.selector)
        for node in listed["items"]:
            self._nodes[node["metadata"]["name"]] = node
        self._rv = listed["metadata"]["resourceVersion"]
        self._thread = threading.Thread(target=self._run, name="watch-nodes", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        with self._lock:
            stream = self._stream
        if stream is not None:
            stream.close()
        if self._thread is not None:
            self._thread.join(10)

    def held_now(self) -> list[str]:
        with self._lock:
            return sorted(n for n, node in self._nodes.items() if _recorded(node) and _cordoned(node))

    def cordoned_now(self) -> list[str]:
        with self._lock:
            return sorted(n for n, node in self._nodes.items() if _cordoned(node))

    def summary(self) -> dict[str, Any]:
        with self._lock:
            return {"cordons": dict(self.cordons), "uncordons": dict(self.uncordons), "max_held": self.max_held}

    def _observe(self, node: dict[str, Any]) -> None:
        name = node["metadata"]["name"]
        old = self._nodes.get(name)
        if old is not None and not _cordoned(old) and _cordoned(node):
            self.cordons[name] += 1
        if old is not None and _cordoned(old) and not _cordoned(node):
            self.uncordons[name] += 1
        self._nodes[name] = node
        self.max_held = max(self.max_held, sum(1 for n in self._nodes.values() if _recorded(n) and _cordoned(n)))

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                stream = self.kube.watch(path_for("v1", "nodes"), {"labelSelector": self.selector,
                                                                   "resourceVersion": self._rv,
                                                                   "timeoutSeconds": 120}, read_timeout=150)
                with self._lock:
                    self._stream = stream
                if self._stop.is_set():
                    stream.close()
                    return
                for event in stream:
                    kind, obj = event.get("type"), event.get("object") or {}
                    if kind == "ERROR":
                        raise RuntimeError(f"node watch ended: {obj.get('message')}")
                    with self._lock:
                        self._rv = obj["metadata"]["resourceVersion"]
                        if kind in ("ADDED", "MODIFIED"):
                            self._observe(obj)
                        elif kind == "DELETED":
                            self._nodes.pop(obj["metadata"]["name"], None)
            except Exception:  # noqa: BLE001 (connection trouble: re-watch from the last resourceVersion)
                if self._stop.is_set():
                    return
                time.sleep(0.2)
