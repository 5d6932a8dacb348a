"""Step 3 of a decision: which Jobs to create and delete, within the rollout's slots.

The slot rule (`maxParallel`, read as "at most N nodes disrupted at a time"): every node
with a Job of this DaemonJob that may still run holds a slot, whatever that Job's
revision or run, as the Job controller counts every active pod against parallelism and a
DaemonSet rolling update counts old and new unavailable pods against maxUnavailable. An
active Job, or one being deleted before it finished; an active Job on a deleted node holds
its slot until its delete is issued. A node whose running Job of an older revision (or of
another run, under Replace) is replaced reuses the slot that Job holds, so replacing never
takes a second slot; those replacements come first (never more of them than the limit
leaves beside the other running nodes, so running work is not torn down before its
node's turn), and every other turn takes a free slot, in node-name order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from daemonjob.domain.jobs.contract import build_job
from daemonjob.domain.spec.nodeparams import Env
from daemonjob.domain.spec.revision import Revision, job_name

if TYPE_CHECKING:
    from daemonjob.domain.gates.step import Gating

__all__ = ["CreateJob", "DeleteJob", "Turn", "Turns", "Actions", "Origin", "choose_actions"]

# While the API server keeps rejecting creates, try one node per reconcile, not all.
STALLED_CREATE_PROBES = 1


@dataclass(frozen=True, slots=True)
class CreateJob:
    """A Job to create; its body is built when read, so thousands of creates hold no bodies."""

    node: str
    name: str
    revision: str
    dj: Mapping[str, Any] = field(repr=False, compare=False)
    run: str | None = None
    template_hash: str | None = None
    tolerate_cordon: bool = False  # the node is cordoned for this Job (spec.nodeMaintenance)
    template: Mapping[str, Any] | None = field(default=None, repr=False, compare=False)  # spec.jobTemplate as read
    attempt: int = 0  # above 0: the node's Job re-created after a delete (attempts.py)
    follows: int | None = None  # the attempt of the node's Job the controller saw go, if it did
    node_env: Env = ()  # the node's values of spec.nodeParameters, read when the create was decided
    boot_id: str | None = None  # a checked turn (nodecheck.py): its node's boot ID now, recorded on the Job
    reboot: bool = False  # the Job reboots its node: built to run once (nodecheck.with_reboot_fields)

    @property
    def body(self) -> dict[str, Any]:
        """A fresh Job body on each read (the caller may change it)."""
        return build_job(
            self.dj,
            self.node,
            self.revision,
            self.run,
            self.template_hash,
            self.tolerate_cordon,
            self.template,
            attempt=self.attempt,
            node_env=self.node_env,
            boot_id=self.boot_id,
            reboot=self.reboot,
            name=self.name,
        )


@dataclass(frozen=True, slots=True)
class DeleteJob:
    """`uid` lets the act layer delete with a UID precondition (never a newer namesake)."""

    name: str
    node: str | None
    reason: str
    uid: str | None = None


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


@dataclass(frozen=True, slots=True)
class Origin:
    """What every Job created in one decision is made of: they travel together to each create."""

    dj: Mapping[str, Any]
    revision: Revision
    run: str | None = None  # the current run, which the created Jobs carry
    template: Mapping[str, Any] | None = None  # spec.jobTemplate as read, their bodies' template


def choose_actions(origin: Origin, gate: Gating) -> Actions:
    """From the turns the gates let through (`gate.turns`, within `gate.slots`, maxParallel),
    the creates of Jobs made of `origin` and the deletes."""
    dj, revision, run, template = origin.dj, origin.revision, origin.run, origin.template
    turns, slots = gate.turns, gate.slots
    replacing, starting, always, extra_old, held = (
        turns.replacing,
        turns.starting,
        turns.always,
        turns.extra_old,
        turns.held,
    )
    free = None if slots is None else max(0, slots - held)
    out = Actions(free_slots=free)
    deletes = list(always)
    if gate.blocked:
        chosen: list[Turn] = []
    elif gate.probing:
        chosen = list(starting[: min(STALLED_CREATE_PROBES, len(starting) if free is None else free)])
    elif slots is None:
        chosen = [*replacing, *starting]
        deletes.extend(extra_old)
    else:
        # replacing turns first, each in the slot its running Job holds, never more of them than
        # the limit leaves beside the other running nodes; then creates in free slots
        others = held - len(replacing)  # running nodes whose Job stays
        chosen = [*replacing[: max(0, slots - others)], *starting[: max(0, slots - held)]]
        deletes.extend(extra_old)
    if gate.limit is not None and len(chosen) > gate.limit:
        chosen = chosen[: gate.limit]
        out.limited = True
    dj_name = (dj.get("metadata") or {}).get("name") or ""
    for turn in chosen:
        if turn.replace:
            deletes.extend(turn.replace)
        else:
            out.creates.append(
                CreateJob(
                    turn.node,
                    job_name(dj_name, turn.node, revision.name, run),
                    revision.name,
                    dj,
                    run,
                    revision.template_hash,
                    template=template,
                )
            )
    deletes.sort(key=lambda d: (d.node or "", d.name))
    out.deletes = deletes
    out.waiting_turns = len(replacing) + len(starting) - len(chosen)
    return out
