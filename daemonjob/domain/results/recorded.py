"""A node's recorded success standing for its deleted Job (spec.results.deleteSucceededJobs).

With the field on, a node's succeeded Job is deleted once its result is in the DaemonJob's
report objects; from then on that result is the proof that the node ran its revision or
run. The controller hands each node's newest recorded success to the plan as a stand-in
view (a JobView with no Job behind it), so the one rule book reads it as it reads a
succeeded Job: the node is done, `after`, canary and the failure budget count it, and
nothing deletes, times out or cleans it as history. A real Job whose result is recorded is
flagged `recorded`: the plan deletes it once it succeeded (plan.py, reason Recorded).
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from daemonjob.domain.jobs.contract import SUCCEEDED, TERMINATING, parse_time
from daemonjob.domain.jobs.jobview import OLDEST, JobView
from daemonjob.domain.results.outcomes import read_group_by
from daemonjob.domain.spec.nodecheckspec import NodeChecks
from daemonjob.domain.spec.problems import INVALID_SPEC, Problem
from daemonjob.domain.spec.problems import show as _show

__all__ = ["FIELD", "newer", "read_delete_succeeded", "read_results", "standin_of", "standins", "with_recorded"]

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


def standin_of(result: Mapping[str, Any]) -> JobView | None:
    """The stand-in view of a recorded result: a succeeded one only (a failure needs its Job)."""
    if result.get("state") != SUCCEEDED or not result.get("node") or not result.get("revision"):
        return None
    started = parse_time(result.get("startTime")) or OLDEST
    finished = parse_time(result.get("finishTime")) or started
    run = result.get("run")
    attempt = result.get("attempt")
    return JobView(
        name=str(result.get("job") or ""),
        uid=result.get("jobUID"),
        node=sys.intern(str(result["node"])),
        revision=sys.intern(str(result["revision"])),
        state=SUCCEEDED,
        created=started,
        finished=finished,
        run=sys.intern(run) if isinstance(run, str) else None,
        template_hash=result.get("templateHash"),
        attempt=attempt if isinstance(attempt, int) else 0,
        started=True,
        recorded=True,
        standin=True,
    )


def newer(view: JobView, held: JobView | None) -> bool:
    """Whether `view` is a node's newest recorded success rather than `held`."""
    if held is None:
        return True
    return (held.finished or held.created, held.name) <= (view.finished or view.created, view.name)


def standins(results: Iterable[Mapping[str, Any]]) -> dict[str, JobView]:
    """Each node's newest recorded success among `results` (the reports' content)."""
    out: dict[str, JobView] = {}
    for result in results:
        view = standin_of(result)
        if view is not None and view.node and newer(view, out.get(view.node)):
            out[view.node] = view
    return out


def with_recorded(views: Sequence[JobView], standin: JobView | None) -> tuple[JobView, ...]:
    """A node's Jobs with its newest recorded success: the Job it stands for flagged
    `recorded` while it exists, the stand-in itself once it is gone."""
    if standin is None:
        return tuple(views)
    for i, view in enumerate(views):
        if view.uid == standin.uid or (view.uid is None and view.name == standin.name):
            flagged = view.flagged_recorded()
            gone = (standin,) if view.state == TERMINATING else ()  # being deleted: the record stands already
            return (*views[:i], flagged, *views[i + 1 :], *gone)
    return (*views, standin)
