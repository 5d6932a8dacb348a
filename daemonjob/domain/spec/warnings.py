"""Settings that do nothing as combined: warned about, never refused.

A field that the rest of the spec leaves idle (a pause with no maxParallel slot to pause, a
reboot timeout with no reboot) is valid, so the rule book (validate.py) has no problem for
it; yet whoever wrote it expects an effect, and finds out only when a rollout does not
behave. The admission webhook returns these as warnings (kubectl prints `Warning: ...` and
applies the object), and `kubectl daemonjob create` and `plan` print them the same way.

Each warning names the idle field by its path and what it needs. They read what was written,
not the typed spec: an unset field and one set to its default read alike there.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from daemonjob.domain.spec.nodecheckspec import REBOOT_EXPECTED
from daemonjob.domain.spec.spec import RERUN_NEVER

__all__ = ["RULES", "no_effect"]

Section = Mapping[str, Any]
# (the spec, its rollout section, its nodeMaintenance section) -> the warning, or None
Rule = Callable[[Section, Section, Section], str | None]


def _pause(spec: Section, rollout: Section, _maintenance: Section) -> str | None:
    if rollout.get("pauseBetweenNodes") is None or spec.get("maxParallel") is not None:
        return None
    return (
        "spec.rollout.pauseBetweenNodes has no effect without spec.maxParallel "
        "(it pauses a maxParallel slot after a node succeeds; without maxParallel every node starts at once)"
    )


def _canary(spec: Section, rollout: Section, _maintenance: Section) -> str | None:
    if rollout.get("canary") is None or spec.get("rerunPolicy") != RERUN_NEVER:
        return None
    return (
        f"spec.rollout.canary has no effect with spec.rerunPolicy: {RERUN_NEVER} "
        "(nodes keep the Job they ran, so no revision rolls out for a canary to go first)"
    )


def _reboot_timeout(_spec: Section, _rollout: Section, maintenance: Section) -> str | None:
    if maintenance.get("rebootTimeout") is None or maintenance.get("reboot") == REBOOT_EXPECTED:
        return None
    return f"spec.nodeMaintenance.rebootTimeout has no effect without spec.nodeMaintenance.reboot: {REBOOT_EXPECTED}"


def _keep_cordoned(_spec: Section, _rollout: Section, maintenance: Section) -> str | None:
    if maintenance.get("keepFailedCordoned") is not True or maintenance.get("cordon") is True:
        return None
    return (
        "spec.nodeMaintenance.keepFailedCordoned has no effect without spec.nodeMaintenance.cordon: true "
        "(no node is cordoned to be kept so)"
    )


def _time_zone(spec: Section, _rollout: Section, _maintenance: Section) -> str | None:
    if spec.get("timeZone") is None or spec.get("schedule") is not None:
        return None
    return "spec.timeZone has no effect without spec.schedule (it is the zone of the schedule's ticks)"


def _deadline(spec: Section, _rollout: Section, _maintenance: Section) -> str | None:
    if spec.get("startingDeadlineSeconds") is None or spec.get("schedule") is not None:
        return None
    return (
        "spec.startingDeadlineSeconds has no effect without spec.schedule "
        "(it skips late ticks; a run-now is never late)"
    )


RULES: tuple[Rule, ...] = (_pause, _canary, _reboot_timeout, _keep_cordoned, _time_zone, _deadline)


def _section(value: Any) -> Section:
    return value if isinstance(value, Mapping) else {}


def no_effect(dj: Mapping[str, Any]) -> list[str]:
    """The warnings of `dj`: each field its spec sets that has no effect as combined, in the
    order of RULES. Malformed sections read as empty (their problems are the rule book's)."""
    spec = _section(dj.get("spec"))
    rollout, maintenance = _section(spec.get("rollout")), _section(spec.get("nodeMaintenance"))
    return [w for w in (rule(spec, rollout, maintenance) for rule in RULES) if w is not None]
