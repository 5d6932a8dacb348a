"""Adoption, as the DaemonSet controller's ControllerRefManager: orphans made for a DaemonJob
are adopted, Jobs it controls whose identity was edited away are claimed back, and Job names
another owner holds are reported as conflicts.

The adopt step of a pass runs before its decision and writes to the API server, as the
DaemonSet controller adopts while it gathers its pods; the act step calls `resolve_existing`
when a create meets a name that already exists. Events are returned, never posted here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from daemonjob.controller.passes.conflict import Conflict
from daemonjob.controller.passes.observe import Observation
from daemonjob.controller.passes.troubles import Troubles
from daemonjob.controller.runtime.jobcontrol import JobControl
from daemonjob.domain.jobs.changes import CreateJob
from daemonjob.domain.jobs.owners import controller_ref
from daemonjob.domain.shared.apinames import (
    ANNOTATION_NODE,
    LABEL_ATTEMPT,
    LABEL_NAME,
    LABEL_REVISION,
    LABEL_RUN,
    LABEL_TEMPLATE_HASH,
)
from daemonjob.domain.shared.events import WARNING, EventSpec
from daemonjob.machinery.client.kube import ApiError

__all__ = ["Adopted", "Adoption", "Conflict", "adoptable", "EVENT_JOB_RELABELLED"]

EVENT_JOB_RELABELLED = "JobRelabelled"
_IDENTITY_LABELS = (LABEL_NAME, LABEL_REVISION, LABEL_RUN, LABEL_TEMPLATE_HASH, LABEL_ATTEMPT)

Obj = Mapping[str, Any]


@dataclass(slots=True)
class Adopted:
    """What an adoption changed: Jobs adopted (as they now stand), name conflicts still standing
    or newly found, and the Events to post."""

    jobs: list[Obj] = field(default_factory=list)
    conflicts: list[Conflict] = field(default_factory=list)
    events: list[EventSpec] = field(default_factory=list)


def adoptable(job: Obj, dj_name: str) -> bool:
    """An orphan made for this DaemonJob: its name label, a node annotation, no controller."""
    meta = job.get("metadata") or {}
    if meta.get("deletionTimestamp") or controller_ref(job) is not None:
        return False
    return (meta.get("labels") or {}).get(LABEL_NAME) == dj_name and bool(
        (meta.get("annotations") or {}).get(ANNOTATION_NODE)
    )


class Adoption:
    def __init__(self, control: JobControl) -> None:
        self.control = control

    def gather(self, observed: Observation, orphans: Sequence[Obj], troubles: Troubles) -> Adopted:
        """The adopt step of a pass: adopt this DaemonJob's orphans and read known name conflicts
        afresh (not while the cache is behind its own writes): the Jobs adopted, for the kept
        plan, and the Events."""
        if observed.wait is not None:
            return Adopted()
        adopted = Adopted(self.adopt(observed.dj, orphans, observed.owner))
        known = troubles.conflicts(observed.uid)
        if known:
            rechecked = self.recheck(observed.dj, known, observed.owner)
            adopted.events = rechecked.events
            troubles.set_conflicts(observed.uid, tuple(rechecked.conflicts))
        return adopted

    def adopt(self, dj: Obj, jobs: Sequence[Obj], owner: Obj) -> list[Obj]:
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
        adopted: list[Obj] = []
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

    def resolve_existing(self, dj: Obj, existed: Sequence[CreateJob], owner: Obj) -> Adopted:
        """After AlreadyExists: adopt what may be adopted, claim back what is ours, report what
        belongs to another (the conflicts)."""
        meta = dj["metadata"]
        out = Adopted()
        orphans: list[Obj] = []
        for c in existed:
            try:
                job = self.control.get_job(meta["namespace"], c.name)
            except ApiError as exc:
                if exc.not_found:
                    continue  # deleted since: the next pass creates it
                raise
            ref = controller_ref(job)
            if ref is not None and ref.get("uid") == meta.get("uid"):
                out.events.extend(self.claim_back(dj, job, c))  # ours: the cache lags, or lost sight of it
                continue
            if ref is None and adoptable(job, meta["name"]):
                orphans.append(job)
                continue
            holder = f"{ref.get('kind')}/{ref.get('name')}" if ref else "no controller (labels do not match)"
            out.conflicts.append(Conflict(c.node, c.name, holder))
        if orphans:
            out.jobs = self.adopt(dj, orphans, owner)
        return out

    def recheck(self, dj: Obj, known: Sequence[Conflict], owner: Obj) -> Adopted:
        """Conflicts known from earlier passes, each Job read afresh (rare, and few): the ones
        still standing; a freed name may have been adopted or claimed back meanwhile."""
        if not known:
            return Adopted()
        return self.resolve_existing(dj, [CreateJob(c.node, c.job, "", dj) for c in known], owner)

    def claim_back(self, dj: Obj, job: Obj, wanted: CreateJob) -> list[EventSpec]:
        """A Job we control whose identity labels or node annotation were edited away.

        The Job cache selects on the name label, so such a Job vanishes from it, and every
        pass would try to create it again and meet AlreadyExists. Put the identity back (it
        comes back to the cache) and say so in an Event; an intact Job is only cache lag.
        """
        if not wanted.revision:
            return []
        body = wanted.body["metadata"]
        jmeta = job.get("metadata") or {}
        labels = {k: body["labels"][k] for k in _IDENTITY_LABELS if k in body["labels"]}
        annotations = {ANNOTATION_NODE: body["annotations"][ANNOTATION_NODE]}
        have_labels, have_annotations = jmeta.get("labels") or {}, jmeta.get("annotations") or {}
        if (
            all(have_labels.get(k) == v for k, v in labels.items())
            and have_annotations.get(ANNOTATION_NODE) == annotations[ANNOTATION_NODE]
        ):
            return []
        try:
            self.control.relabel_job(
                jmeta.get("namespace") or dj["metadata"]["namespace"],
                wanted.name,
                jmeta.get("uid") or "",
                labels,
                annotations,
            )
        except ApiError as exc:
            if exc.not_found or exc.invalid:  # gone, or replaced by a namesake: the next pass sees it
                return []
            raise
        return [
            EventSpec(
                WARNING,
                EVENT_JOB_RELABELLED,
                f"Job {wanted.name} (node {wanted.node}) lost its {LABEL_NAME} label or node annotation, so this "
                "controller could not see it; they were put back. Delete the Job to re-run the node instead",
            )
        ]
