"""A watch on one DaemonJob's Jobs that records what rollout limits bound: how many were
active at once (overall, per node, per revision) and every Job created per (node, revision).

Read from the API server, never from the controller under test, so tests of the
controller (and of two replicas of it) can hold it to `maxParallel` and to "one Job per
node and revision".
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Self

from daemonjob.machinery.client.kube import Kube, path_for
from daemonjob.testing.follow import Follower

__all__ = [
    "Created",
    "JobWatcher",
    "condition",
    "is_true",
    "job_active",
    "job_finished",
    "job_node",
    "job_revision",
    "job_run",
]

LABEL_NAME = "daemonjob.io/name"
LABEL_REVISION = "daemonjob.io/revision"
LABEL_RUN = "daemonjob.io/run"
LABEL_TEMPLATE_HASH = "daemonjob.io/template-hash"
ANNOTATION_NODE = "daemonjob.io/node"


# -- reading objects --------------------------------------------------------------------------
def condition(obj: Mapping[str, Any] | None, kind: str) -> dict[str, Any]:
    for cond in ((obj or {}).get("status") or {}).get("conditions") or ():
        if cond.get("type") == kind:
            return cond
    return {}


def is_true(obj: Mapping[str, Any] | None, kind: str) -> bool:
    return condition(obj, kind).get("status") == "True"


def job_node(job: Mapping[str, Any]) -> str:
    return (job["metadata"].get("annotations") or {}).get(ANNOTATION_NODE, "")


def job_revision(job: Mapping[str, Any]) -> str:
    return (job["metadata"].get("labels") or {}).get(LABEL_REVISION, "")


def job_run(job: Mapping[str, Any]) -> str:
    return (job["metadata"].get("labels") or {}).get(LABEL_RUN, "")


def job_finished(job: Mapping[str, Any]) -> str | None:
    """ "Complete" or "Failed" once the Job controller says so, else None."""
    for kind in ("Complete", "Failed"):
        if is_true(job, kind):
            return kind
    return None


def job_active(job: Mapping[str, Any]) -> bool:
    """Not finished. A Job being deleted still counts: its pod may run until it is gone."""
    return job_finished(job) is None


# -- a Job watch recording the peaks rollout limits bound ---------------------------------------
@dataclass
class Created:
    node: str
    revision: str
    name: str
    uid: str
    run: str = ""


@dataclass
class JobWatcher:
    """Follows one DaemonJob's Jobs through a watch (every change, in resourceVersion order).

    Records creation order, the maximum number of active Jobs at once (overall, per node,
    and nodes with one), every Job ever created per (node, revision) and every deletion of
    a Job seen. A Job counts as active from its creation until it finishes or is gone: one
    being deleted may still have a running pod.
    """

    kube: Kube
    namespace: str
    name: str
    created: list[Created] = field(default_factory=list)
    max_active: int = 0
    max_active_nodes: int = 0
    deleted: list[Created] = field(default_factory=list)
    max_active_per_node: dict[str, int] = field(default_factory=dict)
    max_active_per_revision: dict[str, int] = field(default_factory=dict)
    _jobs: dict[str, dict[str, Any]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _follower: Follower | None = None

    @property
    def relists(self) -> int:
        return self._follower.relists if self._follower is not None else 0

    @property
    def path(self) -> str:
        return path_for("batch/v1", "jobs", self.namespace)

    @property
    def selector(self) -> str:
        """The DaemonJob's Jobs; a `name` with commas (a,b) follows several DaemonJobs' Jobs at once."""
        return f"{LABEL_NAME} in ({self.name})" if "," in self.name else f"{LABEL_NAME}={self.name}"

    def start(self) -> Self:
        self._follower = Follower(
            self.kube,
            self.path,
            {"labelSelector": self.selector},
            self._lock,
            self._list,
            self._on_event,
            f"watch-{self.name}",
        )
        self._follower.start()
        return self

    def stop(self) -> None:
        if self._follower is not None:
            self._follower.stop()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # what it saw
    def creation_order(self) -> list[str]:
        with self._lock:
            return [c.node for c in self.created]

    def uids_per_node_revision(self) -> dict[tuple[str, str], list[str]]:
        out: dict[tuple[str, str], list[str]] = {}
        with self._lock:
            for c in self.created:
                out.setdefault((c.node, c.revision), []).append(c.uid)
        return out

    def uids_per_node_run(self) -> dict[tuple[str, str], list[str]]:
        out: dict[tuple[str, str], list[str]] = {}
        with self._lock:
            for c in self.created:
                out.setdefault((c.node, c.run), []).append(c.uid)
        return out

    def summary(self) -> dict[str, Any]:
        with self._lock:
            return {
                "created": [(c.node, c.revision) for c in self.created],
                "max_active": self.max_active,
                "max_active_nodes": self.max_active_nodes,
                "deleted": [(c.node, c.revision) for c in self.deleted],
                "max_active_per_node": dict(self.max_active_per_node),
                "max_active_per_revision": dict(self.max_active_per_revision),
                "relists": self.relists,
                "errors": self._follower.errors[-3:] if self._follower is not None else [],
            }

    # internals
    def _list(self) -> str:
        """Called with the lock held: the Jobs as listed now; the list's resourceVersion."""
        listed = self.kube.get(self.path, labelSelector=self.selector)
        seen = {j["metadata"]["uid"]: j for j in listed["items"]}
        for uid in list(self._jobs):
            if uid not in seen:
                del self._jobs[uid]
        for job in seen.values():
            self._observe(job)
        return listed["metadata"]["resourceVersion"]

    def _on_event(self, kind: str, job: dict[str, Any]) -> None:
        if kind in ("ADDED", "MODIFIED"):
            self._observe(job)
        elif kind == "DELETED":
            self._observe(job, deleted=True)

    def _observe(self, job: dict[str, Any], deleted: bool = False) -> None:
        uid = job["metadata"]["uid"]
        if deleted:
            if self._jobs.pop(uid, None) is not None:
                self.deleted.append(
                    Created(job_node(job), job_revision(job), job["metadata"]["name"], uid, job_run(job))
                )
        else:
            if uid not in self._jobs and all(c.uid != uid for c in self.created):
                self.created.append(
                    Created(job_node(job), job_revision(job), job["metadata"]["name"], uid, job_run(job))
                )
            self._jobs[uid] = job
        per_node: dict[str, int] = {}
        per_revision: dict[str, int] = {}
        for j in self._jobs.values():
            if job_active(j):
                per_node[job_node(j)] = per_node.get(job_node(j), 0) + 1
                per_revision[job_revision(j)] = per_revision.get(job_revision(j), 0) + 1
        self.max_active = max(self.max_active, sum(per_node.values()))
        self.max_active_nodes = max(self.max_active_nodes, len(per_node))
        for node, count in per_node.items():
            self.max_active_per_node[node] = max(self.max_active_per_node.get(node, 0), count)
        for revision, count in per_revision.items():
            self.max_active_per_revision[revision] = max(self.max_active_per_revision.get(revision, 0), count)
