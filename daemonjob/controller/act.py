"""The act layer: carry out a decision through a JobControl, as far as it can be carried out.

Like the DaemonSet controller's syncNodes, every action is attempted and the errors are
collected, so one refused delete neither blocks the creates of other nodes nor the status.
Creates go in slow-start batches (1, 2, 4, ...) so a systematic failure costs a handful of
calls. Expectations are raised before each write and lowered when a write fails, so the
next pass waits for the cache only for what really happened.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from daemonjob import defaults
from daemonjob.controller.expectations import Expectations
from daemonjob.controller.jobcontrol import JobControl, NotLeader
from daemonjob.controller.metrics import Metrics
from daemonjob.domain.decide import CreateJob, DeleteJob
from daemonjob.domain.jobs import (
    ANNOTATION_NODE,
    LABEL_NAME,
    LABEL_REVISION,
    LABEL_RUN,
    LABEL_TEMPLATE_HASH,
    controller_ref,
)
from daemonjob.machinery.kube import ApiError

__all__ = ["Act", "CreateOutcome", "DeleteOutcome", "EVENT_NAMES_SHOWN", "names_shown"]

EVENT_NAMES_SHOWN = 5
EVENT_JOB_RELABELLED = "JobRelabelled"
_IDENTITY_LABELS = (LABEL_NAME, LABEL_REVISION, LABEL_RUN, LABEL_TEMPLATE_HASH)
_T = TypeVar("_T")
_R = TypeVar("_R")


def names_shown(names: Sequence[str]) -> str:
    """A short list for an Event: the first few names and how many more."""
    shown = ", ".join(names[:EVENT_NAMES_SHOWN])
    more = len(names) - EVENT_NAMES_SHOWN
    return shown + (f" (+{more} more)" if more > 0 else "")


def error_message(exc: BaseException) -> str:
    return exc.message if isinstance(exc, ApiError) else str(exc)


@dataclass(slots=True)
class DeleteOutcome:
    deleted: list[DeleteJob] = field(default_factory=list)
    failed: list[tuple[DeleteJob, Exception]] = field(default_factory=list)


@dataclass(slots=True)
class CreateOutcome:
    created: list[CreateJob] = field(default_factory=list)
    existed: list[CreateJob] = field(default_factory=list)  # AlreadyExists: to be resolved
    failed: list[tuple[CreateJob, Exception]] = field(default_factory=list)
    error: Exception | None = None  # the first failure; later batches were not sent
    skipped: int = 0  # creates not attempted after the failure

    @property
    def rejected(self) -> ApiError | None:
        """The create the API server refused as invalid: the spec needs a user's change."""
        return self.error if isinstance(self.error, ApiError) and self.error.invalid else None

    def rejected_nodes(self) -> dict[str, str]:
        """Node -> the API server's message, for each create it refused (admission, quota, validation)."""
        return {c.node: error_message(e) for c, e in self.failed if isinstance(e, ApiError) and e.invalid}


@dataclass(frozen=True, slots=True)
class Conflict:
    """A deterministic Job name taken by a Job this DaemonJob may not adopt."""

    node: str
    job: str
    owner: str

    @property
    def text(self) -> str:
        return f"Job {self.job} for node {self.node} exists and is controlled by {self.owner}"


