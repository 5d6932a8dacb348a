"""The nodes' turns the actions are chosen from (`Turns`), and the creates and deletes chosen (`Actions`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from daemonjob.domain.jobs.changes import CreateJob, DeleteJob

__all__ = ["Turn", "Turns", "Actions"]


@dataclass(frozen=True, slots=True)
class Turn:
    """An eligible node that needs the current revision (and run): a create, or first `replace`
    (deletes of its running Job of an older revision, or of another run under Replace)."""

    node: str
    replace: tuple[DeleteJob, ...] = ()


@dataclass(slots=True)
class Actions:
    creates: list[CreateJob] = field(default_factory=list)
    deletes: list[DeleteJob] = field(default_factory=list)
    free_slots: int | None = None  # None: no maxParallel
    waiting_turns: int = 0  # nodes whose turn did not come in this decision
    limited: bool = False  # Gating.limit kept turns back that the slots would have let through
    capped: int = 0  # creates the pass's room (create back-pressure) left to a later pass


@dataclass(frozen=True, slots=True)
class Turns:
    """What actions are chosen from (`Plan.turns`): the turns in the order nodes take them
    (`replacing` first delete a node's running older Job, `starting` create), the deletes
    that are always safe (NodeGone, History), running older Jobs on nodes that already have
    their current Job (`extra_old`), and the slots already held."""

    replacing: Sequence[Turn]
    starting: Sequence[Turn]
    always: Sequence[DeleteJob]
    extra_old: Sequence[DeleteJob]
    held: int
    refused: Mapping[str, str] | None = None  # nodes the API server refused that still need their Job
