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
Either way `ResultsRecorded=False` says it too: a condition of its own, which kstatus does not
read (results missing neither hold a rollout nor need it to be waited for), present only
while results cannot be recorded. Its reason, and that of the Event and of Reconciling/Stalled,
is ReportsCRDMissing when the resource is not served (the CRD not installed), else
ResultsUnreadable.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from daemonjob.domain.rollout.condition import RECONCILING, STALLED, Condition, render, turned_true
from daemonjob.domain.shared.events import WARNING, EventSpec

__all__ = [
    "REPORTS_CRD_MISSING",
    "RESULTS_RECORDED",
    "RESULTS_UNREADABLE",
    "ResultsUnread",
    "with_recorded_condition",
    "with_results_unread",
    "with_unread_conditions",
]

RESULTS_UNREADABLE = "ResultsUnreadable"
REPORTS_CRD_MISSING = "ReportsCRDMissing"
RESULTS_RECORDED = "ResultsRecorded"  # the condition type
_HINTS = {
    404: "the daemonjobreports.daemonjob.io CRD is not installed: install it with "
    "`kubectl apply -f manifests/reports-crd.yaml`; results are recorded once it is",
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

    @property
    def crd_missing(self) -> bool:
        """The resource is not served: a 404 that names no object (a chunk gone names its own)."""
        return self.status == 404 and '" not found' not in self.error

    @property
    def reason(self) -> str:
        return REPORTS_CRD_MISSING if self.crd_missing else RESULTS_UNREADABLE

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
    cond = Condition(True, why.reason, message)
    changed = {RECONCILING: cond, **({STALLED: cond} if why.stalls else {})}
    changed[RESULTS_RECORDED] = _not_recorded(why)
    conditions = [c for c in status.get("conditions") or () if c.get("type") not in changed]
    conditions += [render(previous, kind, c, now, generation) for kind, c in changed.items()]
    news = turned_true(previous, RECONCILING, cond) or (why.stalls and turned_true(previous, STALLED, cond))
    return {**status, "conditions": conditions}, [EventSpec(WARNING, why.reason, message)] if news else []


def _not_recorded(why: ResultsUnread) -> Condition:
    return Condition(False, why.reason, f"results not recorded: {why.text()}")


def with_recorded_condition(
    status: Mapping[str, Any], previous: Mapping[str, Any], why: ResultsUnread, now: str, generation: Any
) -> dict[str, Any]:
    """`status` (as a pass decided it) with ResultsRecorded=False saying why; its transition
    time kept from `previous` (the status as last written) while it stays False."""
    was = {c.get("type"): c for c in previous.get("conditions") or ()}
    conditions = [c for c in status.get("conditions") or () if c.get("type") != RESULTS_RECORDED]
    conditions.append(render(was, RESULTS_RECORDED, _not_recorded(why), now, generation))
    return {**status, "conditions": conditions}


def with_results_unread(
    results: Mapping[str, Any] | None, why: ResultsUnread
) -> tuple[dict[str, Any], list[EventSpec]]:
    """status.results (as last written) saying why it is not filled; the Warning Event when
    that is news. The rollout is not held: without deleteSucceededJobs the Jobs are the record."""
    message = f"results not recorded: {why.text()}"
    news = (results or {}).get("error") is None
    out = {**(results or {}), "error": message, "summary": f"not recorded: {why.error}"[:200]}
    return out, [EventSpec(WARNING, why.reason, message)] if news else []
