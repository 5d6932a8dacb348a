"""What the API server told the controller about a DaemonJob, kept between its passes.

A generation whose Jobs the API server refuses outright is probed one create per retry; nodes
whose Job was refused while others' were accepted take their turns last; Job names another
owner holds are left out. All keyed by the DaemonJob's uid (the first two by generation, so
an edit of the spec starts afresh) and read by the next pass's decision.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from daemonjob.controller.passes.conflict import Conflict
from daemonjob.controller.passes.outcomes import CreateOutcome
from daemonjob.domain.rollout.inputs import ApiTroubles

__all__ = ["Troubles"]


@dataclass(frozen=True, slots=True)
class _Stall:
    generation: int
    reason: str
    message: str


class Troubles:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stalled: dict[str, _Stall] = {}
        self._rejected: dict[str, tuple[int, dict[str, str]]] = {}  # generation, node -> refusal, oldest first
        self._conflicts: dict[str, tuple[Conflict, ...]] = {}

    def of(self, uid: str, generation: int) -> ApiTroubles:
        """What a decision of this generation reads of them."""
        with self._lock:
            stall = self._stalled.get(uid)
            rejected = self._rejected.get(uid)
            conflicts = self._conflicts.get(uid, ())
            return ApiTroubles(
                (stall.reason, stall.message) if stall is not None and stall.generation == generation else None,
                dict(rejected[1]) if rejected is not None and rejected[0] == generation else None,
                {c.node: c.text for c in conflicts} if conflicts else None,
            )

    def stall(self, uid: str, generation: int, reason: str, message: str) -> None:
        with self._lock:
            self._stalled[uid] = _Stall(generation, reason, message)

    def unstall(self, uid: str) -> None:
        with self._lock:
            self._stalled.pop(uid, None)

    def note_rejections(self, uid: str, generation: int, outcome: CreateOutcome) -> None:
        """Nodes whose create was refused, oldest refusal first; a node leaves once its Job is created."""
        created = {c.node for c in outcome.created}
        with self._lock:
            known_generation, rejected = self._rejected.get(uid, (generation, {}))
            if known_generation != generation:
                rejected = {}
            rejected = {n: m for n, m in rejected.items() if n not in created}
            for node, message in outcome.rejected_nodes().items():
                rejected.pop(node, None)
                rejected[node] = message  # to the end: the next retry of refused nodes tries another first
            if rejected:
                self._rejected[uid] = (generation, rejected)
            else:
                self._rejected.pop(uid, None)

    def conflicts(self, uid: str) -> tuple[Conflict, ...]:
        with self._lock:
            return self._conflicts.get(uid, ())

    def set_conflicts(self, uid: str, conflicts: tuple[Conflict, ...]) -> None:
        with self._lock:
            if conflicts:
                self._conflicts[uid] = conflicts
            else:
                self._conflicts.pop(uid, None)

    def add_conflicts(self, uid: str, found: list[Conflict]) -> None:
        with self._lock:
            known = {c.node: c for c in self._conflicts.get(uid, ())}
            known.update({c.node: c for c in found})
            self._conflicts[uid] = tuple(sorted(known.values(), key=lambda c: c.node))

    def forget(self, uid: str) -> None:
        with self._lock:
            self._stalled.pop(uid, None)
            self._rejected.pop(uid, None)
            self._conflicts.pop(uid, None)
