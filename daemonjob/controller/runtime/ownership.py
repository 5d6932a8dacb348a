"""Which Job events are a DaemonJob's: a Job in another namespace carrying its uid is not.

Owner references are namespace-local in Kubernetes (the garbage collector reports a
cross-namespace one as OwnerRefInvalidNamespace), so a Job is a DaemonJob's only in the
DaemonJob's namespace. The caches already tie Jobs to owners by owner id, "namespace/uid"
(domain.jobs.owner_id), so a pass never reads such a Job. The state fed from Job events
directly (expectations, claims, deleted Jobs, kept-plan marks, where Jobs succeeded, the
result recorder) asks here first: a Job whose controller reference names a uid that a cached
DaemonJob of another namespace has is foreign, ignored, counted once in
daemonjob_foreign_owner_jobs_total and logged once per Job (a bounded memory of those seen).

The question costs one cache read per Job event: the DaemonJob the reference names in the
Job's namespace, its uid compared; the uid index is read only when that does not match.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any

import structlog
from cachetools import TTLCache

from daemonjob import defaults
from daemonjob.controller.runtime.informers import UID_INDEX
from daemonjob.domain.jobs.owners import daemonjob_ref
from daemonjob.machinery.cache.informer import SharedInformer

__all__ = ["ForeignJobs"]

log = structlog.get_logger("daemonjob.ownership")
Obj = Mapping[str, Any]


class ForeignJobs:
    def __init__(
        self,
        daemonjobs: SharedInformer,
        count: Callable[[str], None] = lambda _namespace: None,
        *,
        logged_max: int = defaults.FOREIGN_JOBS_LOGGED_MAX,
        logged_ttl: float = defaults.FOREIGN_JOBS_LOGGED_TTL,
    ) -> None:
        """`count(namespace)`: one more foreign Job seen in `namespace` (the metric)."""
        self._daemonjobs = daemonjobs
        self._count = count
        self._lock = threading.Lock()
        self._seen: TTLCache[str, None] = TTLCache(maxsize=logged_max, ttl=logged_ttl)

    def owner(self, job: Obj) -> str | None:
        """namespace/name of the DaemonJob controlling `job`; None for a Job of no DaemonJob and
        for a foreign one (noted once). A Job whose DaemonJob is not cached anywhere (not listed
        yet, or deleted) keeps its key: the caches' owner ids keep it apart anyway."""
        ref = daemonjob_ref(job)
        if ref is None:
            return None
        meta = job["metadata"]
        namespace, uid = meta.get("namespace") or "", ref.get("uid") or ""
        key = f"{namespace}/{ref.get('name')}"
        dj = self._daemonjobs.store.get(key)
        if dj is not None and dj["metadata"].get("uid") == uid:
            return key  # the common case: its DaemonJob, in its namespace
        owners = [
            d for d in self._daemonjobs.store.by_index(UID_INDEX, uid) if d["metadata"].get("namespace") != namespace
        ]
        if not owners:
            return key
        self._note(meta, namespace, owners[0])
        return None

    def foreign(self, job: Obj) -> bool:
        """Whether `job` carries the uid of a DaemonJob of another namespace (noted once per Job)."""
        return daemonjob_ref(job) is not None and self.owner(job) is None

    def _note(self, meta: Obj, namespace: str, owner: Obj) -> None:
        job_uid = meta.get("uid") or ""
        with self._lock:
            if job_uid in self._seen:
                return
            self._seen[job_uid] = None
        self._count(namespace)
        om = owner["metadata"]
        log.warning(
            "ignoring a Job that carries the uid of a DaemonJob of another namespace (owner references are "
            "namespace-local)",
            namespace=om.get("namespace"),
            name=om.get("name"),
            job=f"{namespace}/{meta.get('name')}",
            job_uid=job_uid,
        )
