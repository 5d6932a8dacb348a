"""A DaemonJob's results that cannot be recorded or read: what its status says about it.

The recorder lists and writes a DaemonJob's DaemonJobReports; when that fails (the CRD not
installed, RBAC refusing it, the API server failing) it retries on its own and the status
says why meanwhile, so nothing waits in silence:
- with spec.results.deleteSucceededJobs a pass cannot decide without the reports (a node's
  record may be all there is of its run): `Reconciling=True`, reason ResultsUnreadable,
  with the API server's answer; `Stalled=True` too when a user must act (404: the resource
  is not served, the CRD is missing; 403: RBAC), and one Warning Event;
- without it the rollout goes on (the Jobs are the record) and status.results says why it
  is not filled (`error`, and `summary` for the RESULTS column), with one Warning Event.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from daemonjob.domain.conditions import RECONCILING, STALLED, Condition, render, turned_true
from daemonjob.domain.events import WARNING, EventSpec

__all__ = ["RESULTS_UNREADABLE", "ResultsUnread", "with_results_unread", "with_unread_conditions"]

RESULTS_UNREADABLE = "ResultsUnreadable"
_HINTS = {
    404: "is the daemonjobreports.daemonjob.io CRD installed (manifests/reports-crd.yaml)?",
    403: "the controller's RBAC must allow get, list, create, patch and delete of daemonjobreports",
}


@dataclass(frozen=True, slots=True)
class ResultsUnread:
    """Why the recorder cannot read or write a DaemonJob's reports: the API server's answer."""

    status: int | None  # its HTTP status; None: no answer (a connection error, say)
    error: str

    @property
    def stalls(self) -> bool:
        """A user must act: the resource is not served (the CRD) or not allowed (RBAC)."""
        return self.status in _HINTS

    def text(self) -> str:
        hint = _HINTS.get(self.status or 0)
        return f"{self.error}; {hint}" if hint else f"{self.error}; retried every few seconds"


def with_unread_conditions(
    status: Mapping[str, Any], why: ResultsUnread, now: str, generation: Any
) -> tuple[dict[str, Any], list[EventSpec]]:
    """`status` (as last written) with Reconciling (and Stalled, when a user must act) saying
    that the reports cannot be read; the Warning Event when that is news."""
    previous = {c.get("type"): c for c in status.get("conditions") or ()}
    message = (
        "cannot read this DaemonJob's recorded results (DaemonJobReports); with "
        "spec.results.deleteSucceededJobs a node's record may be all there is of its run, so "
        f"nothing starts or is deleted until they are read: {why.text()}"
    )
    cond = Condition(True, RESULTS_UNREADABLE, message)
    changed = {RECONCILING: cond, **({STALLED: cond} if why.stalls else {})}
    conditions = [c for c in status.get("conditions") or () if c.get("type") not in changed]
    conditions += [render(previous, kind, c, now, generation) for kind, c in changed.items()]
    news = turned_true(previous, RECONCILING, cond) or (why.stalls and turned_true(previous, STALLED, cond))
    return {**status, "conditions": conditions}, [EventSpec(WARNING, RESULTS_UNREADABLE, message)] if news else []


def with_results_unread(
    results: Mapping[str, Any] | None, why: ResultsUnread
) -> tuple[dict[str, Any], list[EventSpec]]:
    """status.results (as last written) saying why it is not filled; the Warning Event when
    that is news. The rollout is not held: without deleteSucceededJobs the Jobs are the record."""
    message = f"results not recorded: {why.text()}"
    news = (results or {}).get("error") is None
    out = {**(results or {}), "error": message, "summary": f"not recorded: {why.error}"[:200]}
    return out, [EventSpec(WARNING, RESULTS_UNREADABLE, message)] if news else []
