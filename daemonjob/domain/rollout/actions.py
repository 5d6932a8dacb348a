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

Of the turns taken, at most `room` create a Job in this pass: the controller's bound on
creates the Job watch has not shown yet (its create back-pressure). The others are not
waiting on the rollout's rules, only on the watch, so they count as `capped`, not waiting;
cutting them here spares naming and building the Jobs of tens of thousands of nodes in
each pass only for the act layer to hold them back.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from daemonjob.domain.jobs.changes import CreateJob
from daemonjob.domain.rollout.gating import Gating
from daemonjob.domain.rollout.turns import Actions, Turn
from daemonjob.domain.spec.revision import Revision, job_name

__all__ = ["Origin", "choose_actions"]

# While the API server keeps rejecting creates, try one node per reconcile, not all.
STALLED_CREATE_PROBES = 1


@dataclass(frozen=True, slots=True)
class Origin:
    """What every Job created in one decision is made of: they travel together to each create."""

    dj: Mapping[str, Any]
    revision: Revision
    run: str | None = None  # the current run, which the created Jobs carry
    template: Mapping[str, Any] | None = None  # spec.jobTemplate as read, their bodies' template


def choose_actions(origin: Origin, gate: Gating, room: int | None = None) -> Actions:
    """From the turns the gates let through (`gate.turns`, within `gate.slots`, maxParallel),
    the creates of Jobs made of `origin` (at most `room`; None: no bound) and the deletes."""
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
    # the turns taken: those that replace a running Job (deletes first), those that create
    replaced: Sequence[Turn]
    started: Sequence[Turn]
    if gate.blocked:
        replaced, started = (), ()
    elif gate.probing:
        replaced, started = (), starting[: min(STALLED_CREATE_PROBES, len(starting) if free is None else free)]
    elif slots is None:
        replaced, started = replacing, starting  # the plan's lists, read only: no copy of every node
        deletes.extend(extra_old)
    else:
        # replacing turns first, each in the slot its running Job holds, never more of them than
        # the limit leaves beside the other running nodes; then creates in free slots
        others = held - len(replacing)  # running nodes whose Job stays
        replaced, started = replacing[: max(0, slots - others)], starting[: max(0, slots - held)]
        deletes.extend(extra_old)
    if gate.limit is not None and len(replaced) + len(started) > gate.limit:
        replaced = replaced[: gate.limit]
        started = started[: gate.limit - len(replaced)]
        out.limited = True
    out.waiting_turns = len(replacing) + len(starting) - len(replaced) - len(started)
    if room is not None and len(started) > room:
        out.capped = len(started) - max(0, room)
        started = started[: max(0, room)]
    for turn in replaced:
        deletes.extend(turn.replace)
    dj_name = (dj.get("metadata") or {}).get("name") or ""
    out.creates = [
        CreateJob(
            turn.node,
            job_name(dj_name, turn.node, revision.name, run),
            revision.name,
            dj,
            run,
            revision.template_hash,
            template=template,
        )
        for turn in started
    ]
    deletes.sort(key=lambda d: (d.node or "", d.name))
    out.deletes = deletes
    return out
