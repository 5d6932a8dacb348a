"""What the act layer learned of each draining node, for the next decision of its DaemonJob.

Kept in memory only: after a restart the first look at a node's pods tells it again (its
Node record says a drain is under way, and since when, so the timeout still counts from the
cordon). Keyed by DaemonJob uid, as the other per-DaemonJob memories are.

Beside the progress, the pods a drain is for: the uids its first look found on the node. A
drain waits for those to go, as kubectl drain waits for the pods it evicted, so a pod that
arrives later (a replacement that tolerates the cordon) is neither evicted nor waited for.

And the drain outcomes this controller wrote, until its node cache shows them: a pass that
reads the cache before the release's watch event arrives does not find the timeout again.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable
from dataclasses import dataclass

from daemonjob.domain.nodework.maintenance import DrainProgress
from daemonjob.domain.shared.noderecord import DrainOutcome

__all__ = ["KeptDrains"]


@dataclass(slots=True)
class _KeptDrain:
    progress: DrainProgress
    announced: str | None = None  # the blocking reason last said in an Event (said again only when it changes)


class KeptDrains:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_uid: dict[str, dict[str, _KeptDrain]] = {}
        # DaemonJob uid -> node -> (the cordon they were found after, their uids)
        self._pods: dict[str, dict[str, tuple[Hashable, frozenset[str]]]] = {}
        self._outcomes: dict[str, dict[str, DrainOutcome]] = {}  # DaemonJob uid -> node -> written

    def pods_of(self, uid: str, node: str, cordon: Hashable) -> frozenset[str] | None:
        """The uids of the pods the drain of `node` after `cordon` (its record) is for; None
        before its first look, or when the memory is of an earlier cordon of the node."""
        with self._lock:
            known = self._pods.get(uid, {}).get(node)
            return known[1] if known is not None and known[0] == cordon else None

    def keep_pods(self, uid: str, node: str, cordon: Hashable, pods: frozenset[str]) -> None:
        with self._lock:
            self._pods.setdefault(uid, {})[node] = (cordon, pods)

    def wrote_outcome(self, node: str, outcome: DrainOutcome) -> None:
        with self._lock:
            self._outcomes.setdefault(outcome.uid, {})[node] = outcome

    def outcomes(self, uid: str, cached: dict[str, DrainOutcome]) -> dict[str, DrainOutcome]:
        """`cached` (the node cache's) with the outcomes written since; those the cache shows are forgotten."""
        with self._lock:
            written = self._outcomes.get(uid)
            if not written:
                return cached
            for node in [n for n, o in written.items() if cached.get(n) == o]:
                del written[node]
            if not written:
                del self._outcomes[uid]
            return {**cached, **written}

    def of(self, uid: str) -> dict[str, DrainProgress]:
        with self._lock:
            return {node: d.progress for node, d in self._by_uid.get(uid, {}).items()}

    def note(self, uid: str, node: str, progress: DrainProgress) -> bool:
        """Keep `progress`; True when its blocking reason is new (an Event should say it)."""
        with self._lock:
            drains = self._by_uid.setdefault(uid, {})
            known = drains.get(node)
            new = progress.blocked is not None and (known is None or known.announced != progress.blocked)
            drains[node] = _KeptDrain(progress, progress.blocked if new else (known.announced if known else None))
            return new

    def forget_node(self, uid: str, node: str) -> None:
        with self._lock:
            for memory in (self._by_uid, self._pods):
                drains = memory.get(uid)
                if drains is not None:
                    drains.pop(node, None)
                    if not drains:
                        del memory[uid]

    def forget(self, uid: str) -> None:
        with self._lock:
            self._by_uid.pop(uid, None)
            self._pods.pop(uid, None)
            self._outcomes.pop(uid, None)
