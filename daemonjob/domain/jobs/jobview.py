"""What a decision reads of one Job, parsed once per version of the cached Job."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import Any

from daemonjob.domain.jobs.contract import (
    ACTIVE,
    FAILED,
    job_attempt,
    job_created,
    job_finish_time,
    job_node,
    job_revision,
    job_run,
    job_started,
    job_state,
    job_suspended,
    job_template_hash,
    job_ttl,
)
from daemonjob.domain.jobs.turnverdict import Awaiting, Verdict, turn_state
from daemonjob.domain.shared.apinames import ANNOTATION_BOOT_ID, ANNOTATION_NODE_CHECK
from daemonjob.domain.shared.memo import Memo, no_memo
from daemonjob.domain.shared.timestamps import parse_time

__all__ = ["JOB_VIEW_KEY", "OLDEST", "PLAIN", "JobView", "Rare", "checked_state", "job_view", "node_inputs"]

OLDEST = datetime.min.replace(tzinfo=timezone.utc)


@dataclass(frozen=True, slots=True)
class Rare:
    """The fields of a view that a cached Job almost never sets. Views share one instance of
    the defaults (`PLAIN`), so each of 50,000 cached Jobs' views holds ten slots, not eighteen."""

    ttl: Any = None
    attempt: int = 0
    started: bool = False  # a pod of it ran (jobs.job_started)
    suspended: bool = False  # spec.suspend set by someone else
    began: datetime | None = None  # status.startTime: set when the Job starts, again when resumed
    boot_id: str | None = None  # its node's boot ID when it was created (a checked turn: nodecheck.py)
    verdict: Verdict | None = None  # its node's turn's outcome, once written
    recorded: bool = False  # its result is in the reports (spec.results.deleteSucceededJobs: recorded.py)
    standin: bool = False  # no Job: a recorded success standing for a deleted one


PLAIN = Rare()


@dataclass(frozen=True, slots=True, init=False)
class JobView:
    """What a decision needs of one Job; kept by the memo on a cached Job, so parsed once per version.

    Built with every field by keyword (or the first seven in order); the rarely set ones
    (`Rare`) are read as attributes of the view all the same."""

    name: str
    uid: str | None
    node: str | None
    revision: str | None
    state: str
    created: datetime
    finished: datetime | None
    run: str | None
    template_hash: str | None
    rare: Rare

    def __init__(
        self,
        name: str,
        uid: str | None,
        node: str | None,
        revision: str | None,
        state: str,
        created: datetime,
        finished: datetime | None,
        ttl: Any = None,
        run: str | None = None,
        template_hash: str | None = None,
        attempt: int = 0,
        started: bool = False,
        suspended: bool = False,
        began: datetime | None = None,
        boot_id: str | None = None,
        verdict: Verdict | None = None,
        recorded: bool = False,
        standin: bool = False,
        *,
        rare: Rare | None = None,
    ) -> None:
        if rare is None:
            plain = ttl is None and not attempt and began is None and boot_id is None and verdict is None
            if plain and not (started or suspended or recorded or standin):
                rare = PLAIN  # shared: views compare by value either way
            else:
                rare = Rare(ttl, attempt, started, suspended, began, boot_id, verdict, recorded, standin)
        for key, value in (
            ("name", name),
            ("uid", uid),
            ("node", node),
            ("revision", revision),
            ("state", state),
            ("created", created),
            ("finished", finished),
            ("run", run),
            ("template_hash", template_hash),
            ("rare", rare),
        ):
            object.__setattr__(self, key, value)

    @classmethod
    def of(cls, job: Mapping[str, Any]) -> JobView:
        meta = job.get("metadata") or {}
        annotations = meta.get("annotations") or {}
        boot = annotations.get(ANNOTATION_BOOT_ID)
        return cls(
            name=meta.get("name") or "",
            uid=meta.get("uid"),
            node=job_node(job),
            revision=job_revision(job),
            state=job_state(job),
            created=job_created(job) or OLDEST,
            finished=job_finish_time(job),
            ttl=job_ttl(job),
            run=job_run(job),
            template_hash=job_template_hash(job),
            attempt=job_attempt(job),
            started=job_started(job),
            suspended=job_suspended(job),
            began=parse_time((job.get("status") or {}).get("startTime")),
            boot_id=boot if isinstance(boot, str) else None,
            verdict=Verdict.parse(annotations.get(ANNOTATION_NODE_CHECK)),
        )

    def flagged_recorded(self) -> JobView:
        """The same view with `recorded` set."""
        if self.rare.recorded:
            return self
        return JobView(
            self.name,
            self.uid,
            self.node,
            self.revision,
            self.state,
            self.created,
            self.finished,
            run=self.run,
            template_hash=self.template_hash,
            rare=replace(self.rare, recorded=True),
        )

    @property
    def ttl(self) -> Any:
        return self.rare.ttl

    @property
    def attempt(self) -> int:
        return self.rare.attempt

    @property
    def started(self) -> bool:
        return self.rare.started

    @property
    def suspended(self) -> bool:
        return self.rare.suspended

    @property
    def began(self) -> datetime | None:
        return self.rare.began

    @property
    def boot_id(self) -> str | None:
        return self.rare.boot_id

    @property
    def verdict(self) -> Verdict | None:
        return self.rare.verdict

    @property
    def turn(self) -> str:
        """The state of the node's turn this Job stands for (turnverdict.turn_state): what retries,
        the failure budget, the failed nodes and the results count, not the Job's own state."""
        rare = self.rare
        if rare.verdict is None and rare.boot_id is None:
            return self.state
        return turn_state(self.state, rare.boot_id, rare.verdict)

    @property
    def recorded(self) -> bool:
        return self.rare.recorded

    @property
    def standin(self) -> bool:
        return self.rare.standin

    @property
    def age_key(self) -> tuple[datetime, str]:
        return (self.created, self.name)

    @property
    def history_key(self) -> tuple[datetime, datetime, str]:
        return (self.finished or self.created, self.created, self.name)


