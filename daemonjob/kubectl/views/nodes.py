"""The per-node view of a DaemonJob, built from three lists: its Jobs, their pods, the Nodes.

Pure: no I/O, so it is unit-tested and costs one pass over each list (5000 nodes in
milliseconds). A node's row describes its Job of the current revision (and run, for a
scheduled DaemonJob) and that Job's newest pod.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import Any

from daemonjob.domain.jobs.contract import ACTIVE, FAILED, TERMINATING, job_attempt, job_created, job_node
from daemonjob.domain.shared.apinames import LABEL_REVISION, LABEL_RUN
from daemonjob.domain.shared.noderecord import outcomes_of, record_of
from daemonjob.domain.spec.eligibility import (
    NOT_READY,
    NOT_SELECTED,
    TAINTED,
    InvalidSpec,
    compile_eligibility,
)
from daemonjob.domain.spec.maintenancespec import ON_TIMEOUT_FAIL, ON_TIMEOUT_SKIP
from daemonjob.domain.spec.revision import template_revision
from daemonjob.domain.spec.validate import read_spec
from daemonjob.kubectl.views.noderow import (
    INELIGIBLE,
    PENDING,
    STATES,
    NodeRow,
    job_row,
    pods_by_job,
    retrying_row,
)

# Short words for why a node is not eligible are the domain's kinds (the full sentence is
# kept in `detail`); a node with no Node object is "node gone".
NODE_GONE = "node gone"
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


@dataclass
class NodeView:
    revision: str
    run: str | None
    rows: list[NodeRow]
    hidden_not_selected: int = 0  # nodes not selected and never run on, left out of `rows`
    spec_error: str = ""  # eligibility could not be computed: the spec is invalid
    counts: dict[str, int] = field(default_factory=dict)


def current_run(dj: Mapping[str, Any]) -> str | None:
    """The run being reported by a scheduled DaemonJob (`status.currentRun`), if any."""
    value = (dj.get("status") or {}).get("currentRun")
    if isinstance(value, Mapping):
        value = value.get("name") or value.get("id") or value.get("run")
    return str(value) if value else None


def current_revision(dj: Mapping[str, Any]) -> str:
    """The controller's `status.currentRevision`; before its first status, the template's hash."""
    status = dj.get("status") or {}
    return status.get("currentRevision") or template_revision(read_spec(dj).revision_source)


def node_ready(node: Mapping[str, Any]) -> bool:
    for cond in (node.get("status") or {}).get("conditions") or ():
        if cond.get("type") == "Ready":
            return cond.get("status") == "True"
    return False


def _newest_first(job: Mapping[str, Any]) -> tuple[Any, int]:
    """When the Job was created; within one second, the later attempt (a re-run beside the Job it replaced)."""
    return (job_created(job) or _EPOCH, job_attempt(job))


def build_view(
    dj: Mapping[str, Any],
    jobs: Iterable[Mapping[str, Any]],
    pods: Iterable[Mapping[str, Any]],
    nodes: Iterable[Mapping[str, Any]],
    *,
    all_nodes: bool = False,
    nodes_filtered: bool = False,
) -> NodeView:
    """Every node's row, sorted by node name, and the counts of exactly those rows.

    Nodes the DaemonJob does not select and never ran on are counted in
    `hidden_not_selected` rather than listed, unless `all_nodes`: on a big cluster they
    would bury the nodes that matter. `nodes_filtered`: `nodes` are only those matching a
    label selector, so a Job whose node is not among them is another node's, not one of a
    node that is gone, and is left out of rows and counts alike.
    """
    revision = current_revision(dj)
    run = current_run(dj)
    current: dict[str, Mapping[str, Any]] = {}
    for job in jobs:
        labels = (job.get("metadata") or {}).get("labels") or {}
        on = job_node(job)
        if on is None or labels.get(LABEL_REVISION) != revision:
            continue
        if run is not None and labels.get(LABEL_RUN) != run:
            continue
        old = current.get(on)
        if old is None or _newest_first(job) >= _newest_first(old):
            current[on] = job
    newest_pod = pods_by_job(pods)

    spec_error = ""
    try:
        rules = compile_eligibility(dj)
    except InvalidSpec as exc:
        rules, spec_error = None, exc.message
    rows: list[NodeRow] = []
    hidden = 0
    seen: set[str] = set()
    maintenance = MaintenanceView.of(dj, revision, run)
    entries = (dj.get("status") or {}).get("retryingNodes")
    retrying = {e.get("node"): e for e in entries if isinstance(e, Mapping)} if isinstance(entries, list) else {}
    for node in nodes:
        name = (node.get("metadata") or {}).get("name") or ""
        seen.add(name)
        verdict = rules.ineligible(node) if rules is not None else None
        detail, word = (verdict.message, verdict.kind) if verdict is not None else (None, "")
        if word == TAINTED and not node_ready(node):
            word = NOT_READY
        node_job = current.get(name)
        held = maintenance.held(node)
        if node_job is not None:
            row = job_row(name, node_job, newest_pod.get((node_job.get("metadata") or {}).get("uid") or ""))
            row = retrying_row(row, retrying.get(name))
            rows.append(
                replace(_with_eligibility(row, word, detail or ""), maintenance=maintenance.with_job(row.state, held))
            )
        elif maintenance.timed_out(node, name) == ON_TIMEOUT_FAIL:
            rows.append(
                NodeRow(
                    node=name,
                    state=FAILED,
                    reason="DrainTimedOut",
                    message="its drain timed out (spec.nodeMaintenance.drain.onTimeout: Fail)",
                )
            )
        elif maintenance.timed_out(node, name) == ON_TIMEOUT_SKIP:
            rows.append(
                NodeRow(
                    node=name,
                    state=INELIGIBLE,
                    reason="DrainSkipped",
                    ineligible="skipped",
                    message="its drain timed out (onTimeout: Skip): left out of this rollout",
                )
            )
        elif held:
            reason, message = maintenance.before_job(name, node)
            rows.append(NodeRow(node=name, state=PENDING, reason=reason, message=message, maintenance=reason))
        elif detail:
            if word == NOT_SELECTED and not all_nodes:
                hidden += 1
                continue
            rows.append(
                NodeRow(node=name, state=INELIGIBLE, reason=word, message=detail, ineligible=word, detail=detail)
            )
        else:
            rows.append(NodeRow(node=name, state=PENDING))
    for name, job in current.items():  # Jobs whose node was deleted
        if name not in seen and not nodes_filtered:
            row = job_row(name, job, newest_pod.get((job.get("metadata") or {}).get("uid") or ""))
            rows.append(_with_eligibility(row, NODE_GONE, "the node no longer exists"))
    rows.sort(key=lambda r: r.node)
    return NodeView(
        revision=revision,
        run=run,
        rows=rows,
        hidden_not_selected=hidden,
        spec_error=spec_error,
        counts=count_rows(rows, hidden),
    )


@dataclass(frozen=True, slots=True)
class MaintenanceView:
    """What spec.nodeMaintenance adds to the rows: the nodes carrying this DaemonJob's record
    (read from the Nodes), and what the status says of drains in this revision or run."""

    uid: str = ""
    drains: bool = False
    keep_failed: bool = False
    draining: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    drain_failed: frozenset[str] = frozenset()
    skipped: frozenset[str] = frozenset()
    revision: str = ""
    run: str | None = None

    @classmethod
    def of(cls, dj: Mapping[str, Any], revision: str, run: str | None) -> MaintenanceView:
        read = read_spec(dj)
        spec = read.maintenance
        status = (dj.get("status") or {}).get("nodeMaintenance") or {}
        if spec is None and not read.asks_maintenance and not status:
            return cls()
        current = status.get("rollout") == (run if run is not None else revision)
        return cls(
            uid=(dj.get("metadata") or {}).get("uid") or "",
            drains=spec is not None and spec.drain is not None,
            keep_failed=spec is not None and spec.keep_failed_cordoned,
            draining={str(d.get("node")): d for d in status.get("draining") or () if isinstance(d, Mapping)},
            drain_failed=frozenset(status.get("drainFailedNodes") or ()) if current else frozenset(),
            skipped=frozenset(status.get("skippedNodes") or ()) if current else frozenset(),
            revision=revision,
            run=run,
        )

    def held(self, node: Mapping[str, Any]) -> bool:
        record = record_of(node) if self.uid else None
        return record is not None and record.uid == self.uid

    def timed_out(self, node: Mapping[str, Any], name: str) -> str | None:
        """Fail or Skip: the node's drain timed out in this revision or run (the status lists 1000 at most)."""
        if name in self.drain_failed:
            return ON_TIMEOUT_FAIL
        if name in self.skipped:
            return ON_TIMEOUT_SKIP
        for outcome in outcomes_of(node) if self.uid else ():
            if outcome.uid == self.uid and outcome.of_rollout(self.revision, self.run):
                return outcome.on_timeout
        return None

    def with_job(self, state: str, held: bool) -> str:
        if not held:
            return ""
        if state in (ACTIVE, TERMINATING):
            return "running"
        return "kept cordoned" if state == FAILED and self.keep_failed else "uncordoning"

    def before_job(self, name: str, node: Mapping[str, Any]) -> tuple[str, str]:
        """The reason and message of a node in maintenance whose Job is not created yet."""
        record = record_of(node)
        if record is not None and record.kept:
            return "kept cordoned", f"kept cordoned after its Job failed until released (release --node {name})"
        if not self.drains:
            return "cordoned", "cordoned; its Job starts next"
        entry = self.draining.get(name) or {}
        waiting = ", ".join(entry.get("waitingPods") or ())
        message = f"waiting for pods to go: {waiting}" if waiting else "draining"
        if entry.get("blockedBy"):
            message += f" ({entry['blockedBy']})"
        return "draining", message


def count_rows(rows: Iterable[NodeRow], hidden_not_selected: int = 0) -> dict[str, int]:
    """The counts line of these rows, adding up as the controller's status does:
    `desired` = pending + active + succeeded + failed + terminating.

    A node no longer eligible stays desired while its Job is still running (it holds its
    maxParallel slot, as the controller counts it); once its Job has finished, or when it
    never had one, it is counted as not eligible only.
    """
    counts = {state: 0 for state in STATES}
    for row in rows:
        if row.ineligible and row.state not in (ACTIVE, TERMINATING):
            counts[INELIGIBLE] += 1
        else:
            counts[row.state] += 1
    counts["desired"] = sum(counts[s] for s in STATES if s != INELIGIBLE)
    counts[INELIGIBLE] += hidden_not_selected
    return counts


def _with_eligibility(row: NodeRow, word: str, detail: str) -> NodeRow:
    return replace(row, ineligible=word, detail=detail) if word else row
