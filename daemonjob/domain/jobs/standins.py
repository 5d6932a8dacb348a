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

from daemonjob.domain.jobs.contract import SUCCEEDED, TERMINATING
from daemonjob.domain.jobs.jobview import OLDEST, JobView
from daemonjob.domain.shared.timestamps import parse_time

__all__ = ["newer", "standin_of", "standins", "with_recorded"]


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
