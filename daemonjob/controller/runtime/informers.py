"""The three caches the controller reads, and how the real ones are built.

The controller takes an `Informers` in its constructor, the way the Kubernetes controllers
take informers from a factory, so unit tests hand it fakes (`daemonjob.testing.doubles.fakes`).
"""

from __future__ import annotations

import functools
import random
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from daemonjob.controller.runtime.jobdecode import decode_job_event
from daemonjob.controller.runtime.transforms import job_transform, node_transform
from daemonjob.controller.runtime.turnseal import TurnSeal
from daemonjob.domain.jobs.contract import ACTIVE, TERMINATING, job_finish_time, job_node, job_state
from daemonjob.domain.jobs.owners import controller_ref, job_owner_id
from daemonjob.domain.shared.apinames import API_VERSION, LABEL_NAME, PLURAL
from daemonjob.domain.shared.noderecord import outcomes_of, record_of
from daemonjob.machinery.cache.informer import Informer, InformerHooks, SharedInformer
from daemonjob.machinery.cache.store import IndexFunc, Tagged
from daemonjob.machinery.client.kube import Kube
from daemonjob.machinery.process.clock import Clock

__all__ = [
    "Informers",
    "MAINTENANCE_INDEX",
    "OUTCOME_INDEX",
    "NODE_INDEXERS",
    "OWNER_INDEX",
    "UID_INDEX",
    "DAEMONJOB_INDEXERS",
    "NODE_INDEX",
    "ORPHAN_INDEX",
    "RUNNING_INDEX",
    "running_index",
    "owner_uid_index",
    "job_node_index",
    "orphan_index",
]

# The Job indexes tie a Job to its DaemonJob by owner id, "namespace/uid" (domain.jobs.owner_id):
# owner references are namespace-local, so a Job in another namespace carrying a DaemonJob's
# uid is indexed under an id no DaemonJob has, and no reader of these indexes ever sees it.
OWNER_INDEX = "owner"  # Jobs by the owner id of the DaemonJob that controls them
NODE_INDEX = "node"  # Jobs by node name, tagged by the owner id of their DaemonJob ("" for none)
RUNNING_INDEX = "running"  # Jobs that may still run, by the owner id of their DaemonJob: the exclusion group reads it
ORPHAN_INDEX = "orphans"  # Jobs with no controller, by namespace/<daemonjob.io/name label>: to adopt
MAINTENANCE_INDEX = "maintenance"  # Nodes by the uid of the DaemonJob whose maintenance record they carry
OUTCOME_INDEX = "drain-outcomes"  # Nodes by the uids of the DaemonJobs whose drain outcome they carry
UID_INDEX = "uid"  # DaemonJobs by uid: whose uid a Job in another namespace carries (ownership.py)

Obj = Mapping[str, Any]


_last_owner: tuple[object, str] = (None, "")  # the Job indexed last, its owner id


def _owner_id(job: Obj) -> str:
    """`job_owner_id`, read once per Job version: the store runs each index on a new version,
    then on the one it replaces, one after the other. Kept by identity (cached Jobs are
    frozen), so a race costs a second read, never a wrong answer."""
    global _last_owner
    last = _last_owner
    if last[0] is job:
        return last[1]
    owner = job_owner_id(job)
    _last_owner = (job, owner)
    return owner


def owner_uid_index(job: Obj) -> list[str]:
    owner = _owner_id(job)
    return [owner] if owner else []


def job_node_index(job: Obj) -> list[tuple[str, str]]:
    """Tagged by owner: a pass reads a node's Jobs of its DaemonJob without reading those of
    every other DaemonJob there (hundreds, with as many DaemonJobs)."""
    node = job_node(job)
    return [(node, _owner_id(job))] if node else []


def running_index(job: Obj) -> list[str]:
    """Owned Jobs that may still run (active, or deleted before they finished): a few per
    DaemonJob, so a group member's running Jobs are read without its finished thousands."""
    owner = _owner_id(job)
    if not owner:
        return []
    state = job_state(job)
    if state == ACTIVE or (state == TERMINATING and job_finish_time(job) is None):
        return [owner]
    return []


def orphan_index(job: Obj) -> list[str]:
    """Orphans only (no controller): the candidates for adoption, a handful at most, so the
    index costs nothing for the thousands of owned Jobs."""
    meta = job.get("metadata") or {}
    name = (meta.get("labels") or {}).get(LABEL_NAME)
    if not name or controller_ref(job) is not None:
        return []
    return [f"{meta.get('namespace', '')}/{name}"]


def maintenance_index(node: Obj) -> list[str]:
    record = record_of(node)
    return [record.uid] if record is not None else []


def outcome_index(node: Obj) -> list[str]:
    return [o.uid for o in outcomes_of(node)]


def uid_index(dj: Obj) -> list[str]:
    uid = (dj.get("metadata") or {}).get("uid")
    return [uid] if uid else []


NODE_INDEXERS = {MAINTENANCE_INDEX: maintenance_index, OUTCOME_INDEX: outcome_index}
DAEMONJOB_INDEXERS: dict[str, IndexFunc] = {UID_INDEX: uid_index}

JOB_INDEXERS: dict[str, IndexFunc] = {
    OWNER_INDEX: owner_uid_index,
    NODE_INDEX: Tagged(job_node_index),
    ORPHAN_INDEX: orphan_index,
    RUNNING_INDEX: running_index,
}


@dataclass(frozen=True)
class Informers:
    """`seal`: what the Job cache's transform verifies a checked turn's records with, and the
    controller seals them with (turnseal.py); None: a key of this process alone."""

    daemonjobs: SharedInformer
    jobs: SharedInformer
    nodes: SharedInformer
    seal: TurnSeal | None = None

    def all(self) -> tuple[SharedInformer, SharedInformer, SharedInformer]:
        """In start order: nodes and Jobs before DaemonJobs, so a first decision sees them."""
        return (self.nodes, self.jobs, self.daemonjobs)

    def start(self) -> None:
        for inf in self.all():
            inf.start()

    def wait_synced(self, timeout: float | None = None) -> bool:
        deadline = None if timeout is None else time.monotonic() + timeout
        for inf in self.all():
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not inf.wait_for_sync(left):
                return False
        return True

    def synced(self) -> bool:
        return all(inf.has_synced() for inf in self.all())

    def stop(self) -> None:
        for inf in self.all():
            inf.stop()

    def dead(self) -> list[str]:
        """The informers whose threads ended."""
        return [inf.name for inf in self.all() if not inf.alive()]

    @classmethod
    def for_kube(
        cls,
        kube: Kube,
        *,
        namespace: str | None = None,
        hooks: InformerHooks | None = None,
        clock: Clock | None = None,
        rng: random.Random | None = None,
        seal: TurnSeal | None = None,
    ) -> Informers:
        seal = seal or TurnSeal.random()
        common: dict[str, Any] = {"hooks": hooks, "clock": clock, "rng": rng}
        return cls(
            daemonjobs=Informer(
                kube, API_VERSION, PLURAL, namespace=namespace, name=PLURAL, indexers=DAEMONJOB_INDEXERS, **common
            ),
            jobs=Informer(
                kube,
                "batch/v1",
                "jobs",
                namespace=namespace,
                label_selector=LABEL_NAME,
                transform=functools.partial(job_transform, seal=seal),
                decode=decode_job_event,
                name="jobs",
                indexers=JOB_INDEXERS,
                **common,
            ),
            nodes=Informer(
                kube, "v1", "nodes", transform=node_transform, name="nodes", indexers=NODE_INDEXERS, **common
            ),
            seal=seal,
        )