JOB_VIEW_KEY = JobView.of  # one object, so it serves as the memo key of the view kept on each cached Job


def job_view(job: Mapping[str, Any], memo: Memo = no_memo) -> JobView:
    """What a plan reads of one Job, kept by `memo` on the cached Job."""
    return memo(job, JOB_VIEW_KEY)


def node_inputs(
    jobs: Iterable[Mapping[str, Any]], nodes: Iterable[Mapping[str, Any]], memo: Memo = no_memo
) -> dict[str, tuple[Mapping[str, Any] | None, tuple[JobView, ...]]]:
    """Each node's inputs to `plan_node`: its node object (None: deleted) and its Jobs' views.
    Jobs without a node annotation are under "" (only a TTL on them matters)."""
    by_node: dict[str, list[JobView]] = {}
    for raw in jobs:
        view = job_view(raw, memo)
        by_node.setdefault(view.node or "", []).append(view)
    out: dict[str, tuple[Mapping[str, Any] | None, tuple[JobView, ...]]] = {}
    for node in nodes:
        name = (node.get("metadata") or {}).get("name")
        if name:
            out[name] = (node, tuple(by_node.pop(name, ())))
    for name, views in by_node.items():
        out[name] = (None, tuple(views))
    return out


def checked_state(name: str, record: JobView, checked: bool, reboot: bool) -> tuple[str, Awaiting | None]:
    """The record's state as a checked turn reads it (nodework/nodecheck.py): its turn's state once its
    verdict is written; until then active, and awaiting once its Job is done (or, with a reboot,
    whatever its Job's state): a failed Job gets its verdict at the next look. A node failed by its
    verdict counts as eligible: its turn made it NotReady or tainted."""
    if not checked or record.boot_id is None:
        return record.state, None
    if record.verdict is not None:
        return record.turn, None
    if record.state == ACTIVE and not reboot:
        return ACTIVE, None
    job_failed = record.state == FAILED
    return ACTIVE, Awaiting(name, record.name, record.uid, record.boot_id, record.created, record.finished, job_failed)
