"""The pure decision: from a DaemonJob, its Jobs and the nodes, to actions and a status.

No I/O and no mutation of the inputs, so every rule of the product contract is a
plain unit test. The caller must only call `decide` with synced caches: a node
missing from `nodes` is taken to be deleted and its Jobs are deleted.

Safety rules, in order of precedence:
- a node never runs two Jobs of one DaemonJob at once: a create only goes to a node
  with no active or terminating Job, so replacing an old revision takes two
  decisions (delete, then create once the delete is observed);
- the current revision's Jobs are never deleted while their node exists;
- whatever blocks creates (suspend, an unusable spec, an API error, the failure
  threshold) also blocks OldRevision deletes: running work is never torn down when
  nothing could replace it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from daemonjob import defaults
from daemonjob.eligibility import POD_SPEC_PATH, Eligibility, InvalidSpec, compile_eligibility
from daemonjob.jobs import (
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
from daemonjob.revision import template_revision
from daemonjob.selectors import InvalidSelector, validate_label_value

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

# Condition types
COMPLETE = "Complete"
FAILED_CONDITION = "Failed"
RECONCILING = "Reconciling"
STALLED = "Stalled"
CONDITION_TYPES = (COMPLETE, FAILED_CONDITION, RECONCILING, STALLED)

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

# Condition reasons
FAILURE_THRESHOLD_EXCEEDED = "FailureThresholdExceeded"
NODES_FAILED = "NodesFailed"

# Event reasons
EVENT_REVISION_STARTED = "RevisionStarted"
EVENT_COMPLETED = "Completed"
EVENT_FAILURE_THRESHOLD = "FailureThresholdReached"
EVENT_NODES_FAILED = "NodesFailed"
EVENT_INVALID_SPEC = "InvalidSpec"
NORMAL = "Normal"
WARNING = "Warning"

_PERCENT_RE = re.compile(r"^([0-9]+)%$")
_OLDEST = datetime.min.replace(tzinfo=timezone.utc)


@dataclass(frozen=True, slots=True)
class CreateJob:
    node: str
    name: str
    body: dict[str, Any]


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


@dataclass(frozen=True, slots=True)
class _Problem:
    reason: str
    message: str


@dataclass(slots=True)
class _Settings:
    rerun_policy: str = DEFAULT_RERUN_POLICY
    max_parallel: int | str | None = None
    max_failed: int | str | None = None
    suspend: bool = False
    history_limit: int = HISTORY_LIMIT


@dataclass(slots=True)
class _Job:
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


# ---------------------------------------------------------------- spec validation


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _int_or_percent(spec: Mapping[str, Any], key: str, minimum: int, hint: str, problems: list[_Problem]) -> int | str | None:
    value = spec.get(key)
    if value is None:
        return None
    if _is_int(value):
        if value < minimum:
            problems.append(_Problem(INVALID_SPEC, f"spec.{key}: Invalid value: {value}: must be at least {minimum}{hint}"))
            return None
        return value
    if isinstance(value, str) and _PERCENT_RE.match(value):
        return value
    problems.append(
        _Problem(INVALID_SPEC, f'spec.{key}: Invalid value: {value!r}: must be an integer or a percentage such as "25%"')
    )
    return None


def _scaled(value: int | str, total: int, round_up: bool) -> int:
    """IntOrString against `total`, as k8s GetScaledValueFromIntOrPercent."""
    if _is_int(value):
        return int(value)
    percent = int(_PERCENT_RE.match(str(value)).group(1))  # type: ignore[union-attr]
    scaled = total * percent  # in hundredths; integer maths avoids float rounding
    return -(-scaled // 100) if round_up else scaled // 100


def _validate(dj: Mapping[str, Any]) -> tuple[_Settings, list[_Problem], Eligibility | None]:
    """Everything about the spec that can make it unusable, collected rather than raised."""
    problems: list[_Problem] = []
    settings = _Settings()
    spec = dj.get("spec")
    if not isinstance(spec, Mapping):
        return settings, [_Problem(INVALID_SPEC, "spec: Required value")], None

    name = (dj.get("metadata") or {}).get("name") or ""
    try:
        validate_label_value(name, "metadata.name")
    except InvalidSelector as e:
        problems.append(_Problem(INVALID_NAME, f"{e.message} (it is the value of the {LABEL_NAME} label of every Job)"))

    template = spec.get("jobTemplate")
    job_spec = template.get("spec") if isinstance(template, Mapping) else None
    if not isinstance(job_spec, Mapping):
        problems.append(_Problem(INVALID_SPEC, "spec.jobTemplate.spec: Required value"))
        job_spec = {}
    if job_spec.get("ttlSecondsAfterFinished") is not None:
        problems.append(
            _Problem(
                TTL_NOT_ALLOWED,
                "spec.jobTemplate.spec.ttlSecondsAfterFinished: Forbidden: the Jobs are the record of what ran "
                "on each node, and a Job deleted by its TTL would look like a node that never ran; "
                "remove it (spec.historyLimit bounds how many old Jobs are kept)",
            )
        )
    pod_spec = (job_spec.get("template") or {}).get("spec") if isinstance(job_spec.get("template"), Mapping) else None
    restart = pod_spec.get("restartPolicy") if isinstance(pod_spec, Mapping) else None
    if restart not in ALLOWED_RESTART_POLICIES:
        shown = f'"{restart}"' if restart is not None else '"Always" (the pod default)'
        problems.append(
            _Problem(
                INVALID_RESTART_POLICY,
                f'{POD_SPEC_PATH}.restartPolicy: Unsupported value: {shown}: supported values: "Never", "OnFailure"',
            )
        )

    policy = spec.get("rerunPolicy")
    if policy is None:
        settings.rerun_policy = DEFAULT_RERUN_POLICY
    elif policy in RERUN_POLICIES:
        settings.rerun_policy = policy
    else:
        problems.append(
            _Problem(INVALID_SPEC, f'spec.rerunPolicy: Unsupported value: {policy!r}: supported values: "OnTemplateChange", "Never"')
        )
    settings.max_parallel = _int_or_percent(spec, "maxParallel", 1, " (use spec.suspend to start nothing)", problems)
    settings.max_failed = _int_or_percent(spec, "maxFailedNodes", 0, "", problems)
    suspend = spec.get("suspend")
    if suspend is None or isinstance(suspend, bool):
        settings.suspend = bool(suspend)
    else:
        settings.suspend = True  # fail safe: start nothing
        problems.append(_Problem(INVALID_SPEC, f"spec.suspend: Invalid value: {suspend!r}: must be a boolean"))
    history = spec.get("historyLimit")
    if history is None:
        settings.history_limit = HISTORY_LIMIT
    elif _is_int(history) and history >= 0:
        settings.history_limit = history
    else:
        problems.append(_Problem(INVALID_SPEC, f"spec.historyLimit: Invalid value: {history!r}: must be an integer >= 0"))

    eligibility: Eligibility | None = None
    try:
        eligibility = compile_eligibility(dj)
    except InvalidSpec as e:
        problems.insert(0, _Problem(INVALID_SELECTOR, e.message))
    return settings, problems, eligibility


# ---------------------------------------------------------------- conditions


def _condition(
    previous: Mapping[str, Mapping[str, Any]],
    kind: str,
    value: bool,
    reason: str,
    message: str,
    now: str,
    generation: Any,
) -> dict[str, Any]:
    status = "True" if value else "False"
    prev = previous.get(kind) or {}
    since = prev.get("lastTransitionTime") if prev.get("status") == status else None
    cond: dict[str, Any] = {
        "type": kind,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": since or now,
    }
    if generation is not None:
        cond["observedGeneration"] = generation
    return cond


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
    dj_name = meta.get("name") or ""
    generation = meta.get("generation")
    spec = dj.get("spec") if isinstance(dj.get("spec"), Mapping) else {}
    previous = dj.get("status") if isinstance(dj.get("status"), Mapping) else {}
    template = spec.get("jobTemplate")
    revision = template_revision(template if isinstance(template, Mapping) else {})
    settings, problems, eligibility = _validate(dj)
    now_s = format_time(now)

    node_names: set[str] = set()
    eligible: set[str] = set()
    for node in nodes:
        name = (node.get("metadata") or {}).get("name")
        if not name:
            continue
        node_names.add(name)
        if eligibility is not None and eligibility.eligible(node):
            eligible.add(name)

    by_node: dict[str, list[_Job]] = {}
    active_current = 0  # on any node, including gone ones: they run until deleted
    for raw in jobs:
        job = _Job.of(raw)
        if job.revision == revision and job.state == ACTIVE:
            active_current += 1
        if job.node:
            by_node.setdefault(job.node, []).append(job)

    never = settings.rerun_policy == RERUN_NEVER
    deletes: list[DeleteJob] = []
    old_running: list[DeleteJob] = []
    candidates: list[str] = []
    counts = {ACTIVE: 0, SUCCEEDED: 0, FAILED: 0}
    failed_names: list[str] = []

    for node_name, node_jobs in by_node.items():
        if node_name not in node_names:
            deletes.extend(DeleteJob(j.name, node_name, NODE_GONE, j.uid) for j in node_jobs if j.state != TERMINATING)
            continue
        record = _record(node_jobs, revision, never)
        history = [
            j
            for j in node_jobs
            if j is not record and j.revision != revision and j.state in (SUCCEEDED, FAILED)
        ]
        history.sort(key=lambda j: j.history_key, reverse=True)
        deletes.extend(DeleteJob(j.name, node_name, HISTORY, j.uid) for j in history[settings.history_limit :])
        if node_name not in eligible:
            continue  # an ineligible node keeps a running Job to completion
        if not never:
            old_running.extend(
                DeleteJob(j.name, node_name, OLD_REVISION, j.uid)
                for j in node_jobs
                if j.revision != revision and j.state == ACTIVE
            )
        if record is None:
            busy = any(j.state in (ACTIVE, TERMINATING) for j in node_jobs)
            has_current = any(j.revision == revision for j in node_jobs)
            if not (never or busy or has_current):
                candidates.append(node_name)
        else:
            counts[record.state] += 1
            if record.state == FAILED:
                failed_names.append(node_name)

    candidates.extend(n for n in eligible if n not in by_node)
    desired = len(eligible)
    active, succeeded, failed = counts[ACTIVE], counts[SUCCEEDED], counts[FAILED]
    pending = desired - active - succeeded - failed

    max_failed = _scaled(settings.max_failed, desired, round_up=False) if settings.max_failed is not None else None
    failure_stop = max_failed is not None and failed > max_failed
    blocked = settings.suspend or bool(problems) or stalled is not None or failure_stop

    creates: list[CreateJob] = []
    if not (settings.suspend or problems or failure_stop):
        budget = len(candidates)
        if settings.max_parallel is not None:
            limit = max(1, _scaled(settings.max_parallel, desired, round_up=True))
            budget = min(budget, max(0, limit - active_current))
        if stalled is not None:
            budget = min(budget, STALLED_CREATE_PROBES)
        for node_name in sorted(candidates)[:budget]:
            body = build_job(dj, node_name, revision)
            creates.append(CreateJob(node_name, body["metadata"]["name"], body))
    if not blocked:
        deletes.extend(old_running)
    deletes.sort(key=lambda d: (d.node or "", d.name))

    # ------------------------------------------------------------ status
    prev_conditions = {
        c.get("type"): c for c in previous.get("conditions") or () if isinstance(c, Mapping)
    }
    prev_revision = previous.get("currentRevision")
    same_revision = prev_revision == revision
    progress = (
        f"{succeeded} of {desired} eligible nodes succeeded, {active} active, {failed} failed, {pending} pending"
    )
    over = pending == 0 and active == 0

    if problems:
        stall = (True, problems[0].reason, "; ".join(p.message for p in problems))
    elif stalled is not None:
        stall = (True, str(stalled[0] or DEFAULT_STALLED_REASON), str(stalled[1] or ""))
    else:
        stall = (False, "NoErrors", "the spec is valid and the last changes were applied")

    if failure_stop:
        limit_text = f"{max_failed}" if _is_int(settings.max_failed) else f"{max_failed} ({settings.max_failed} of {desired})"
        failed_cond = (
            True,
            FAILURE_THRESHOLD_EXCEEDED,
            f"{_plural(failed, 'node')} failed revision {revision}, more than maxFailedNodes {limit_text}; "
            f"no new node is started",
        )
    elif over and failed > 0:
        failed_cond = (
            True,
            NODES_FAILED,
            f"{failed} of {desired} eligible nodes failed revision {revision}: {', '.join(sorted(failed_names)[:FAILED_NODE_NAMES_MAX])}",
        )
    elif failed > 0:
        failed_cond = (False, "WithinThreshold", f"{_plural(failed, 'node')} failed so far; {progress}")
    else:
        failed_cond = (False, "NoFailedNodes", "no node has failed")

    complete = not problems and pending == 0 and active == 0 and failed == 0
    if complete:
        complete_cond = (True, "AllNodesSucceeded", f"revision {revision} succeeded on all {desired} eligible nodes")
    elif stall[0]:
        complete_cond = (False, STALLED, progress)
    elif failed_cond[0]:
        complete_cond = (False, failed_cond[1], progress)
    elif settings.suspend:
        complete_cond = (False, "Suspended", progress)
    else:
        complete_cond = (False, "InProgress", progress)

    work_remains = pending > 0 or active > 0
    if not work_remains:
        reconciling = (False, "RolloutFinished", progress)
    elif settings.suspend:
        reconciling = (False, "Suspended", f"suspended: no new node is started; {progress}")
    elif stall[0]:
        reconciling = (False, STALLED, progress)
    elif failure_stop:
        reconciling = (False, FAILURE_THRESHOLD_EXCEEDED, progress)
    else:
        reconciling = (True, "RollingOut", progress)

    conditions = [
        _condition(prev_conditions, COMPLETE, *complete_cond, now_s, generation),
        _condition(prev_conditions, FAILED_CONDITION, *failed_cond, now_s, generation),
        _condition(prev_conditions, RECONCILING, *reconciling, now_s, generation),
        _condition(prev_conditions, STALLED, *stall, now_s, generation),
    ]

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
        failedNodeNames=sorted(failed_names)[:FAILED_NODE_NAMES_MAX],
        startTime=(previous.get("startTime") if same_revision else None) or now_s,
    )
    if complete:
        was_complete = (prev_conditions.get(COMPLETE) or {}).get("status") == "True"
        kept = previous.get("completionTime") if was_complete and same_revision else None
        status["completionTime"] = kept or now_s
    status["conditions"] = conditions

    # ------------------------------------------------------------ events
    events: list[EventSpec] = []

    def turned(kind: str, value: bool, reason: str, message: str | None = None) -> bool:
        prev = prev_conditions.get(kind) or {}
        if not value:
            return False
        if prev.get("status") != "True" or prev.get("reason") != reason:
            return True
        return message is not None and prev.get("message") != message

    if not same_revision and not problems:
        was = f" (was {prev_revision})" if prev_revision else ""
        events.append(
            EventSpec(NORMAL, EVENT_REVISION_STARTED, f"revision {revision} started on {desired} eligible nodes{was}")
        )
    if turned(STALLED, *stall):
        events.append(EventSpec(WARNING, EVENT_INVALID_SPEC if problems else stall[1], stall[2]))
    if turned(FAILED_CONDITION, failed_cond[0], failed_cond[1]):
        reason = EVENT_FAILURE_THRESHOLD if failure_stop else EVENT_NODES_FAILED
        events.append(EventSpec(WARNING, reason, failed_cond[2]))
    if turned(COMPLETE, complete_cond[0], complete_cond[1]):
        events.append(EventSpec(NORMAL, EVENT_COMPLETED, complete_cond[2]))

    return Decision(creates=creates, deletes=deletes, status=status, events=events)


def _record(node_jobs: list[_Job], revision: str, never: bool) -> _Job | None:
    """The Job that stands for a node in the status, or None if the node is pending.

    OnTemplateChange: the newest live-or-finished Job of the current revision.
    Never: the newest such Job of any revision, which the node then keeps.
    """
    best: _Job | None = None
    for job in node_jobs:
        if job.state == TERMINATING or (not never and job.revision != revision):
            continue
        if best is None or job.age_key > best.age_key:
            best = job
    return best
