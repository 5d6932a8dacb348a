"""In-memory stand-ins for what node maintenance and the result recorder write through, for
unit tests (fakes.py holds the informers' and the Jobs').
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from daemonjob.machinery.client.kube import ApiError
from daemonjob.testing.doubles.fakes import api_error

__all__ = ["FakeNodeControl", "NullResultStore"]


class FakeNodeControl:
    """NodeControl on dicts: nodes by name (with a resourceVersion bumped on every write), pods by
    node, evictions refused for the pods named in `refuse` (429, the PDB's cause as the API server
    words it). Records the writes it took."""

    def __init__(
        self, nodes: Mapping[str, dict[str, Any]] | None = None, pods: Mapping[str, list[dict[str, Any]]] | None = None
    ):
        self.nodes = {name: dict(body) for name, body in dict(nodes or {}).items()}
        for body in self.nodes.values():
            body.setdefault("metadata", {}).setdefault("resourceVersion", "1")
        self.pods = {name: list(items) for name, items in dict(pods or {}).items()}
        self.refuse: dict[str, str] = {}  # pod name -> PDB name
        self.evicted: list[str] = []
        self.node_patches: list[tuple[str, dict[str, Any]]] = []
        self.finalizers: list[list[str]] = []
        self.daemonjobs: dict[str, dict[str, Any]] = {}  # namespace/name -> the DaemonJob as the API server has it
        self.node_lists = 0

    def get_node(self, name: str) -> Mapping[str, Any]:
        if name not in self.nodes:
            raise api_error(404, "NotFound")
        return copy.deepcopy(self.nodes[name])

    def list_nodes(self) -> list[Mapping[str, Any]]:
        self.node_lists += 1
        return [copy.deepcopy(n) for n in self.nodes.values()]

    def get_daemonjob(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        found = self.daemonjobs.get(f"{namespace}/{name}")
        return copy.deepcopy(found) if found is not None else None

    def patch_node(self, name: str, patch: Mapping[str, Any], resource_version: str) -> None:
        node = self.nodes[name]
        if node["metadata"]["resourceVersion"] != resource_version:
            raise api_error(409, "Conflict")
        self.node_patches.append((name, copy.deepcopy(dict(patch))))
        for section, values in patch.items():
            target = node.setdefault(section, {})
            for key, value in values.items():
                if isinstance(value, Mapping):
                    sub = target.setdefault(key, {})
                    for k, v in value.items():
                        if v is None:
                            sub.pop(k, None)
                        else:
                            sub[k] = v
                elif value is None:
                    target.pop(key, None)
                else:
                    target[key] = value
        node["metadata"]["resourceVersion"] = str(int(node["metadata"]["resourceVersion"]) + 1)

    def pods_on_node(self, name: str) -> list[Mapping[str, Any]]:
        return list(self.pods.get(name, ()))

    def evict(self, namespace: str, name: str, uid: str | None, grace_period_seconds: int | None) -> None:
        if name in self.refuse:
            pdb = self.refuse[name]
            raise ApiError(
                429,
                "TooManyRequests",
                "Cannot evict pod as it would violate the pod's disruption budget.",
                {
                    "details": {
                        "causes": [
                            {
                                "reason": "DisruptionBudget",
                                "message": f"The disruption budget {pdb} needs 1 healthy pods and has 1 currently",
                            }
                        ]
                    }
                },
            )
        self.evicted.append(f"{namespace}/{name}")
        for items in self.pods.values():
            items[:] = [p for p in items if p["metadata"]["name"] != name]

    def set_finalizers(self, namespace: str, name: str, finalizers: list[str], resource_version: str) -> None:
        self.finalizers.append(list(finalizers))


class NullResultStore:
    """Report storage that takes every write and keeps nothing, and has no pods: the result
    recorder runs as it would, its writes go nowhere."""

    def may_write(self) -> bool:
        return True

    def list_reports(self, namespace: str, daemonjob: str) -> list[Mapping[str, Any]]:
        return []

    def list_pods(self, namespace: str, job_uids: Sequence[str]) -> list[Mapping[str, Any]]:
        return []

    def create_report(self, namespace: str, body: Mapping[str, Any]) -> Mapping[str, Any]:
        return body

    def append(self, namespace: str, name: str, patch: Sequence[Mapping[str, Any]]) -> None:
        pass

    def delete_report(self, namespace: str, name: str) -> None:
        pass
