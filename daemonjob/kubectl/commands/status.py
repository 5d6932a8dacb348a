"""`status NAME`: the rollout in words, then one row per node; exit 3 when a shown node failed."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime, timezone
from typing import Any

from daemonjob import defaults
from daemonjob.domain.gates import gate_in_force
from daemonjob.domain.jobs.contract import FAILED, SUCCEEDED
from daemonjob.domain.shared.timestamps import parse_time
from daemonjob.domain.spec.validate import read_spec
from daemonjob.kubectl.cluster import client
from daemonjob.kubectl.commands import results
from daemonjob.kubectl.formats import output
from daemonjob.kubectl.formats.timefmt import between, human_duration
from daemonjob.kubectl.views.noderow import PENDING
from daemonjob.kubectl.views.nodes import NodeRow, NodeView, build_view, count_rows
from daemonjob.machinery.client.kube import ApiError

EXIT_FAILED_NODES = client.EXIT_FAILED
HEADERS = ["NODE", "STATE", "JOB", "ATTEMPT", "STARTED", "DURATION", "EXIT CODE", "REASON", "MESSAGE"]
WIDE_HEADERS = [*HEADERS, "POD", "REVISION", "ELIGIBILITY"]
CONDITION_WORDS = {"Complete": "complete", "Failed": "failed", "Stalled": "stalled", "Reconciling": "rolling out"}


def load_view(
    target: client.Target, name: str, node_selector: str | None = None, all_nodes: bool = False, cached: bool = False
) -> tuple[dict[str, Any], NodeView]:
    """One read of the DaemonJob and one list each of its Jobs, their pods and the Nodes, at once.

    `cached` lets the API server answer the lists from its watch cache: right for a view,
    not for deciding what to delete (`rerun`)."""
    snap = client.read_snapshot(target, name, node_selector, cached=cached)
    # With -l only the matching Nodes are listed: rows and counts are of those nodes alone.
    view = build_view(
        snap.daemonjob, snap.jobs, snap.pods, snap.nodes, all_nodes=all_nodes, nodes_filtered=bool(node_selector)
    )
    return snap.daemonjob, with_recorded(target, name, snap.daemonjob, view)


def with_recorded(target: client.Target, name: str, dj: Mapping[str, Any], view: NodeView) -> NodeView:
    """Rows of finished Jobs whose pod is gone get the recorded result's exit code and message
    (one list of the rollout's reports, only when such a row exists); with
    spec.results.deleteSucceededJobs a node with no Job is succeeded by its recorded result."""
    let_go = read_spec(dj).delete_succeeded_jobs
    gone = [r for r in view.rows if r.job and not r.pod and r.state in (FAILED, SUCCEEDED)]
    if let_go:
        gone += [r for r in view.rows if not r.job and r.state == PENDING and not r.ineligible]
    if not gone:
        return view
    try:
        rollout = results.rollout_of(dj, view.revision, view.run)
        kept = {r.get("jobUID"): r for r in results.list_results(target, name, rollout)}
    except ApiError as exc:
        if exc.status in (403, 404):  # no reports readable (an older install, or no such right): as before
            return view
        raise
    ids = {id(r) for r in gone}
    by_node = {r.get("node"): r for r in kept.values() if r.get("state") == SUCCEEDED} if let_go else {}
    rows = [
        _recorded_row(r, kept.get(r.job_uid) if r.job else by_node.get(r.node)) if id(r) in ids else r
        for r in view.rows
    ]
    return replace(view, rows=rows, counts=count_rows(rows, view.hidden_not_selected))


def _recorded_row(row: NodeRow, result: Mapping[str, Any] | None) -> NodeRow:
    if result is None:
        return row
    code = result.get("exitCode")
    if not row.job:  # its Job was let go: the record stands for it (the row shows no Job: there is none)
        row = replace(row, state=SUCCEEDED, revision=str(result.get("revision") or row.revision))
    return replace(
        row,
        exit_code=code if isinstance(code, int) else row.exit_code,
        reason=str(result.get("reason") or row.reason),
        message=str(result.get("message") or row.message),
        started=parse_time(result.get("startTime")) or row.started,
        finished=parse_time(result.get("finishTime")) or row.finished,
    )


def select_rows(rows: list[NodeRow], nodes: list[str] | None, failed: bool) -> list[NodeRow]:
    if nodes:
        wanted = set(nodes)
        rows = [r for r in rows if r.node in wanted]
    if failed:
        rows = [r for r in rows if r.state == FAILED]
    return rows


def header_lines(dj: Mapping[str, Any], view: NodeView, selector: str | None = None) -> list[str]:
    meta = dj.get("metadata") or {}
    status = dj.get("status") or {}
    c = view.counts
    title = f'daemonjob "{meta.get("name")}" in namespace "{meta.get("namespace")}": revision {view.revision}'
    if view.run:
        title += f", run {view.run}"
    started = parse_time(status.get("startTime"))
    if started is not None:
        title += f", started {human_duration((datetime.now(timezone.utc) - started).total_seconds())} ago"
    lines = [title]
    counts = (
        f"{c['desired']} desired, {c['succeeded']} succeeded, {c['failed']} failed, {c['active']} active, "
        f"{c['pending']} pending"
    )
    if c["terminating"]:
        counts += f", {c['terminating']} terminating"
    if c["ineligible"]:
        counts += f"; {c['ineligible']} nodes not eligible"
    if selector:
        counts += f" (of the nodes matching {selector}; the conditions below are of every node)"
    lines.append(counts)
    observed = status.get("observedGeneration")
    if observed is None or observed != meta.get("generation"):
        lines.append(f"waiting for the controller to observe generation {meta.get('generation')}")
    for cond in status.get("conditions") or ():
        if cond.get("status") == "True" and cond.get("type") in CONDITION_WORDS:
            lines.append(f"{CONDITION_WORDS[cond['type']]}: {cond.get('message') or cond.get('reason') or ''}")
    if (held := status.get("nodeMaintenance")) and isinstance(held, Mapping):
        lines.append(
            f"node maintenance: {held.get('cordonedNodes', 0)} cordoned, {held.get('drainingNodes', 0)} "
            f"draining, {held.get('uncordoningNodes', 0)} uncordoning"
            + (f", kept cordoned: {', '.join(held['keptCordonedNodes'])}" if held.get("keptCordonedNodes") else "")
        )
    if (held := gate_in_force(status)) is not None:
        lines.append(f"rollout gate: {held[0]} ({held[1]})")
    if (line := schedule_line(dj, datetime.now(timezone.utc))) is not None:
        lines.append(line)
    if read_spec(dj).settings.suspend:
        lines.append(f"suspended: no new node is started (kubectl daemonjob resume {meta.get('name')})")
    if view.spec_error:
        lines.append(f"invalid spec: {view.spec_error}")
    return lines


def _ago(then: datetime | None, now: datetime) -> str:
    if then is None:
        return "never"
    seconds = (now - then).total_seconds()
    return f"in {human_duration(-seconds)}" if seconds < 0 else f"{human_duration(seconds)} ago"


def schedule_line(dj: Mapping[str, Any], now: datetime) -> str | None:
    """SCHEDULE, LAST SCHEDULE and NEXT of a scheduled DaemonJob in one line, as `kubectl get cronjob` has them."""
    spec = read_spec(dj)
    if not spec.runs.expression:
        return None
    status = dj.get("status") or {}
    line = f"schedule {spec.runs.expression!r} ({spec.runs.time_zone or 'UTC'})"
    line += f", last schedule {_ago(parse_time(status.get('lastScheduleTime')), now)}"
    nxt = parse_time(status.get("nextScheduleTime"))
    line += f", next {_ago(nxt, now)}" if nxt else (", next: none while suspended" if spec.settings.suspend else "")
    if status.get("lastSuccessfulTime"):
        line += f", last successful run {_ago(parse_time(status['lastSuccessfulTime']), now)}"
    return line


def table_row(row: NodeRow, now: datetime, wide: bool) -> list[str]:
    started = f"{human_duration((now - row.started).total_seconds())} ago" if row.started else ""
    duration = between(row.started, row.finished or (now if row.state == "active" else None))
    message = row.message if wide else output.shorten(row.message, defaults.PLUGIN_MESSAGE_WIDTH)
    state = f"{row.state} ({row.maintenance})" if row.maintenance and row.maintenance != row.reason else row.state
    cells = [
        row.node,
        state,
        row.job,
        str(row.attempt) if row.job else "",
        started,
        duration,
        "" if row.exit_code is None else str(row.exit_code),
        row.reason,
        message,
    ]
    if wide:
        cells += [row.pod, row.revision, row.ineligible]
    return cells


def document(dj: Mapping[str, Any], view: NodeView, rows: list[NodeRow], selector: str | None = None) -> dict[str, Any]:
    meta = dj.get("metadata") or {}
    return {
        "name": meta.get("name"),
        "namespace": meta.get("namespace"),
        "revision": view.revision,
        "run": view.run,
        "generation": meta.get("generation"),
        "observedGeneration": (dj.get("status") or {}).get("observedGeneration"),
        "nodeSelector": selector,
        "counts": view.counts,
        "conditions": (dj.get("status") or {}).get("conditions") or [],
        **_schedule_fields(dj),
        "rolloutGate": _gate_field(dj),
        "nodes": [r.to_dict() for r in rows],
    }


def _gate_field(dj: Mapping[str, Any]) -> dict[str, Any] | None:
    """The rollout gate holding new nodes back (spec.rollout), as the Reconciling condition says; None: none."""
    status = dj.get("status") or {}
    held = gate_in_force(status)
    if held is None:
        return None
    message = next(
        (
            c.get("message")
            for c in status.get("conditions") or ()
            if isinstance(c, Mapping) and c.get("type") == "Reconciling"
        ),
        None,
    )
    return {"gate": held[0], "reason": held[1], "message": message}


def _schedule_fields(dj: Mapping[str, Any]) -> dict[str, Any]:
    runs, status = read_spec(dj).runs, dj.get("status") or {}
    if not runs.expression:
        return {}
    return {
        "schedule": runs.expression,
        "timeZone": runs.time_zone or "UTC",
        **{k: status.get(k) for k in ("lastScheduleTime", "nextScheduleTime", "lastSuccessfulTime")},
    }


def run(args: argparse.Namespace, target: client.Target) -> int:
    selector = args.node_selector
    dj, view = load_view(target, args.name, selector, args.all_nodes, cached=True)
    rows = select_rows(view.rows, args.node, args.failed)
    if args.node:
        missing = sorted(set(args.node) - {r.node for r in view.rows})
        for node in missing:
            print(
                f'node "{node}" is not known to this DaemonJob (no such node, or not selected and never run on)',
                file=sys.stderr,
            )
    code = EXIT_FAILED_NODES if any(r.state == FAILED for r in rows) else 0
    if output.emit(
        args.output,
        document=lambda: document(dj, view, rows, selector),
        items=lambda: [r.to_dict() for r in rows],
        names=lambda: (f"node/{r.node}" for r in rows),
        no_headers=args.no_headers,
    ):
        return code
    now = datetime.now(timezone.utc)
    wide = output.kind(args.output) == "wide"
    table = [table_row(r, now, wide) for r in rows]
    if args.no_headers:  # the rows alone, for a script
        if table:
            output.print_table(WIDE_HEADERS if wide else HEADERS, table, state_column=1, no_headers=True)
        return code
    print("\n".join(header_lines(dj, view, selector)))
    print()
    if table:
        output.print_table(WIDE_HEADERS if wide else HEADERS, table, state_column=1)
    else:
        print("No nodes to show.")
    if view.hidden_not_selected and not args.node and not args.failed:
        print(f"\n{view.hidden_not_selected} other nodes are not selected by the DaemonJob (--all-nodes lists them).")
    return code
