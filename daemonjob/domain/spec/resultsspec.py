"""spec.results read into the typed spec: `groupBy` and `deleteSucceededJobs`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from daemonjob.domain.spec.nodecheckspec import NodeChecks
from daemonjob.domain.spec.problems import INVALID_SPEC, Problem
from daemonjob.domain.spec.problems import show as _show

__all__ = ["FIELD", "read_delete_succeeded", "read_group_by", "read_results"]

FIELD = "spec.results.deleteSucceededJobs"


def read_results(spec: Mapping[str, Any], never: bool, checks: NodeChecks, problems: list[Problem]) -> dict[str, Any]:
    """spec.results as DaemonJobSpec's fields (`never`: rerunPolicy Never)."""
    return {
        "results_group_by": read_group_by(spec),
        "delete_succeeded_jobs": read_delete_succeeded(spec, never, checks, problems),
    }


def read_delete_succeeded(spec: Mapping[str, Any], never: bool, checks: NodeChecks, problems: list[Problem]) -> bool:
    """The field, off unless it is `true`. Not with reboot or healthCheck: a checked turn's
    verdict is written on its Job, so the Job is its record."""
    results = spec.get("results")
    value = results.get("deleteSucceededJobs") if isinstance(results, Mapping) else None
    if value is None:
        return False
    if not isinstance(value, bool):
        problems.append(Problem(INVALID_SPEC, f"{FIELD}: Invalid value: {_show(value)}: must be a boolean"))
        return False
    why = None
    if value and checks.any:
        why = "not with spec.nodeMaintenance.reboot or healthCheck (a turn's verdict is written on its Job)"
    elif value and never:
        why = "not with rerunPolicy Never (a node keeps its Job of an earlier revision as its record)"
    if why is not None:
        problems.append(Problem(INVALID_SPEC, f"{FIELD}: Invalid value: true: {why}"))
        return False
    return value


def read_group_by(spec: Mapping[str, Any]) -> str | None:
    """spec.results.groupBy: a `.field` path (the schema checks it); anything else groups by the message."""
    results = spec.get("results")
    value = results.get("groupBy") if isinstance(results, Mapping) else None
    return value if isinstance(value, str) and value.startswith(".") and len(value) > 1 else None