class Act:
    """Writes for one controller; `run_all` maps over a bounded pool of writer threads (WriterPool.map)."""

    def __init__(self, control: JobControl, expectations: Expectations, metrics: Metrics,
                 run_all: Callable[[Callable[[_T], _R], Iterable[_T]], Iterable[_R]]) -> None:
        self.control = control
        self.expectations = expectations
        self.metrics = metrics
        self._map = run_all

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

        for d, error in zip(deletes, self._map(delete, deletes)):
            if error is None:
                outcome.deleted.append(d)
            else:
                outcome.failed.append((d, error))
        return outcome

    # -- creates -------------------------------------------------------------------------
    def create_jobs(self, uid: str, namespace: str, creates: Sequence[CreateJob]) -> CreateOutcome:
        """Slow-start batches; stop at the first failure or as soon as writing is not allowed."""
        outcome = CreateOutcome()
        remaining = list(creates)
        batch = defaults.SLOW_START_INITIAL_BATCH

        def create(c: CreateJob) -> Exception | bool:
            """True when created, False when the name already existed, else the error."""
            if not self.control.may_write():  # abandon the rest of a batch at once
                self.expectations.creation_observed(uid, c.name)
                return NotLeader("not the leader: Job create not sent")
            try:
                self.control.create_job(namespace, c.body)
            except ApiError as exc:
                self.expectations.creation_observed(uid, c.name)
                return False if exc.already_exists else exc
            except Exception as exc:
                self.expectations.creation_observed(uid, c.name)
                return exc
            self.metrics.jobs_created.inc()
            return True

        while remaining and outcome.error is None:
            chunk, remaining = remaining[:batch], remaining[batch:]
            self.expectations.expect_creations(uid, [c.name for c in chunk])
            for c, result in zip(chunk, self._map(create, chunk)):
                if result is True:
                    outcome.created.append(c)
                elif result is False:
                    outcome.existed.append(c)
                elif isinstance(result, Exception):
                    outcome.failed.append((c, result))
                    outcome.error = outcome.error or result
            batch *= 2
        outcome.skipped = len(remaining)
        if isinstance(outcome.error, ApiError):
            self.metrics.job_create_errors.inc()
        return outcome

    # -- adoption (the DaemonSet controller's ControllerRefManager) ----------------------
    def adopt(self, dj: Mapping[str, Any], jobs: Sequence[Mapping[str, Any]],
              owner: Mapping[str, Any]) -> list[Mapping[str, Any]]:
        """Adopt orphans that carry this DaemonJob's label and a node annotation.

        A fresh read first confirms the DaemonJob still has this uid and is not being
        deleted, so a Job is never adopted by a namesake or a DaemonJob on its way out.
        Returns the Jobs adopted, as they now stand.
        """
        meta = dj["metadata"]
        orphans = [j for j in jobs if adoptable(j, meta["name"])]
        if not orphans:
            return []
        fresh = self.control.get_daemonjob(meta["namespace"], meta["name"])
        fmeta = fresh.get("metadata") or {}
        if fmeta.get("uid") != meta.get("uid") or fmeta.get("deletionTimestamp"):
            return []
        adopted: list[Mapping[str, Any]] = []
        for job in orphans:
            jmeta = job["metadata"]
            try:
                self.control.adopt_job(meta["namespace"], jmeta["name"], jmeta["uid"], owner)
            except ApiError as exc:
                if exc.not_found or exc.conflict or exc.invalid:  # gone, or replaced by a namesake
                    continue
                raise
            others = [r for r in jmeta.get("ownerReferences") or () if r.get("uid") != owner.get("uid")]
            adopted.append({**job, "metadata": {**jmeta, "ownerReferences": [*others, dict(owner)]}})
        return adopted

    def resolve_existing(self, dj: Mapping[str, Any], existed: Sequence[CreateJob],
                         owner: Mapping[str, Any]) -> list[Conflict]:
        """After AlreadyExists: adopt what may be adopted, report what belongs to another."""
        meta = dj["metadata"]
        conflicts: list[Conflict] = []
        orphans: list[Mapping[str, Any]] = []
        for c in existed:
            try:
                job = self.control.get_job(meta["namespace"], c.name)
            except ApiError as exc:
                if exc.not_found:
                    continue  # deleted since: the next pass creates it
                raise
            ref = controller_ref(job)
            if ref is not None and ref.get("uid") == meta.get("uid"):
                self._claim_back(dj, job, c)  # ours: the cache lags, or lost sight of it
                continue
            if ref is None and adoptable(job, meta["name"]):
                orphans.append(job)
                continue
            holder = f"{ref.get('kind')}/{ref.get('name')}" if ref else "no controller (labels do not match)"
            conflicts.append(Conflict(c.node, c.name, holder))
        if orphans:
            self.adopt(dj, orphans, owner)
        return conflicts

    def _claim_back(self, dj: Mapping[str, Any], job: Mapping[str, Any], wanted: CreateJob) -> None:
        """A Job we control whose identity labels or node annotation were edited away.

        The Job cache selects on the name label, so such a Job vanishes from it, and every
        pass would try to create it again and meet AlreadyExists. Put the identity back (it
        comes back to the cache) and say so in an Event; an intact Job is only cache lag.
        """
        if not wanted.revision:
            return
        body = wanted.body["metadata"]
        jmeta = job.get("metadata") or {}
        labels = {k: body["labels"][k] for k in _IDENTITY_LABELS if k in body["labels"]}
        annotations = {ANNOTATION_NODE: body["annotations"][ANNOTATION_NODE]}
        have_labels, have_annotations = jmeta.get("labels") or {}, jmeta.get("annotations") or {}
        if (all(have_labels.get(k) == v for k, v in labels.items())
                and have_annotations.get(ANNOTATION_NODE) == annotations[ANNOTATION_NODE]):
            return
        try:
            self.control.relabel_job(jmeta.get("namespace") or dj["metadata"]["namespace"], wanted.name,
                                     jmeta.get("uid") or "", labels, annotations)
        except ApiError as exc:
            if exc.not_found or exc.invalid:  # gone, or replaced by a namesake: the next pass sees it
                return
            raise
        self.control.record_event(
            dj, "Warning", EVENT_JOB_RELABELLED,
            f"Job {wanted.name} (node {wanted.node}) lost its {LABEL_NAME} label or node annotation, so this "
            "controller could not see it; they were put back. Delete the Job to re-run the node instead")

    # -- status --------------------------------------------------------------------------
    def write_status(self, dj: Mapping[str, Any], old: Mapping[str, Any], status: Mapping[str, Any]) -> bool:
        """Patch only a changed status, guarded by the resourceVersion it was computed from."""
        if old == status:
            return False
        patch = {**{k: None for k in old if k not in status}, **status}
        meta = dj["metadata"]
        try:
            self.control.patch_status(meta["namespace"], meta["name"], patch, meta.get("resourceVersion"))
        except ApiError as exc:
            if exc.not_found:
                return False
            raise
        return True


def adoptable(job: Mapping[str, Any], dj_name: str) -> bool:
    """An orphan made for this DaemonJob: its name label, a node annotation, no controller."""
    meta = job.get("metadata") or {}
    if meta.get("deletionTimestamp") or controller_ref(job) is not None:
        return False
    return ((meta.get("labels") or {}).get(LABEL_NAME) == dj_name
            and bool((meta.get("annotations") or {}).get(ANNOTATION_NODE)))
