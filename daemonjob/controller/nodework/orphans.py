"""The orphan sweep: a node whose maintenance record names a DaemonJob (by uid) that no
longer exists is released, so no node stays held by a DaemonJob that is gone, whatever
removed it (a finalizer removed by hand, a record written by a cordon whose DaemonJob went
before the cache saw it); the drain outcomes such a DaemonJob left on Nodes go too. It reads
the Nodes and the DaemonJobs from the API server itself (a quorum list, a fresh get), never
from the caches that may not have caught up.

It runs at start-up and whenever a DaemonJob is deleted, as one key of the work queue
(`SWEEP_KEY`, so it is never run twice at once and a failure retries with backoff). A node
where a Job of the gone DaemonJob still runs (one orphaned by `--cascade=orphan`) keeps its
record until that Job ends, as the finalizer keeps it: the sweep looks again meanwhile.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import structlog

from daemonjob import defaults
from daemonjob.controller.metrics.metrics import Metrics
from daemonjob.controller.nodework.heldnodes import job_runs_on, split_key
from daemonjob.controller.nodework.nodecontrol import NodeControl
from daemonjob.controller.nodework.recordwrites import forget_outcome
from daemonjob.controller.nodework.work import release_node
from daemonjob.controller.runtime.errors import ReconcileError
from daemonjob.controller.runtime.informers import Informers
from daemonjob.domain.shared.noderecord import NodeRecord, outcomes_of, record_of
from daemonjob.machinery.cache.informer import SharedInformer
from daemonjob.machinery.client.kube import ApiError

__all__ = ["OrphanSweep", "SWEEP_KEY", "orphan_sweep"]

log = structlog.get_logger("daemonjob.controller")

SWEEP_KEY = "~orphaned-node-records"  # a queue key no DaemonJob can have ("~" is not in a name)


class OrphanSweep:
    def __init__(
        self,
        control: NodeControl,
        daemonjobs: SharedInformer,
        jobs: SharedInformer,
        *,
        released: Callable[[], None],
        namespace: str | None = None,
    ) -> None:
        """`released`: counts one orphaned record released; `namespace`: a namespaced
        controller sweeps only the records of its namespace's DaemonJobs."""
        self.control = control
        self.daemonjobs, self.jobs = daemonjobs, jobs
        self.released = released
        self.namespace = namespace
        self._seen: dict[tuple[str, str], bool] = {}  # (namespace/name, uid) -> exists, in this sweep

    def sweep(self) -> float | None:
        """Release every orphaned record; the seconds until a look again when a node is kept
        for a Job still running there (None: nothing kept). Raises what the API server refused."""
        errors: list[Exception] = []
        kept = 0
        self._seen = {}  # asked afresh at each sweep
        for node in self.control.list_nodes():
            name = (node.get("metadata") or {}).get("name") or ""
            try:
                for drained in outcomes_of(node):  # a gone DaemonJob's drain outcomes go with it
                    if self._ours(drained.daemon_job) and not self._exists(drained.daemon_job, drained.uid):
                        forget_outcome(self.control, name, drained)
                record = record_of(node)
                if record is not None:
                    kept += self._one(name, record) == "kept"
            except ApiError as exc:
                errors.append(exc)
        if errors:
            raise ReconcileError(errors)
        return defaults.FINALIZER_RECHECK_INTERVAL if kept else None

    def _ours(self, daemon_job: str) -> bool:
        return self.namespace is None or split_key(daemon_job)[0] == self.namespace

    def _one(self, node: str, record: NodeRecord) -> str:
        namespace, name = split_key(record.daemon_job)
        if not self._ours(record.daemon_job):
            return "not ours"
        if self._exists(record.daemon_job, record.uid):
            return "held"
        if job_runs_on(self.jobs, node, namespace, name):
            log.info("orphaned node record kept while its Job runs", node=node, daemonjob=record.daemon_job)
            return "kept"
        done = release_node(self.control, node, record)
        if done is None:
            return "gone"
        self.released()
        log.warning(
            "orphaned node record released", node=node, daemonjob=record.daemon_job, uid=record.uid, uncordoned=done
        )
        return "released"

    def _exists(self, daemon_job: str, uid: str) -> bool:
        """The record's DaemonJob exists (being deleted counts: its finalizer releases); the
        API server is asked once per DaemonJob and sweep."""
        if _uid(self.daemonjobs.store.get(daemon_job)) == uid:
            return True
        if (daemon_job, uid) not in self._seen:
            self._seen[(daemon_job, uid)] = _uid(self.control.get_daemonjob(*split_key(daemon_job))) == uid
        return self._seen[(daemon_job, uid)]


def _uid(obj: Mapping[str, Any] | None) -> str | None:
    return ((obj or {}).get("metadata") or {}).get("uid")


def orphan_sweep(
    control: NodeControl | None,
    namespaces: frozenset[str],
    informers: Informers,
    metrics: Metrics,
    namespace: str | None,
) -> OrphanSweep | None:
    """The sweep of a controller that writes Nodes for some namespace; None otherwise (a
    controller without node powers could not release what it found)."""
    if control is None or not namespaces:
        return None
    released = metrics.orphaned_records_released.inc
    return OrphanSweep(control, informers.daemonjobs, informers.jobs, released=released, namespace=namespace)
