"""Step 1 of a decision: what in a DaemonJob's spec makes it unusable, collected, not raised.

The schema catches most mistakes; these are the ones it cannot (a selector the API server
would reject, a restart policy a Job cannot run with, a TTL that would erase the record, a
schedule or time zone that does not parse, a template too large to copy into every node's
Job). An invalid rollout knob keeps its safe default and adds a problem, so a decision is
always possible and the problems surface as `Stalled`.

This is the one rule book and the one parse of the spec: `validate` reads the raw object
into the frozen `DaemonJobSpec` (spec.py) together with the problems, and nothing downstream
reads the raw spec again. The validating admission webhook refuses an object with exactly
these problems, and `kubectl daemonjob create` checks its manifest with them. Each problem
names its field (`spec.schedule`) and reads as kubectl shows the API server's own errors
(`spec.schedule: Invalid value: "0 25 * * *": ...`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from daemonjob import defaults
from daemonjob.domain.schedule.runsettings import read_runs
from daemonjob.domain.shared.apinames import LABEL_NAME
from daemonjob.domain.spec.eligibility import POD_SPEC_PATH, Eligibility, InvalidSpec, compile_eligibility
from daemonjob.domain.spec.labelrules import InvalidSelector, validate_label_value
from daemonjob.domain.spec.maintenancespec import Maintenance, validate_maintenance, wants_maintenance
from daemonjob.domain.spec.nodecheckspec import read_node_checks
from daemonjob.domain.spec.nodeparams import read_node_parameters
from daemonjob.domain.spec.problems import (
    INVALID_NAME,
    INVALID_RESTART_POLICY,
    INVALID_SELECTOR,
    INVALID_SPEC,
    SHOWN_VALUE_MAX,
    TEMPLATE_TOO_LARGE,
    TTL_NOT_ALLOWED,
    Problem,
    is_int,
    too_many,
)
from daemonjob.domain.spec.problems import show as _show
from daemonjob.domain.spec.resultsspec import read_results
from daemonjob.domain.spec.retryspec import check_managed_by, read_retry, read_start_timeout
from daemonjob.domain.spec.rolloutspec import (
    PERCENT_RE,
    AlertMatcher,
    Rollout,
    Window,
    parse_duration,
    read_rollout,
)
from daemonjob.domain.spec.spec import RERUN_NEVER, RERUN_ON_TEMPLATE_CHANGE, RERUN_POLICIES, DaemonJobSpec, Settings

__all__ = [
    "Problem",
    "Settings",
    "DaemonJobSpec",
    "Validation",
    "validate",
    "read_spec",
    "problems_of",
    "scaled",
    "is_int",
    "Rollout",
    "Window",
    "validate_order",
    "validate_maintenance",
    "parse_duration",
    "AlertMatcher",
    "RERUN_ON_TEMPLATE_CHANGE",
    "RERUN_NEVER",
    "SHOWN_VALUE_MAX",
]

ALLOWED_RESTART_POLICIES = ("Never", "OnFailure")


@dataclass(slots=True)
class Validation:
    """What step 1 found: the spec as usable (defaults where invalid) and the problems."""

    spec: DaemonJobSpec = field(default_factory=DaemonJobSpec)
    problems: list[Problem] = field(default_factory=list)

    @property
    def settings(self) -> Settings:
        return self.spec.settings

    @property
    def rollout(self) -> Rollout:
        return self.spec.rollout

    @property
    def maintenance(self) -> Maintenance | None:
        return self.spec.maintenance

    @property
    def eligibility(self) -> Eligibility | None:
        return self.spec.eligibility

    @property
    def template_has_ttl(self) -> bool:
        return self.spec.template_has_ttl


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
    percent = PERCENT_RE.match(value) if isinstance(value, str) else None
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
    check_managed_by(job_spec, problems)
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
    """The spec read, with everything that can make it unusable; `eligibility`, if given, is
    not compiled again."""
    spec = dj.get("spec")
    if not isinstance(spec, Mapping):
        return Validation(problems=[Problem(INVALID_SPEC, "spec: Required value")])
    problems: list[Problem] = []
    if eligibility is None:
        try:
            eligibility = compile_eligibility(dj)
        except InvalidSpec as e:
            problems.append(Problem(INVALID_SELECTOR, e.message))

    name = (dj.get("metadata") or {}).get("name") or ""
    try:
        validate_label_value(name, "metadata.name")
    except InvalidSelector as e:
        problems.append(Problem(INVALID_NAME, f"{e.message} (it is the value of the {LABEL_NAME} label)"))

    has_ttl = _check_template(spec, problems)
    settings = _settings(spec, problems)
    runs, schedule_problems = read_runs(
        spec.get("schedule"),
        spec.get("timeZone"),
        spec.get("concurrencyPolicy"),
        spec.get("startingDeadlineSeconds"),
        spec.get("suspend"),
    )
    problems.extend(Problem(e.reason, e.message) for e in schedule_problems)
    rollout = read_rollout(spec.get("rollout"), problems)
    validate_order(spec, name, problems)
    maintenance = validate_maintenance(spec, problems)
    checks = read_node_checks(spec, problems)
    template = spec.get("jobTemplate")
    parameters = read_node_parameters(spec.get("nodeParameters"), template, problems)
    group, after = spec.get("exclusionGroup"), spec.get("after")
    typed = DaemonJobSpec(
        settings=settings,
        runs=runs,
        rollout=rollout,
        maintenance=maintenance,
        asks_maintenance=wants_maintenance(spec),
        asks_drain=wants_maintenance(spec) and (spec.get("nodeMaintenance") or {}).get("drain") is not None,
        checks=checks,
        eligibility=eligibility,
        job_template=template if isinstance(template, Mapping) else {},
        template_has_ttl=has_ttl,
        rerun_on_config_change=spec.get("rerunOnConfigChange") is True,
        exclusion_group=group if isinstance(group, str) and group else None,
        after=tuple(dict.fromkeys(a for a in after if isinstance(a, str) and a)) if isinstance(after, list) else (),
        retry=read_retry(spec, problems),
        start_timeout=read_start_timeout(spec, problems),
        **read_results(spec, settings.never, checks, problems),
        node_parameters=parameters,
    )
    return Validation(typed, problems)


def read_spec(dj: Mapping[str, Any]) -> DaemonJobSpec:
    """The spec of `dj` as the rule book reads it (invalid knobs at their safe defaults)."""
    return validate(dj).spec


def _settings(spec: Mapping[str, Any], problems: list[Problem]) -> Settings:
    rerun_policy = RERUN_ON_TEMPLATE_CHANGE
    policy = spec.get("rerunPolicy")
    if policy in RERUN_POLICIES:
        rerun_policy = policy
    elif policy is not None:
        supported = ", ".join(_show(p) for p in RERUN_POLICIES)
        message = f"spec.rerunPolicy: Unsupported value: {_show(policy)}: supported values: {supported}"
        problems.append(Problem(INVALID_SPEC, message))
    max_parallel = _int_or_percent(spec, "maxParallel", 1, problems)
    max_failed = _int_or_percent(spec, "maxFailedNodes", 0, problems)
    suspend = spec.get("suspend")
    if suspend is not None and not isinstance(suspend, bool):
        suspend = True  # fail safe: start nothing
        problems.append(
            Problem(INVALID_SPEC, f"spec.suspend: Invalid value: {_show(spec.get('suspend'))}: must be a boolean")
        )
    history_limit = defaults.HISTORY_LIMIT
    history: Any = spec.get("historyLimit")
    if is_int(history) and 0 <= history <= defaults.HISTORY_LIMIT_MAX:
        history_limit = history
    elif is_int(history) and history > defaults.HISTORY_LIMIT_MAX:
        history_limit = defaults.HISTORY_LIMIT_MAX  # keeps the most it may, deletes nothing it need not
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
    return Settings(rerun_policy, max_parallel, max_failed, bool(suspend), history_limit)


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
    if after is not None and not isinstance(after, list):
        problems.append(Problem(INVALID_SPEC, f"spec.after: Invalid value: {_show(after)}: must be a list of names"))
    if not isinstance(after, list) or too_many(after, defaults.AFTER_MAX, "spec.after", problems):
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
