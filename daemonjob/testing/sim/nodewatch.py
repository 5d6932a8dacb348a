"""A watch on a set of Nodes that records what node maintenance must bound: how many were
cordoned under a DaemonJob's record at once, and every cordon and uncordon of each node; and
what a reboot must: each node's boot ID changes (reboots), the most nodes not Ready at once,
and the uncordons of a node not Ready or not rebooted yet.

Read from the API server (every change, in resourceVersion order), never from the
controller under test.
"""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Self

from daemonjob.domain.shared.noderecord import ANNOTATION_MAINTENANCE
from daemonjob.machinery.client.kube import Kube, path_for
from daemonjob.testing.follow import Follower

__all__ = ["NodeWatcher"]


def _cordoned(node: dict[str, Any]) -> bool:
    return bool((node.get("spec") or {}).get("unschedulable"))


def _boot_id(node: dict[str, Any]) -> str:
    return str(((node.get("status") or {}).get("nodeInfo") or {}).get("bootID") or "")


def _ready(node: dict[str, Any]) -> bool:
    conds = (node.get("status") or {}).get("conditions") or ()
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conds)


def _recorded(node: dict[str, Any]) -> bool:
    return ANNOTATION_MAINTENANCE in ((node.get("metadata") or {}).get("annotations") or {})


@dataclass
class NodeWatcher:
    kube: Kube
    selector: str  # a label selector of the nodes followed
    cordons: Counter[str] = field(default_factory=Counter)  # node -> schedulable -> unschedulable transitions
    uncordons: Counter[str] = field(default_factory=Counter)
    max_held: int = 0  # most nodes at once carrying a record and cordoned
    cordon_order: list[str] = field(default_factory=list)  # the nodes in the order they were cordoned
    boots: Counter[str] = field(default_factory=Counter)  # node -> changes of its boot ID
    max_down: int = 0  # most nodes at once not Ready
    uncordoned_not_ready: list[str] = field(default_factory=list)  # nodes uncordoned while not Ready
    uncordoned_not_rebooted: list[str] = field(default_factory=list)  # nodes uncordoned before any reboot
    _nodes: dict[str, dict[str, Any]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _follower: Follower | None = None

    def __enter__(self) -> Self:
        self._follower = Follower(
            self.kube,
            path_for("v1", "nodes"),
            {"labelSelector": self.selector},
            self._lock,
            self._list,
            self._on_event,
            "watch-nodes",
        )
        self._follower.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._follower is not None:
            self._follower.stop()

    def held_now(self) -> list[str]:
        with self._lock:
            return sorted(n for n, node in self._nodes.items() if _recorded(node) and _cordoned(node))

    def summary(self) -> dict[str, Any]:
        with self._lock:
            return {
                "cordons": dict(self.cordons),
                "uncordons": dict(self.uncordons),
                "max_held": self.max_held,
                "boots": dict(self.boots),
                "max_down": self.max_down,
            }

    def _list(self) -> str:
        """Called with the lock held: the nodes as listed now (a relist counts no transition it missed)."""
        listed = self.kube.get(path_for("v1", "nodes"), labelSelector=self.selector)
        for node in listed["items"]:
            self._observe(node)
        return listed["metadata"]["resourceVersion"]

    def _on_event(self, kind: str, node: dict[str, Any]) -> None:
        if kind in ("ADDED", "MODIFIED"):
            self._observe(node)
        elif kind == "DELETED":
            self._nodes.pop(node["metadata"]["name"], None)

    def _observe(self, node: dict[str, Any]) -> None:
        name = node["metadata"]["name"]
        old = self._nodes.get(name)
        if old is not None and not _cordoned(old) and _cordoned(node):
            self.cordons[name] += 1
            self.cordon_order.append(name)
        if old is not None and _boot_id(old) != _boot_id(node):
            self.boots[name] += 1
        if old is not None and _cordoned(old) and not _cordoned(node):
            self.uncordons[name] += 1
            if not _ready(node):
                self.uncordoned_not_ready.append(name)
            if not self.boots[name]:
                self.uncordoned_not_rebooted.append(name)
        self._nodes[name] = node
        self.max_held = max(self.max_held, sum(1 for n in self._nodes.values() if _recorded(n) and _cordoned(n)))
        self.max_down = max(self.max_down, sum(1 for n in self._nodes.values() if not _ready(n)))
