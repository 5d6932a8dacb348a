"""Step 1 of a decision: what in a DaemonJob's spec makes it unusable, collected, not raised.

The schema catches most mistakes; these are the ones it cannot (a selector the API server
would reject, a restart policy a Job cannot run with, a TTL that would erase the record, a
schedule or time zone that does not parse, a template too large to copy into every node's
Job). An invalid rollout knob keeps its safe default and adds a problem, so a decision is
always possible and the problems surface as `Stalled`.

This is the one rule book: the validating admission webhook refuses an object with exactly
these problems, and `kubectl daemonjob create` checks its manifest with them. Each problem
names its field (`spec.schedule`) and reads as kubectl shows the API server's own errors
(`spec.schedule: Invalid value: "0 25 * * *": ...`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import orjson

from daemonjob import defaults
from daemonjob.domain.eligibility import POD_SPEC_PATH, Eligibility, InvalidSpec, compile_eligibility
from daemonjob.domain.jobs import LABEL_NAME
from daemonjob.domain.maintenancespec import (
    GRACE_PERIOD_MIN,
    GRACE_RULE,
    ON_TIMEOUT_FAIL,
    ON_TIMEOUT_POLICIES,
    DrainOptions,
    Maintenance,
)
from daemonjob.domain.maintenancespec import PATH as MAINTENANCE_PATH
from daemonjob.domain.schedule import InvalidSchedule, Schedule, parse_schedule, schedule_problems
from daemonjob.domain.selectors import InvalidSelector, compile_label_selector, validate_label_value

__all__ = [
    "Problem",
    "Settings",
    "Validation",
    "validate",
    "problems_of",
    "scaled",
    "is_int",
    "Rollout",
    "Window",
    "validate_rollout",
    "validate_order",
    "validate_maintenance",
    "parse_duration",
    "AlertMatcher",
    "RERUN_ON_TEMPLATE_CHANGE",
    "RERUN_NEVER",
]

RERUN_ON_TEMPLATE_CHANGE = "OnTemplateChange"
RERUN_NEVER = "Never"
RERUN_POLICIES = (RERUN_ON_TEMPLATE_CHANGE, RERUN_NEVER)
DEFAULT_RERUN_POLICY = RERUN_ON_TEMPLATE_CHANGE
ALLOWED_RESTART_POLICIES = ("Never", "OnFailure")

# Stalled reasons for specs the schema cannot catch
INVALID_SELECTOR = "InvalidSelector"
TTL_NOT_ALLOWED = "TTLNotAllowed"
INVALID_RESTART_POLICY = "InvalidRestartPolicy"
INVALID_NAME = "InvalidName"
INVALID_SPEC = "InvalidSpec"
TEMPLATE_TOO_LARGE = "TemplateTooLarge"

SHOWN_VALUE_MAX = 200  # characters of a refused value quoted in a message

_PERCENT_RE = re.compile(r"^([0-9]+)%$")
_DURATION_RE = re.compile(r"^(?:[0-9]+(?:h|m|s))+$")
_DURATION_PART_RE = re.compile(r"([0-9]+)(h|m|s)")
_DURATION_UNITS = {"h": 3600, "m": 60, "s": 1}


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing wrong with a spec: `message` is `<field>: <detail>`, `field` that path."""

    reason: str
    message: str
    field: str = ""

    def __post_init__(self) -> None:
        if not self.field:
            object.__setattr__(self, "field", self.message.split(": ", 1)[0])


@dataclass(slots=True)
class Settings:
    """The rollout knobs, defaulted."""

    rerun_policy: str = DEFAULT_RERUN_POLICY
    max_parallel: int | str | None = None
    max_failed: int | str | None = None
    suspend: bool = False
    history_limit: int = defaults.HISTORY_LIMIT

    @property
    def never(self) -> bool:
        return self.rerun_policy == RERUN_NEVER


@dataclass(frozen=True, slots=True)
class Window:
    """spec.rollout.window: new node Jobs start only from a tick of `schedule` for `duration`."""

    schedule: Schedule
    duration: timedelta


AlertMatcher = tuple[tuple[str, str], ...]  # (label, value) pairs, sorted: every one must be equal


