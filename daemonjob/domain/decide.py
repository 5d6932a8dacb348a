"""The pure decision: from a DaemonJob, its Jobs and the nodes, to actions and a status.

No I/O and no mutation of the inputs, so every rule of the product contract is a
plain unit test. The caller must only call `decide` with synced caches: a node
missing from `nodes` is taken to be deleted and its Jobs are deleted.

Safety rules, in order of precedence:
- a node never runs two Jobs of one DaemonJob at once: a create only goes to a node
  with no active or terminating Job, so replacing an old revision takes two
  decisions (delete, then create once the Job is gone);
- the current revision's Jobs are never deleted while their node exists;
- whatever blocks creates (suspend, an unusable spec, an API error, the failure
  threshold) also blocks OldRevision deletes: running work is never torn down when
  nothing would replace it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from daemonjob import defaults
from daemonjob.domain.eligibility import (
    POD_SPEC_PATH,
    Eligibility,
    InvalidSpec,
    compile_eligibility,
)
from daemonjob.domain.jobs import (
    ACTIVE,
    FAILED,
    LABEL_NAME,
    SUCCEEDED,
    TERMINATING,
    build_job,
    format_time,
    job_created,
    job_finish_time,
    job_node,
    job_revision,
    job_state,
)
from daemonjob.domain.revision import job_name, template_revision
from daemonjob.domain.selectors import InvalidSelector, validate_label_value
from daemonjob.machinery.store import derived

__all__ = [
    "CreateJob",
    "DeleteJob",
    "EventSpec",
    "Decision",
    "decide",
    "RERUN_ON_TEMPLATE_CHANGE",
    "RERUN_NEVER",
]

RERUN_ON_TEMPLATE_CHANGE = "OnTemplateChange"
RERUN_NEVER = "Never"
RERUN_POLICIES = (RERUN_ON_TEMPLATE_CHANGE, RERUN_NEVER)
DEFAULT_RERUN_POLICY = RERUN_ON_TEMPLATE_CHANGE
ALLOWED_RESTART_POLICIES = ("Never", "OnFailure")
HISTORY_LIMIT = defaults.HISTORY_LIMIT
FAILED_NODE_NAMES_MAX = defaults.FAILED_NODE_NAMES_MAX
# While the API server keeps rejecting creates, try one node per reconcile, not all.
STALLED_CREATE_PROBES = 1
DEFAULT_STALLED_REASON = "ApplyFailed"

# Condition types, in the order they appear in the status
COMPLETE = "Complete"
FAILED_CONDITION = "Failed"
RECONCILING = "Reconciling"
STALLED = "Stalled"

# Delete reasons
NODE_GONE = "NodeGone"
OLD_REVISION = "OldRevision"
HISTORY = "History"

# Stalled reasons for specs the schema cannot catch
INVALID_SELECTOR = "InvalidSelector"
TTL_NOT_ALLOWED = "TTLNotAllowed"
INVALID_RESTART_POLICY = "InvalidRestartPolicy"
INVALID_NAME = "InvalidName"
INVALID_SPEC = "InvalidSpec"

# Failed condition reasons
FAILURE_THRESHOLD_EXCEEDED = "FailureThresholdExceeded"
NODES_FAILED = "NodesFailed"

# Events
NORMAL = "Normal"
WARNING = "Warning"
EVENT_REVISION_STARTED = "RevisionStarted"
EVENT_COMPLETED = "Completed"
EVENT_FAILURE_THRESHOLD = "FailureThresholdReached"
EVENT_NODES_FAILED = "NodesFailed"
EVENT_INVALID_SPEC = "InvalidSpec"

_PERCENT_RE = re.compile(r"^([0-9]+)%$")
_OLDEST = datetime.min.replace(tzinfo=timezone.utc)


@dataclass(frozen=True, slots=True)
class CreateJob:
    """A Job to create; its body is built when read, so thousands of creates hold no bodies."""

    node: str
    name: str
    revision: str
    dj: Mapping[str, Any] = field(repr=False, compare=False)

    @property
    def body(self) -> dict[str, Any]:
        """A fresh Job body on each read (the caller may change it)."""
        return build_job(self.dj, self.node, self.revision)


@dataclass(frozen=True, slots=True)
class DeleteJob:
    """`uid` lets the act layer delete with a UID precondition (never a newer namesake)."""

    name: str
    node: str | None
    reason: str
    uid: str | None = None


@dataclass(frozen=True, slots=True)
class EventSpec:
    type: str
    reason: str
    message: str


@dataclass(slots=True)
class Decision:
    creates: list[CreateJob] = field(default_factory=list)
    deletes: list[DeleteJob] = field(default_factory=list)
    status: dict[str, Any] = field(default_factory=dict)
    events: list[EventSpec] = field(default_factory=list)


# ---------------------------------------------------------------- spec validation


@dataclass(frozen=True, slots=True)
class _Problem:
    reason: str
    message: str


@dataclass(slots=True)
class _Settings:
    """The rollout knobs, defaulted; an invalid knob keeps its default and adds a problem."""

    rerun_policy: str = DEFAULT_RERUN_POLICY
    max_parallel: int | str | None = None
    max_failed: int | str | None = None
    suspend: bool = False
    history_limit: int = HISTORY_LIMIT


def _show(value: Any) -> str:
    return json.dumps(value, default=str)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _int_or_percent(spec: Mapping[str, Any], key: str, minimum: int, problems: list[_Problem]) -> int | str | None:
    value = spec.get(key)
    if value is None:
        return None
    if _is_int(value) and value >= minimum:
        return value
    if isinstance(value, str) and _PERCENT_RE.match(value):
        return value
    detail = f"must be at least {minimum}" if _is_int(value) else 'must be an integer or a percentage such as "25%"'
    if key == "maxParallel" and value == 0:
        detail += " (use spec.suspend to start nothing)"
    problems.append(_Problem(INVALID_SPEC, f"spec.{key}: Invalid value: {_show(value)}: {detail}"))
    return None


def _scaled(value: int | str, total: int, round_up: bool) -> int:
    """IntOrString against `total`, as k8s GetScaledValueFromIntOrPercent (integer maths)."""
    if _is_int(value):
        return int(value)
    hundredths = total * int(str(value)[:-1])
    return -(-hundredths // 100) if round_up else hundredths // 100


def _check_template(spec: Mapping[str, Any], problems: list[_Problem]) -> None:
    template = spec.get("jobTemplate")
    job_spec = template.get("spec") if isinstance(template, Mapping) else None
    if not isinstance(job_spec, Mapping):
        problems.append(_Problem(INVALID_SPEC, "spec.jobTemplate.spec: Required value"))
        job_spec = {}
    if job_spec.get("ttlSecondsAfterFinished") is not None:
        problems.append(
            _Problem(
                TTL_NOT_ALLOWED,
                "spec.jobTemplate.spec.ttlSecondsAfterFinished: Forbidden: the Jobs are the record of what "
                "ran on each node, and a Job deleted by its TTL would look like a node that never ran; "
                "remove it (spec.historyLimit bounds how many old Jobs are kept)",
            )
        )
    pod_template = job_spec.get("template")
    pod_spec = pod_template.get("spec") if isinstance(pod_template, Mapping) else None
    restart = pod_spec.get("restartPolicy") if isinstance(pod_spec, Mapping) else None
    if restart not in ALLOWED_RESTART_POLICIES:
        shown = _show(restart) if restart is not None else '"Always" (the pod default)'
        problems.append(
            _Problem(
                INVALID_RESTART_POLICY,
                f"{POD_SPEC_PATH}.restartPolicy: Unsupported value: {shown}: "
                'supported values: "Never", "OnFailure"',
            )
        )


def _validate(dj: Mapping[str, Any]) -> tuple[_Settings, list[_Problem], Eligibility | None]:
    """Everything that can make a spec unusable, collected rather than raised."""
    settings = _Settings()
    spec = dj.get("spec")
    if not isinstance(spec, Mapping):
        return settings, [_Problem(INVALID_SPEC, "spec: Required value")], None
    problems: list[_Problem] = []

    eligibility: Eligibility | None = None
    try:
        eligibility = compile_eligibility(dj)
    except InvalidSpec as e:
        problems.append(_Problem(INVALID_SELECTOR, e.message))

    name = (dj.get("metadata") or {}).get("name") or ""
    try:
        validate_label_value(name, "metadata.name")
    except InvalidSelector as e:
        problems.append(_Problem(INVALID_NAME, f"{e.message} (it is the value of the {LABEL_NAME} label)"))

    _check_template(spec, problems)

    policy = spec.get("rerunPolicy")
    if policy in RERUN_POLICIES:
        settings.rerun_policy = policy
    elif policy is not None:
        supported = ", ".join(_show(p) for p in RERUN_POLICIES)
        message = f"spec.rerunPolicy: Unsupported value: {_show(policy)}: supported values: {supported}"
        problems.append(_Problem(INVALID_SPEC, message))
    settings.max_parallel = _int_or_percent(spec, "maxParallel", 1, problems)
    settings.max_failed = _int_or_percent(spec, "maxFailedNodes", 0, problems)
    suspend = spec.get("suspend")
    if suspend is None or isinstance(suspend, bool):
        settings.suspend = bool(suspend)
    else:
        settings.suspend = True  # fail safe: start nothing
        problems.append(_Problem(INVALID_SPEC, f"spec.suspend: Invalid value: {_show(suspend)}: must be a boolean"))
    history = spec.get("historyLimit")
    if _is_int(history) and history >= 0:
        settings.history_limit = history
    elif history is not None:
        problems.append(
            _Problem(INVALID_SPEC, f"spec.historyLimit: Invalid value: {_show(history)}: must be an integer >= 0")
        )
    return settings, problems, eligibility


# ---------------------------------------------------------------- per-node plan


@dataclass(frozen=True, slots=True)
class _Job:
    """What decide needs of one Job; kept on the cached Job object, so parsed once per version."""

    name: str
    uid: str | None
    node: str | None
    revision: str | None
    state: str
    created: datetime
    finished: datetime | None

    @classmethod
    def of(cls, job: Mapping[str, Any]) -> _Job:
        meta = job.get("metadata") or {}
        return cls(
            name=meta.get("name") or "",
            uid=meta.get("uid"),
            node=job_node(job),
            revision=job_revision(job),
            state=job_state(job),
            created=job_created(job) or _OLDEST,
            finished=job_finish_time(job),
        )

    @property
    def age_key(self) -> tuple[datetime, str]:
        return (self.created, self.name)

    @property
    def history_key(self) -> tuple[datetime, datetime, str]:
        return (self.finished or self.created, self.created, self.name)


_JOB_OF = _Job.of  # one object, so it serves as the key of the parsed Job kept on each cached Job


@dataclass(slots=True)
class _Plan:
    """What the Jobs and nodes say, before rollout limits are applied."""

    desired: int = 0
    active: int = 0
    succeeded: int = 0
    failed: int = 0
    failed_names: list[str] = field(default_factory=list)
    candidates: list[str] = field(default_factory=list)  # eligible nodes free for a create
    deletes: list[DeleteJob] = field(default_factory=list)  # always safe: NodeGone, History
    old_running: list[DeleteJob] = field(default_factory=list)  # OldRevision, if not blocked
    active_current: int = 0  # active Jobs of the current revision on any node

    @property
    def pending(self) -> int:
        return self.desired - self.active - self.succeeded - self.failed


def _record(node_jobs: list[_Job], revision: str, never: bool) -> _Job | None:
    """The Job that stands for a node in the status, or None if the node is pending.

    OnTemplateChange: the newest non-terminating Job of the current revision.
    Never: the newest non-terminating Job of any revision, which the node keeps.
    """
    best: _Job | None = None
    for job in node_jobs:
        if job.state == TERMINATING or (not never and job.revision != revision):
            continue
        if best is None or job.age_key > best.age_key:
            best = job
    return best


def _plan(
    jobs: Iterable[Mapping[str, Any]],
    node_names: set[str],
    eligible: set[str],
    revision: str,
    settings: _Settings,
) -> _Plan:
    plan = _Plan(desired=len(eligible))
    never = settings.rerun_policy == RERUN_NEVER
    by_node: dict[str, list[_Job]] = {}
    for raw in jobs:
        job = derived(raw, _JOB_OF)
        if job.revision == revision and job.state == ACTIVE:
            plan.active_current += 1  # counted even on gone nodes: it runs until deleted
        if job.node:
            by_node.setdefault(job.node, []).append(job)

    for node, node_jobs in by_node.items():
        if node not in node_names:
            plan.deletes.extend(DeleteJob(j.name, node, NODE_GONE, j.uid) for j in node_jobs if j.state != TERMINATING)
            continue
        record = _record(node_jobs, revision, never)
        older = [j for j in node_jobs if j.revision != revision]  # usually none: the steady state
        if older:
            history = sorted(
                (j for j in older if j is not record and j.state in (SUCCEEDED, FAILED)),
                key=lambda j: j.history_key,
                reverse=True,
            )
            plan.deletes.extend(DeleteJob(j.name, node, HISTORY, j.uid) for j in history[settings.history_limit :])
        if node not in eligible:
            continue  # an ineligible node keeps a running Job to completion and gets nothing new
        if older and not never:
            plan.old_running.extend(
                DeleteJob(j.name, node, OLD_REVISION, j.uid)
                for j in older
                if j.state == ACTIVE
            )
        if record is not None:
            if record.state == ACTIVE:
                plan.active += 1
            elif record.state == SUCCEEDED:
                plan.succeeded += 1
            else:
                plan.failed += 1
                plan.failed_names.append(node)
        elif not never and not any(j.revision == revision or j.state in (ACTIVE, TERMINATING) for j in node_jobs):
            plan.candidates.append(node)
    plan.candidates.extend(n for n in eligible if n not in by_node)
    plan.candidates.sort()
    plan.failed_names.sort()
    return plan


# ---------------------------------------------------------------- conditions and events


_Cond = tuple[bool, str, str]  # (status, reason, message)


def _condition(
    previous: Mapping[str, Mapping[str, Any]], kind: str, cond: _Cond, now: str, generation: Any
) -> dict[str, Any]:
    status = "True" if cond[0] else "False"
    prev = previous.get(kind) or {}
    since = prev.get("lastTransitionTime") if prev.get("status") == status else None
    out: dict[str, Any] = {
        "type": kind,
        "status": status,
        "reason": cond[1],
        "message": cond[2],
        "lastTransitionTime": since or now,
    }
    if generation is not None:
        out["observedGeneration"] = generation
    return out


def _turned_true(previous: Mapping[str, Mapping[str, Any]], kind: str, cond: _Cond, on_message: bool = False) -> bool:
    """True when `cond` is True now and was not, or was True for another reason (or message)."""
    prev = previous.get(kind) or {}
    if not cond[0]:
        return False
    if prev.get("status") != "True" or prev.get("reason") != cond[1]:
        return True
    return on_message and prev.get("message") != cond[2]


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


# ---------------------------------------------------------------- decide


def decide(
    dj: Mapping[str, Any],
    jobs: Iterable[Mapping[str, Any]],
    nodes: Iterable[Mapping[str, Any]],
    now: datetime,
    stalled: tuple[str, str] | None = None,
) -> Decision:
    """Compute the Jobs to create and delete, the new status and the events for `dj`.

    `stalled` is the (reason, message) of an API error the act layer saw for the
    current spec (e.g. the Job template was rejected); it is surfaced as Stalled
    and limits creates to a single probe until it clears.
    """
    meta = dj.get("metadata") or {}
    generation = meta.get("generation")
    raw_spec = dj.get("spec")
    spec: Mapping[str, Any] = raw_spec if isinstance(raw_spec, Mapping) else {}
    raw_status = dj.get("status")
    previous: Mapping[str, Any] = raw_status if isinstance(raw_status, Mapping) else {}
    template = spec.get("jobTemplate")
    revision = template_revision(template if isinstance(template, Mapping) else {})
    settings, problems, eligibility = _validate(dj)
    now_s = format_time(now)

    node_names: set[str] = set()
    eligible: set[str] = set()
    for node in nodes:
        name = (node.get("metadata") or {}).get("name")
        if name:
            node_names.add(name)
            if eligibility is not None and eligibility.eligible_cached(node):
                eligible.add(name)
    plan = _plan(jobs, node_names, eligible, revision, settings)
    desired, active, succeeded, failed, pending = plan.desired, plan.active, plan.succeeded, plan.failed, plan.pending

    max_failed = None if settings.max_failed is None else _scaled(settings.max_failed, desired, round_up=False)
    failure_stop = max_failed is not None and failed > max_failed

    # ------------------------------------------------------------ actions
    creates: list[CreateJob] = []
    if not (settings.suspend or problems or failure_stop):
        budget = len(plan.candidates)
        if settings.max_parallel is not None:
            limit = max(1, _scaled(settings.max_parallel, desired, round_up=True))
            budget = min(budget, max(0, limit - plan.active_current))
        if stalled is not None:
            budget = min(budget, STALLED_CREATE_PROBES)
        dj_name = meta.get("name") or ""
        creates = [CreateJob(node, job_name(dj_name, node, revision), revision, dj)
                   for node in plan.candidates[:budget]]
    deletes = list(plan.deletes)
    if not (settings.suspend or problems or stalled is not None or failure_stop):
        deletes.extend(plan.old_running)
    deletes.sort(key=lambda d: (d.node or "", d.name))

    # ------------------------------------------------------------ conditions
    progress = f"{succeeded} of {desired} eligible nodes succeeded, {active} active, {failed} failed, {pending} pending"
    failed_list = ", ".join(plan.failed_names[:FAILED_NODE_NAMES_MAX])

    if problems:
        stall: _Cond = (True, problems[0].reason, "; ".join(p.message for p in problems))
    elif stalled is not None:
        stall = (True, str(stalled[0] or DEFAULT_STALLED_REASON), str(stalled[1] or ""))
    else:
        stall = (False, "NoErrors", "the spec is valid and the last changes were applied")

    if failure_stop:
        limit_text = str(max_failed)
        if not _is_int(settings.max_failed):
            limit_text += f" ({settings.max_failed} of {desired})"
        failure: _Cond = (
            True,
            FAILURE_THRESHOLD_EXCEEDED,
            f"{_plural(failed, 'node')} failed revision {revision}, more than maxFailedNodes {limit_text}; "
            f"no new node is started. Failed: {failed_list}",
        )
    elif pending == 0 and active == 0 and failed > 0:
        failure = (
            True,
            NODES_FAILED,
            f"{failed} of {desired} eligible nodes failed revision {revision}: {failed_list}",
        )
    elif failed > 0:
        failure = (False, "WithinThreshold", f"{_plural(failed, 'node')} failed so far; {progress}")
    else:
        failure = (False, "NoFailedNodes", "no node has failed")

    complete_now = not problems and pending == 0 and active == 0 and failed == 0
    if complete_now:
        complete: _Cond = (True, "AllNodesSucceeded", f"revision {revision} succeeded on all {desired} eligible nodes")
    elif stall[0]:
        complete = (False, STALLED, progress)
    elif failure[0]:
        complete = (False, failure[1], progress)
    elif settings.suspend:
        complete = (False, "Suspended", progress)
    else:
        complete = (False, "InProgress", progress)

    if pending == 0 and active == 0:
        reconciling: _Cond = (False, "RolloutFinished", progress)
    elif settings.suspend:
        reconciling = (False, "Suspended", f"suspended, no new node is started; {progress}")
    elif stall[0]:
        reconciling = (False, STALLED, progress)
    elif failure_stop:
        reconciling = (False, FAILURE_THRESHOLD_EXCEEDED, progress)
    else:
        reconciling = (True, "RollingOut", progress)

    prev_conditions = {c.get("type"): c for c in previous.get("conditions") or () if isinstance(c, Mapping)}
    by_kind = ((COMPLETE, complete), (FAILED_CONDITION, failure), (RECONCILING, reconciling), (STALLED, stall))
    conditions = [_condition(prev_conditions, kind, cond, now_s, generation) for kind, cond in by_kind]

    # ------------------------------------------------------------ status
    prev_revision = previous.get("currentRevision")
    same_revision = prev_revision == revision
    status: dict[str, Any] = {}
    if generation is not None:
        status["observedGeneration"] = generation
    status.update(
        currentRevision=revision,
        desiredNodes=desired,
        activeNodes=active,
        succeededNodes=succeeded,
        failedNodes=failed,
        pendingNodes=pending,
        failedNodeNames=plan.failed_names[:FAILED_NODE_NAMES_MAX],
        startTime=(previous.get("startTime") if same_revision else None) or now_s,
    )
    if complete_now:
        was_complete = (prev_conditions.get(COMPLETE) or {}).get("status") == "True"
        kept = previous.get("completionTime") if was_complete and same_revision else None
        status["completionTime"] = kept or now_s
    status["conditions"] = conditions

    # ------------------------------------------------------------ events
    events: list[EventSpec] = []
    if not same_revision and not problems:
        was = f" (was {prev_revision})" if prev_revision else ""
        events.append(
            EventSpec(NORMAL, EVENT_REVISION_STARTED, f"revision {revision} started on {desired} eligible nodes{was}")
        )
    if _turned_true(prev_conditions, STALLED, stall, on_message=True):
        events.append(EventSpec(WARNING, EVENT_INVALID_SPEC if problems else stall[1], stall[2]))
    if _turned_true(prev_conditions, FAILED_CONDITION, failure):
        reason = EVENT_FAILURE_THRESHOLD if failure_stop else EVENT_NODES_FAILED
        events.append(EventSpec(WARNING, reason, failure[2]))
    if _turned_true(prev_conditions, COMPLETE, complete):
        events.append(EventSpec(NORMAL, EVENT_COMPLETED, complete[2]))

    return Decision(creates=creates, deletes=deletes, status=status, events=events)
