"""Where each DaemonJob's Jobs succeeded, by revision and run: what spec.after reads.

A DaemonJob that comes after another starts on a node only once the other has a succeeded
Job there of its current revision and run (domain/order.py). Reading that from the other's
Jobs costs one look at each of them, in every pass of every DaemonJob after it; kept here
from the Job events instead (the router hands over each change before it wakes anyone), it
costs a set copy. The sets follow the Jobs cache: an event changes at most one node's entry.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from daemonjob.domain.jobs import SUCCEEDED, daemonjob_ref, job_node, job_revision, job_run, job_state, owner_uid

__all__ = ["SucceededNodes"]

Obj = Mapping[str, Any]
_Entry = tuple[str, str, str | None, str]  # (owner uid, revision, run, node)


def _entry(job: Obj | None) -> _Entry | None:
    """Where `job` counts as succeeded, if it does (the same rule as a full read of the Jobs)."""
    if job is None or daemonjob_ref(job) is None or job_state(job) != SUCCEEDED:
        return None
    node, revision = job_node(job), job_revision(job)
    if not node or not revision:
        return None
    return owner_uid(job), revision, job_run(job), node


class SucceededNodes:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        # owner uid -> (revision, run) -> node -> succeeded Jobs there (one, unless names were reused)
        self._nodes: dict[str, dict[tuple[str, str | None], dict[str, int]]] = {}

    def job_changed(self, old: Obj | None, new: Obj | None) -> None:
        """A Job event: `old` before (None: added), `new` after (None: deleted)."""
        before, after = _entry(old), _entry(new)
        if before == after:
            return
        with self._lock:
            if before is not None:
                uid, revision, run, node = before
                counts = self._nodes.get(uid, {}).get((revision, run))
                if counts is not None and node in counts:
                    counts[node] -= 1
                    if not counts[node]:
                        del counts[node]
                        if not counts:
                            del self._nodes[uid][(revision, run)]
                            if not self._nodes[uid]:
                                del self._nodes[uid]
            if after is not None:
                uid, revision, run, node = after
                counts = self._nodes.setdefault(uid, {}).setdefault((revision, run), {})
                counts[node] = counts.get(node, 0) + 1

    def nodes(self, uid: str, revision: str | None, run: str | None) -> frozenset[str]:
        """The nodes where the DaemonJob `uid` has a succeeded Job of this revision and run."""
        if not revision:
            return frozenset()
        with self._lock:
            return frozenset(self._nodes.get(uid, {}).get((revision, run), ()))

    def has(self, uid: str, revision: str | None, run: str | None, node: str) -> bool:
        if not revision:
            return False
        with self._lock:
            return node in self._nodes.get(uid, {}).get((revision, run), ())