@dataclass(frozen=True, slots=True)
class Rollout:
    """The gates of spec.rollout, each None when unset (it lets everything through)."""

    pause: timedelta | None = None  # pauseBetweenNodes
    window: Window | None = None
    canary: int | str | None = None  # a count of nodes, or a percentage of the desired nodes
    halt_on_alerts: tuple[AlertMatcher, ...] = ()  # haltOnAlerts: any firing alert one of them matches halts


@dataclass(slots=True)
class Validation:
    """What step 1 found: the usable settings, the problems, and the node rules if they compile."""

    settings: Settings = field(default_factory=Settings)
    problems: list[Problem] = field(default_factory=list)
    eligibility: Eligibility | None = None
    template_has_ttl: bool = False
    rollout: Rollout = field(default_factory=Rollout)
    maintenance: Maintenance | None = None  # spec.nodeMaintenance, None: nodes are never written


def _show(value: Any) -> str:
    text = json.dumps(value, default=str)
    if len(text) > SHOWN_VALUE_MAX:  # a refused 1 MB string is not repeated in a condition
        text = text[:SHOWN_VALUE_MAX] + "..."
    return text


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def scaled(value: int | str, total: int, round_up: bool) -> int:
    """IntOrString against `total`, as k8s GetScaledValueFromIntOrPercent (integer maths)."""
    if is_int(value):
        return int(value)
    hundredths = total * int(str(value)[:-1])
    return -(-hundredths // 100) if round_up else hundredths // 100


def _int_or_percent(spec: Mapping[str, Any], key: str, minimum: int, problems: list[Problem]) -> int | str | None:
    value = spec.get(key)
    if value is None:
        return None
    if is_int(value) and value >= minimum:
        return value
    percent = _PERCENT_RE.match(value) if isinstance(value, str) else None
    if percent and int(percent[1]) <= 100:
        return value
    if percent:
        detail = "must not be greater than 100%"
    elif is_int(value):
        detail = f"must be at least {minimum}"
    else:
        detail = 'must be an integer or a percentage such as "25%"'
    if key == "maxParallel" and value == 0:
        detail += " (use spec.suspend to start nothing)"
    problems.append(Problem(INVALID_SPEC, f"spec.{key}: Invalid value: {_show(value)}: {detail}"))
    return None


def _check_template(spec: Mapping[str, Any], problems: list[Problem]) -> bool:
    """Checks the Job template; True if it sets a TTL."""
    template = spec.get("jobTemplate")
    job_spec = template.get("spec") if isinstance(template, Mapping) else None
    if not isinstance(job_spec, Mapping):
        problems.append(Problem(INVALID_SPEC, "spec.jobTemplate.spec: Required value"))
        job_spec = {}
    if template is not None:
        size = len(orjson.dumps(template, default=str))
        if size > defaults.JOB_TEMPLATE_MAX_BYTES:
            problems.append(
                Problem(
                    TEMPLATE_TOO_LARGE,
                    f"spec.jobTemplate: Too long: must have at most {defaults.JOB_TEMPLATE_MAX_BYTES} bytes "
                    f"(serialized as JSON), not {size}: it is copied into every node's Job and pod, "
                    "so keep large data in a ConfigMap",
                )
            )
    has_ttl = job_spec.get("ttlSecondsAfterFinished") is not None
    if has_ttl:
        problems.append(
            Problem(
                TTL_NOT_ALLOWED,
                "spec.jobTemplate.spec.ttlSecondsAfterFinished: Forbidden: the Jobs are the record of what "
                "ran on each node, and a Job deleted by its TTL would look like a node that never ran: "
                "remove it (spec.historyLimit bounds how many old Jobs are kept)",
            )
        )
    pod_template = job_spec.get("template")
    pod_spec = pod_template.get("spec") if isinstance(pod_template, Mapping) else None
    restart = pod_spec.get("restartPolicy") if isinstance(pod_spec, Mapping) else None
    if restart not in ALLOWED_RESTART_POLICIES:
        shown = _show(restart) if restart is not None else '"Always" (the pod default)'
        problems.append(
            Problem(
                INVALID_RESTART_POLICY,
                f'{POD_SPEC_PATH}.restartPolicy: Unsupported value: {shown}: supported values: "Never", "OnFailure"',
            )
        )
    return has_ttl


def validate(dj: Mapping[str, Any], eligibility: Eligibility | None = None) -> Validation:
    """Everything that can make a spec unusable; `eligibility`, if given, is not compiled again."""
    out = Validation()
    spec = dj.get("spec")
    if not isinstance(spec, Mapping):
        out.problems.append(Problem(INVALID_SPEC, "spec: Required value"))
        return out
    problems = out.problems
    settings = out.settings

    if eligibility is None:
        try:
            eligibility = compile_eligibility(dj)
        except InvalidSpec as e:
            problems.append(Problem(INVALID_SELECTOR, e.message))
    out.eligibility = eligibility

    name = (dj.get("metadata") or {}).get("name") or ""
    try:
        validate_label_value(name, "metadata.name")
    except InvalidSelector as e:
        problems.append(Problem(INVALID_NAME, f"{e.message} (it is the value of the {LABEL_NAME} label)"))

    out.template_has_ttl = _check_template(spec, problems)

    policy = spec.get("rerunPolicy")
    if policy in RERUN_POLICIES:
        settings.rerun_policy = policy
    elif policy is not None:
        supported = ", ".join(_show(p) for p in RERUN_POLICIES)
        message = f"spec.rerunPolicy: Unsupported value: {_show(policy)}: supported values: {supported}"
        problems.append(Problem(INVALID_SPEC, message))
    settings.max_parallel = _int_or_percent(spec, "maxParallel", 1, problems)
    settings.max_failed = _int_or_percent(spec, "maxFailedNodes", 0, problems)
    suspend = spec.get("suspend")
    if suspend is None or isinstance(suspend, bool):
        settings.suspend = bool(suspend)
    else:
        settings.suspend = True  # fail safe: start nothing
        problems.append(Problem(INVALID_SPEC, f"spec.suspend: Invalid value: {_show(suspend)}: must be a boolean"))
    history = spec.get("historyLimit")
    if is_int(history) and 0 <= history <= defaults.HISTORY_LIMIT_MAX:
        settings.history_limit = history
    elif is_int(history) and history > defaults.HISTORY_LIMIT_MAX:
        settings.history_limit = defaults.HISTORY_LIMIT_MAX  # keeps the most it may, deletes nothing it need not
        problems.append(
            Problem(
                INVALID_SPEC,
                f"spec.historyLimit: Invalid value: {history}: must be less than or equal to "
                f"{defaults.HISTORY_LIMIT_MAX} (each kept run is one Job per node)",
            )
        )
    elif history is not None:
        problems.append(
            Problem(INVALID_SPEC, f"spec.historyLimit: Invalid value: {_show(history)}: must be an integer >= 0")
        )
    problems.extend(_schedule(spec))
    out.rollout = validate_rollout(spec, problems)
    validate_order(spec, name, problems)
    out.maintenance = validate_maintenance(spec, problems)
    return out


def _schedule(spec: Mapping[str, Any]) -> list[Problem]:
    return [Problem(e.reason, e.message) for e in schedule_problems(spec)]


def problems_of(dj: Mapping[str, Any]) -> list[Problem]:
    """Every problem of `dj`, as `Stalled` reports them: what admission refuses."""
    return validate(dj).problems


def validate_order(spec: Mapping[str, Any], name: str, problems: list[Problem]) -> None:
    """spec.exclusionGroup and spec.after as far as one object tells (missing names and cycles
    through other DaemonJobs are for the decision, which reads them from the caches)."""
    group = spec.get("exclusionGroup")
    if group is not None:
        try:
            if not isinstance(group, str) or not group:
                raise InvalidSelector(f"spec.exclusionGroup: Invalid value: {_show(group)}: must be a non-empty string")
            validate_label_value(group, "spec.exclusionGroup")
        except InvalidSelector as e:
            problems.append(Problem(INVALID_SPEC, e.message))
    after = spec.get("after")
    if after is None:
        return
    if not isinstance(after, list):
        problems.append(Problem(INVALID_SPEC, f"spec.after: Invalid value: {_show(after)}: must be a list of names"))
        return
    seen: set[str] = set()
    for i, dep in enumerate(after):
        path = f"spec.after[{i}]"
        if not isinstance(dep, str) or not dep:
            problems.append(Problem(INVALID_SPEC, f"{path}: Invalid value: {_show(dep)}: must be a DaemonJob name"))
        elif dep == name:
            problems.append(
                Problem(INVALID_SPEC, f"{path}: Invalid value: {_show(dep)}: a DaemonJob cannot come after itself")
            )
        elif dep in seen:
            problems.append(Problem(INVALID_SPEC, f"{path}: Duplicate value: {_show(dep)}"))
        else:
            seen.add(dep)


def parse_duration(value: Any) -> timedelta | None:
    """A duration as Kubernetes objects write one, in hours, minutes and seconds ("1h30m", "90s");
    None if `value` is not one."""
    if not isinstance(value, str) or not _DURATION_RE.match(value):
        return None
    return timedelta(seconds=sum(int(n) * _DURATION_UNITS[u] for n, u in _DURATION_PART_RE.findall(value)))


def _duration(
    section: Mapping[str, Any], key: str, path: str, problems: list[Problem], positive: bool = False
) -> timedelta | None:
    value = section.get(key)
    if value is None:
        return None
    parsed = parse_duration(value)
    if parsed is None or (positive and not parsed):
        least = "longer than 0s, " if positive else ""
        problems.append(
            Problem(
                INVALID_SPEC,
                f"{path}.{key}: Invalid value: {_show(value)}: must be a duration "
                f'{least}in hours, minutes and seconds such as "5m" or "1h30m"',
            )
        )
        return None
    return parsed


def _window(rollout: Mapping[str, Any], problems: list[Problem]) -> Window | None:
    raw = rollout.get("window")
    path = "spec.rollout.window"
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        problems.append(Problem(INVALID_SPEC, f"{path}: Invalid value: {_show(raw)}: must be an object"))
        return None
    duration = _duration(raw, "duration", path, problems, positive=True)
    if raw.get("duration") is None:
        problems.append(Problem(INVALID_SPEC, f"{path}.duration: Required value"))
    try:
        schedule = parse_schedule(raw.get("schedule"), raw.get("timeZone"))
    except InvalidSchedule as e:
        # the schedule's own checks name spec.schedule and spec.timeZone: the window's fields here
        message = e.message.replace("spec.schedule", f"{path}.schedule").replace("spec.timeZone", f"{path}.timeZone")
        problems.append(Problem(e.reason, message))
        return None
    return Window(schedule, duration) if duration is not None else None


def validate_rollout(spec: Mapping[str, Any], problems: list[Problem]) -> Rollout:
    """spec.rollout's gates; an invalid gate adds a problem (so nothing starts: Stalled)."""
    raw = spec.get("rollout")
    if raw is None:
        return Rollout()
    if not isinstance(raw, Mapping):
        problems.append(Problem(INVALID_SPEC, f"spec.rollout: Invalid value: {_show(raw)}: must be an object"))
        return Rollout()
    pause = _duration(raw, "pauseBetweenNodes", "spec.rollout", problems)
    return Rollout(
        pause=pause or None,
        window=_window(raw, problems),
        canary=_canary(raw, problems),
        halt_on_alerts=_halt_on_alerts(raw, problems),
    )


def _canary(rollout: Mapping[str, Any], problems: list[Problem]) -> int | str | None:
    value = rollout.get("canary")
    if value is None or (is_int(value) and value >= 1):
        return value
    match = _PERCENT_RE.match(value) if isinstance(value, str) else None
    if match and 1 <= int(match.group(1)) <= 100:
        return value
    problems.append(
        Problem(
            INVALID_SPEC,
            f"spec.rollout.canary: Invalid value: {_show(value)}: must be an integer "
            'of at least 1 or a percentage from "1%" to "100%"',
        )
    )
    return None


_LABEL_NAME_RE = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")  # Prometheus' label names


def _halt_on_alerts(rollout: Mapping[str, Any], problems: list[Problem]) -> tuple[AlertMatcher, ...]:
    """spec.rollout.haltOnAlerts: a list of equality matchers over alert labels. A matcher with
    no label would match every alert, so it is refused rather than read as "halt always"."""
    raw = rollout.get("haltOnAlerts")
    path = "spec.rollout.haltOnAlerts"
    if raw is None:
        return ()
    if not isinstance(raw, list):
        problems.append(Problem(INVALID_SPEC, f"{path}: Invalid value: {_show(raw)}: must be a list of label matchers"))
        return ()
    matchers: list[AlertMatcher] = []
    for i, item in enumerate(raw):
        at = f"{path}[{i}]"
        if not isinstance(item, Mapping) or not item:
            problems.append(
                Problem(
                    INVALID_SPEC,
                    f"{at}: Invalid value: {_show(item)}: must map at least one "
                    "alert label to its value, such as {alertname: NodeNotReady}",
                )
            )
            continue
        bad = False
        for label, value in item.items():
            if not isinstance(label, str) or not _LABEL_NAME_RE.match(label):
                problems.append(
                    Problem(
                        INVALID_SPEC,
                        f"{at}: Invalid value: {_show(label)}: an alert label name must match [a-zA-Z_][a-zA-Z0-9_]*",
                    )
                )
                bad = True
            elif not isinstance(value, str):
                problems.append(Problem(INVALID_SPEC, f"{at}.{label}: Invalid value: {_show(value)}: must be a string"))
                bad = True
        if not bad:
            matchers.append(tuple(sorted(item.items())))
    return tuple(matchers)


def _flag(section: Mapping[str, Any], key: str, path: str, problems: list[Problem]) -> bool:
    value = section.get(key)
    if value is None or isinstance(value, bool):
        return bool(value)
    problems.append(Problem(INVALID_SPEC, f"{path}.{key}: Invalid value: {_show(value)}: must be a boolean"))
    return False


def validate_maintenance(spec: Mapping[str, Any], problems: list[Problem]) -> Maintenance | None:
    """spec.nodeMaintenance compiled, None when it asks for nothing or has a problem (appended)."""
    raw = spec.get("nodeMaintenance")
    path = MAINTENANCE_PATH
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        problems.append(Problem(INVALID_SPEC, f"{path}: Invalid value: {_show(raw)}: must be an object"))
        return None
    before = len(problems)
    cordon = _flag(raw, "cordon", path, problems)
    keep = _flag(raw, "keepFailedCordoned", path, problems)
    drain = _drain(raw, problems)
    if drain is not None and not cordon:
        problems.append(
            Problem(
                INVALID_SPEC,
                f"{path}.drain: Invalid value: a drain needs cordon: true "
                "(pods evicted from a schedulable node may come straight back)",
            )
        )
    if len(problems) > before or not (cordon or drain is not None):
        return None
    return Maintenance(cordon=cordon, drain=drain, keep_failed_cordoned=keep)


def _drain(section: Mapping[str, Any], problems: list[Problem]) -> DrainOptions | None:
    raw = section.get("drain")
    path = f"{MAINTENANCE_PATH}.drain"
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        problems.append(Problem(INVALID_SPEC, f"{path}: Invalid value: {_show(raw)}: must be an object"))
        return None
    timeout = _duration(raw, "timeout", path, problems, positive=True) or defaults.DRAIN_TIMEOUT
    grace = raw.get("gracePeriodSeconds")
    if grace is not None and not (is_int(grace) and grace >= GRACE_PERIOD_MIN):
        problems.append(
            Problem(INVALID_SPEC, f"{path}.gracePeriodSeconds: Invalid value: {_show(grace)}: {GRACE_RULE}")
        )
        grace = None
    on_timeout = raw.get("onTimeout", ON_TIMEOUT_FAIL)
    if on_timeout not in ON_TIMEOUT_POLICIES:
        supported = ", ".join(_show(p) for p in ON_TIMEOUT_POLICIES)
        problems.append(
            Problem(
                INVALID_SPEC, f"{path}.onTimeout: Unsupported value: {_show(on_timeout)}: supported values: {supported}"
            )
        )
        on_timeout = ON_TIMEOUT_FAIL
    ignore = None
    selector = raw.get("ignorePodSelector")
    if selector is not None:
        try:
            ignore = compile_label_selector(selector, f"{path}.ignorePodSelector")
        except InvalidSelector as e:
            problems.append(Problem(INVALID_SELECTOR, e.message))
    return DrainOptions(
        timeout=timeout,
        grace_period_seconds=grace,
        delete_emptydir_data=_flag(raw, "deleteEmptyDirData", path, problems),
        force=_flag(raw, "force", path, problems),
        ignore_pods=ignore,
        on_timeout=on_timeout,
    )
