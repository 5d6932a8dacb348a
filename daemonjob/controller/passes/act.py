"""The act layer: carry out a decision through a JobControl, as far as it can be carried out.

Deletes that must come first (older revisions and runs at their node's turn, Jobs of
deleted nodes), then creates, then history handed to its own cleaner, so cleaning up never
delays a run. Like the DaemonSet controller's syncNodes, every action is attempted and the
errors are collected, so one refused delete neither blocks the creates of other nodes nor
the status. Creates go in slow-start batches (1, 2, 4, ...) so a systematic failure costs a
handful of calls; a node's next attempt goes only once the Job it follows is really gone.
Expectations are raised before each write and lowered when a write fails, so the next pass
waits for the cache only for what really happened. What the API server says is kept (Troubles) for the
next decision; the Events that say what was done are returned for the report step.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from typing import Any

from daemonjob import defaults
from daemonjob.controller.metrics.metrics import Metrics
from daemonjob.controller.order.claims import NodeClaims
from daemonjob.controller.passes.adoption import Adoption
from daemonjob.controller.passes.history import HistoryCleaner
from daemonjob.controller.passes.observe import Observation
from daemonjob.controller.passes.outcomes import Acted, CreateOutcome, DeleteOutcome
from daemonjob.controller.passes.startchecks import StartChecks
from daemonjob.controller.passes.troubles import Troubles
from daemonjob.controller.runtime.backpressure import CreateBackPressure
from daemonjob.controller.runtime.events import error_message, names_shown
from daemonjob.controller.runtime.expectations import Expectations
from daemonjob.controller.runtime.jobcontrol import JobControl, NotLeader
from daemonjob.domain.decision.decide import Decision
from daemonjob.domain.jobs.changes import CreateJob, DeleteJob
from daemonjob.domain.jobs.contract import job_node
from daemonjob.domain.jobs.owners import controller_ref
from daemonjob.domain.rollout.plan import HISTORY, RECORDED
from daemonjob.domain.rollout.stalls import JOB_REJECTED
from daemonjob.domain.shared.events import NORMAL, WARNING, EventSpec
from daemonjob.domain.spec.revision import job_name
from daemonjob.machinery.client.kube import ApiError
from daemonjob.machinery.client.writers import MapAll

__all__ = ["Act"]

_CLEANED = (HISTORY, RECORDED)  # deletes left to the history cleaner: paced, background, never before recorded


class Act:
    """Writes for one controller; `run_all` maps over a bounded pool of writer threads (WriterPool.map)."""

    def __init__(
        self,
        control: JobControl,
        expectations: Expectations,
        metrics: Metrics,
        run_all: MapAll,
        *,
        history: HistoryCleaner,
        adoption: Adoption,
        troubles: Troubles,
        claims: NodeClaims | None = None,
        starts: StartChecks | None = None,
        backpressure: CreateBackPressure | None = None,
        parallel: int = defaults.CREATE_CONCURRENCY,
        pipeline: int = defaults.CREATE_PIPELINE,
        seal: Callable[[dict[str, Any]], dict[str, Any]] = lambda body: body,
    ) -> None:
        """`parallel`: the writer threads `run_all` maps over; a batch of more creates than
        that sends up to `pipeline` of them together on one connection. `seal`: a Job body as it is
        sent, its checked turn's boot ID sealed (turnseal.py). `backpressure`: how many creates
        may go while the Job watch is behind this controller's writes; without it, all."""
        self.seal = seal
        self.control = control
        self.parallel, self.pipeline = max(1, parallel), max(1, pipeline)
        self.expectations = expectations
        self.metrics = metrics
        self._map = run_all
        self.history = history
        self.adoption = adoption
        self.troubles = troubles
        self.claims = claims  # an exclusion group's nodes taken by creates not in the cache yet
        self.starts = starts if starts is not None else StartChecks(control)  # spec.startTimeout
        self.backpressure = backpressure

    def carry(self, observed: Observation, decision: Decision) -> Acted:
        """Carry out `decision`: what failed, and what to say."""
        acted = Acted()
        decision = self._without_predecessors_standing(observed, decision, acted)
        if self.claims is not None:
            decision = self.claims.take(observed.key, observed.dj, decision)
        acted.errors = self._delete(observed, decision, acted) + self._create(observed, decision, acted)
        self._clean_history(observed, decision, acted)
        if decision.start_checks and decision.reading is not None:
            acted.events.extend(self.starts.run(observed, decision.start_checks, decision.reading.input.now))
        return acted

    def _without_predecessors_standing(self, observed: Observation, decision: Decision, acted: Acted) -> Decision:
        """The decision without the next attempts whose earlier Job still stands. A Job whose
        name label was edited away leaves the Job cache's selector as if it were deleted; it
        is claimed back under its name (adoption.py) rather than the node run twice. One read
        per re-run node, only in the pass that creates its next attempt."""
        standing: set[str] = set()
        for c in decision.creates:
            if c.follows is None:
                continue
            name = job_name(observed.name, c.node, c.revision, c.run, c.follows)
            earlier = dataclasses.replace(c, name=name, attempt=c.follows, follows=None)
            try:
                job = self.control.get_job(observed.namespace, name)
            except ApiError as exc:
                if exc.not_found:
                    continue
                raise
            ref = controller_ref(job)
            if ref is not None and ref.get("uid") == observed.uid and job_node(job) in (None, c.node):
                acted.events.extend(self.adoption.claim_back(observed.dj, job, earlier))
                standing.add(c.name)
        if not standing:
            return decision
        observed.log.info("the job the cache lost still stands: claimed back", count=len(standing))
        return dataclasses.replace(decision, creates=[c for c in decision.creates if c.name not in standing])

    def _delete(self, observed: Observation, decision: Decision, acted: Acted) -> list[Exception]:
        """Deletes that come before creates (old revisions, old runs, deleted nodes), with expectations."""
        deletes = [d for d in decision.deletes if d.reason not in _CLEANED]
        outcome = self.delete_jobs(observed.uid, observed.namespace, deletes)
        done: dict[str, list[str]] = {}
        for d in outcome.deleted:
            done.setdefault(d.reason, []).append(d.node or d.name)
        for reason, nodes in done.items():
            observed.log.info("deleted jobs", reason=reason, count=len(nodes))
            acted.events.append(
                EventSpec(NORMAL, "SuccessfulDelete", f"Deleted {len(nodes)} Job(s) ({reason}): {names_shown(nodes)}")
            )
        errors = [e for _, e in outcome.failed]
        fenced = [e for e in errors if isinstance(e, NotLeader)]
        if fenced:
            raise fenced[0]
        if outcome.failed:
            failed_names = [d.name for d, _ in outcome.failed]
            observed.log.warning("deleting jobs failed", count=len(failed_names), error=error_message(errors[0]))
            acted.events.append(
                EventSpec(
                    WARNING,
                    "FailedDelete",
                    f"Error deleting {len(failed_names)} Job(s) "
                    f"({names_shown(failed_names)}): {error_message(errors[0])}",
                )
            )
        return errors

    def _create(self, observed: Observation, decision: Decision, acted: Acted) -> list[Exception]:
        uid, generation = observed.uid, observed.generation
        creates = self._admitted(observed, decision.creates, decision.capped)
        acted.held = len(decision.creates) + decision.capped - len(creates)
        with self.history.creates_first() if creates else nullcontext():
            outcome = self.create_jobs(uid, observed.namespace, creates)
        if self.claims is not None:
            self.claims.settle(uid, decision.creates, outcome.created)
        revision = decision.status.get("currentRevision")
        acted.created = len(outcome.created)
        if outcome.created:
            nodes = [c.node for c in outcome.created]
            observed.log.info("created jobs", count=len(nodes), revision=revision)
            acted.events.append(
                EventSpec(
                    NORMAL,
                    "SuccessfulCreate",
                    f"Created {len(nodes)} Job(s) for revision {revision}: {names_shown(nodes)}",
                )
            )
        if outcome.existed:
            resolved = self.adoption.resolve_existing(observed.dj, outcome.existed, observed.owner)
            acted.events.extend(resolved.events)
            found = resolved.conflicts
            if found:
                observed.log.warning("job name conflict", count=len(found), first=found[0].job)
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
        acted.events.append(EventSpec(WARNING, "FailedCreate", f"Error creating Job for node {failed_node}: {message}"))
        if outcome.rejected is not None:
            observed.log.warning("the API server rejected the Job", node=failed_node, error=message)
            if not outcome.created:  # nothing went through: probe once per retry until something does
                self.troubles.stall(
                    uid, generation, JOB_REJECTED, f"the API server rejected the Job of node {failed_node}: {message}"
                )
        return [outcome.error]

    def _admitted(self, observed: Observation, creates: list[CreateJob], capped: int) -> list[CreateJob]:
        """The creates that fit under the bound on creates the Job watch has not shown yet; the
        rest, and the `capped` ones the decision left out for want of room, wait for it to catch
        up (the DaemonJob is queued again then: backpressure.py)."""
        if self.backpressure is None or not (creates or capped):
            return creates
        wanted = len(creates) + capped
        room = self.backpressure.admit(observed.key, wanted, len(creates))
        if room < wanted:
            observed.log.info(
                "creates held: the Job watch is behind this controller's creates",
                held=wanted - room,
                unseen_creates=self.expectations.unseen_creates(),
            )
        return creates[:room]

    def _admitted_sent(self, count: int) -> None:
        if self.backpressure is not None and count:
            self.backpressure.sent(count)

    def _clean_history(self, observed: Observation, decision: Decision, acted: Acted) -> None:
        """After the creates, at the cleaner's own pace: old runs never delay the next one."""
        history = [d for d in decision.deletes if d.reason in _CLEANED]
        if not history:
            return
        queued = self.history.submit(observed.namespace, history, observed.key)
        recorded = [d for d in queued if d.reason == RECORDED]
        if recorded:
            observed.log.info("deleting jobs", reason=RECORDED, count=len(recorded))
            shown = names_shown([d.node or d.name for d in recorded])
            what = f"Deleting {len(recorded)} succeeded Job(s) whose results are recorded: {shown}"
            acted.events.append(EventSpec(NORMAL, "SuccessfulDelete", what))
        queued = [d for d in queued if d.reason == HISTORY]
        if queued:
            observed.log.info("deleting jobs", reason=HISTORY, count=len(queued))
            acted.events.append(
                EventSpec(
                    NORMAL,
                    "SuccessfulDelete",
                    f"Deleting {len(queued)} finished Job(s) "
                    f"beyond historyLimit: {names_shown([d.node or d.name for d in queued])}",
                )
            )

    # -- deletes -------------------------------------------------------------------------
    def delete_jobs(self, uid: str, namespace: str, deletes: Sequence[DeleteJob]) -> DeleteOutcome:
        """Attempt every delete; a 404 or a uid precondition miss means it is already gone."""
        outcome = DeleteOutcome()
        if not deletes:
            return outcome
        self.expectations.expect_deletions(uid, [d.name for d in deletes])

        def delete(d: DeleteJob) -> Exception | None:
            try:
                self.control.delete_job(namespace, d.name, d.uid)
            except ApiError as exc:
                self.expectations.deletion_observed(uid, d.name)
                return None if exc.not_found or exc.conflict else exc
            except Exception as exc:  # NotLeader, connection errors: nothing changed
                self.expectations.deletion_observed(uid, d.name)
                return exc
            self.metrics.jobs_deleted.labels(d.reason).inc()
            return None

        for d, error in zip(deletes, self._map(delete, deletes), strict=True):
            if error is None:
                outcome.deleted.append(d)
            else:
                outcome.failed.append((d, error))
        return outcome

    # -- creates -------------------------------------------------------------------------
    def create_jobs(self, uid: str, namespace: str, creates: Sequence[CreateJob]) -> CreateOutcome:
        """Slow-start batches; stop at the first failure or as soon as writing is not allowed.
        `creates` were admitted by the back-pressure: each counts there until its expectation is raised."""
        outcome = CreateOutcome()
        remaining = list(creates)
        batch = defaults.SLOW_START_INITIAL_BATCH

        def create(group: list[CreateJob]) -> list[Exception | bool]:
            """Each one True when created, False when the name already existed, else the error."""
            if not self.control.may_write():  # abandon the rest of a batch at once
                errors: list[Exception | None] = [NotLeader("not the leader: Job create not sent")] * len(group)
            else:
                errors = self.control.create_jobs(namespace, [self.seal(c.body) for c in group])
            results: list[Exception | bool] = []
            for c, error in zip(group, errors, strict=True):
                if error is None:
                    self.expectations.create_answered(uid, c.name)
                    self.metrics.jobs_created.inc()
                    if c.attempt:
                        self.metrics.jobs_rerun.inc()
                    results.append(True)
                    continue
                self.expectations.creation_cancelled(uid, c.name)
                results.append(False if isinstance(error, ApiError) and error.already_exists else error)
            return results

        try:
            while remaining and outcome.error is None:
                chunk, remaining = remaining[:batch], remaining[batch:]
                self.expectations.expect_creations(uid, [c.name for c in chunk])
                self._admitted_sent(len(chunk))  # counted as unseen now
                # Together only when there are more creates than threads: a batch keeps its parallelism.
                size = min(self.pipeline, -(-len(chunk) // self.parallel))
                groups = [chunk[i : i + size] for i in range(0, len(chunk), size)]
                for group, results in zip(groups, self._map(create, groups), strict=True):
                    for c, result in zip(group, results, strict=True):
                        if result is True:
                            outcome.created.append(c)
                        elif result is False:
                            outcome.existed.append(c)
                        elif isinstance(result, Exception):
                            outcome.failed.append((c, result))
                            outcome.error = outcome.error or result
                batch *= 2
        finally:
            self._admitted_sent(len(remaining))  # never sent
        outcome.skipped = len(remaining)
        if isinstance(outcome.error, ApiError):
            self.metrics.job_create_errors.inc()
        return outcome
