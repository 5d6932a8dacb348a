"""The act step of a pass: carry out a decision, as far as it can be carried out.

Deletes that must come first (older revisions and runs at their node's turn, Jobs of
deleted nodes), then creates, then history handed to its own cleaner, so cleaning up never
delays a run. Creates of a Job name freed moments ago wait (NameHolds). Every action is
attempted; what the API server says is kept (Troubles) for the next decision, and Events
say what was done.
"""

from __future__ import annotations

import dataclasses
from contextlib import nullcontext
from daemonjob.controller.act import Act, error_message, names_shown
from daemonjob.controller.expectations import NameHolds
from daemonjob.controller.history import HistoryCleaner
from daemonjob.controller.jobcontrol import JobControl, NotLeader
from daemonjob.controller.observe import Observation
from daemonjob.controller.troubles import Troubles
from daemonjob.domain.conditions import JOB_REJECTED
from daemonjob.domain.decide import Decision
from daemonjob.domain.plan import HISTORY
from daemonjob.machinery.workqueue import RateLimitingQueue

__all__ = ["Carry"]


class Carry:
    def __init__(self, act: Act, control: JobControl, *, history: HistoryCleaner, name_holds: NameHolds,
                 troubles: Troubles, queue: RateLimitingQueue) -> None:
        self.act = act
        self.control = control
        self.history = history
        self.name_holds = name_holds
        self.troubles = troubles
        self.queue = queue

    def carry(self, seen: Observation, decision: Decision) -> list[Exception]:
        """Carry out `decision`; the errors of what failed (the rest was done)."""
        decision = self._without_held_names(seen, decision)
        errors = self._delete(seen, decision) + self._create(seen, decision)
        self._clean_history(seen, decision)
        return errors

    def _without_held_names(self, seen: Observation, decision: Decision) -> Decision:
        """The decision without creates of names a delete freed moments ago; the key is
        requeued for when the first of them may be reused."""
        held = {c.name: left for c in decision.creates if (left := self.name_holds.held(seen.uid, c.name)) is not None}
        if not held:
            return decision
        seen.log.debug("job names freed moments ago, created later", jobs=sorted(held)[:5],
                       wait_seconds=round(min(held.values()), 2))
        self.queue.add_after(seen.key, min(held.values()))
        return dataclasses.replace(decision, creates=[c for c in decision.creates if c.name not in held])

    def _delete(self, seen: Observation, decision: Decision) -> list[Exception]:
        """Deletes that come before creates (old revisions, old runs, deleted nodes), with expectations."""
        deletes = [d for d in decision.deletes if d.reason != HISTORY]
        outcome = self.act.delete_jobs(seen.uid, seen.namespace, deletes)
        done: dict[str, list[str]] = {}
        for d in outcome.deleted:
            done.setdefault(d.reason, []).append(d.node or d.name)
        for reason, nodes in done.items():
            seen.log.info("deleted jobs", reason=reason, count=len(nodes))
            self._event(seen, "Normal", "SuccessfulDelete", f"Deleted {len(nodes)} Job(s) ({reason}): {names_shown(nodes)}")
        errors = [e for _, e in outcome.failed]
        fenced = [e for e in errors if isinstance(e, NotLeader)]
        if fenced:
            raise fenced[0]
        if outcome.failed:
            failed_names = [d.name for d, _ in outcome.failed]
            seen.log.warning("deleting jobs failed", count=len(failed_names), error=error_message(errors[0]))
            self._event(seen, "Warning", "FailedDelete", f"Error deleting {len(failed_names)} Job(s) "
                        f"({names_shown(failed_names)}): {error_message(errors[0])}")
        return errors

    def _create(self, seen: Observation, decision: Decision) -> list[Exception]:
        uid, generation = seen.uid, seen.generation
        with self.history.creates_first() if decision.creates else nullcontext():
            outcome = self.act.create_jobs(uid, seen.namespace, decision.creates)
        revision = decision.status.get("currentRevision")
        if outcome.created:
            nodes = [c.node for c in outcome.created]
            seen.log.info("created jobs", count=len(nodes), revision=revision)
            self._event(seen, "Normal", "SuccessfulCreate",
                        f"Created {len(nodes)} Job(s) for revision {revision}: {names_shown(nodes)}")
        if outcome.existed:
            found = self.act.resolve_existing(seen.dj, outcome.existed, seen.owner)
            if found:
                seen.log.warning("job name conflict", count=len(found), first=found[0].job)
                self.troubles.add_conflicts(uid, found)
        if isinstance(outcome.error, NotLeader):
            raise outcome.error
        self.troubles.note_rejections(uid, generation, outcome)
        if outcome.error is None or outcome.created:
            self.troubles.unstall(uid)  # creates go through: any refusal is of some nodes only
        if outcome.error is None:
            return []
        message = error_message(outcome.error)
        failed_node = outcome.failed[0][0].node if outcome.failed else None
        self._event(seen, "Warning", "FailedCreate", f"Error creating Job for node {failed_node}: {message}")
        if outcome.rejected is not None:
            seen.log.warning("the API server rejected the Job", node=failed_node, error=message)
            if not outcome.created:  # nothing went through: probe once per retry until something does
                self.troubles.stall(uid, generation, JOB_REJECTED,
                                    f"the API server rejected the Job of node {failed_node}: {message}")
        return [outcome.error]

    def _clean_history(self, seen: Observation, decision: Decision) -> None:
        """After the creates, at the cleaner's own pace: old runs never delay the next one."""
        history = [d for d in decision.deletes if d.reason == HISTORY]
        if not history:
            return
        queued = self.history.submit(seen.namespace, history)
        if queued:
            seen.log.info("deleting jobs", reason=HISTORY, count=len(queued))
            self._event(seen, "Normal", "SuccessfulDelete", f"Deleting {len(queued)} finished Job(s) beyond "
                        f"historyLimit: {names_shown([d.node or d.name for d in queued])}")

    def _event(self, seen: Observation, type_: str, reason: str, message: str) -> None:
        self.control.record_event(seen.dj, type_, reason, message)
