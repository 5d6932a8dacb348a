"""The Jobs each DaemonJob was seen to lose, until its status records the attempt after them.

A deleted Job leaves nothing in the cluster, so its attempt is kept here from the delete
event until the decision has recorded the node's next attempt in the status (the next
pass, see daemonjob/domain/jobs/attempts.py); past that, the status is the record and this is
only kept a while longer (`ttl`) for a status write that failed.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any

from cachetools import TTLCache

from daemonjob import defaults
from daemonjob.domain.jobs.attempts import DeletedJobs
from daemonjob.domain.jobs.contract import job_attempt, job_node, job_revision, job_run
from daemonjob.machinery.process.clock import RealClock

__all__ = ["DeletedJobsSeen"]

Rollout = tuple[str | None, str | None]  # (revision, run)


class DeletedJobsSeen:
    """Per DaemonJob uid and rollout: node -> the highest attempt of its Jobs seen deleted."""

    def __init__(
        self,
        ttl: float = defaults.DELETED_JOBS_TTL,
        timer: Callable[[], float] = RealClock().now,
        maxsize: int = 100_000,
    ) -> None:
        self._ttl, self._timer, self._maxsize = ttl, timer, maxsize
        self._by_uid: dict[str, dict[Rollout, TTLCache[str, int]]] = {}
        self._lock = threading.Lock()

    def note(self, uid: str, job: Mapping[str, Any]) -> None:
        """`job` as the cache last held it. It may still exist: a Job whose name label was
        edited away leaves the cache's selector as if deleted; the act layer reads it before
        creating the next attempt and claims it back (act.py)."""
        node = job_node(job)
        if not uid or not node:
            return
        rollout = (job_revision(job), job_run(job))
        attempt = job_attempt(job)
        with self._lock:
            rollouts = self._by_uid.setdefault(uid, {})
            nodes = rollouts.get(rollout)
            if nodes is None:
                nodes = rollouts[rollout] = TTLCache(maxsize=self._maxsize, ttl=self._ttl, timer=self._timer)
            nodes[node] = max(attempt, nodes.get(node, attempt))

    def of(self, uid: str) -> DeletedJobs:
        """What the decision of `uid` reads; rollouts whose notes all expired are dropped."""
        with self._lock:
            rollouts = self._by_uid.get(uid)
            if not rollouts:
                return DeletedJobs()
            out = {}
            for rollout, nodes in list(rollouts.items()):
                nodes.expire()
                if nodes:
                    out[rollout] = dict(nodes)
                else:
                    del rollouts[rollout]
            if not rollouts:
                del self._by_uid[uid]
        return DeletedJobs(out)

    def forget(self, uid: str) -> None:
        with self._lock:
            self._by_uid.pop(uid, None)
