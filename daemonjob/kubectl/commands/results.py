"""`results NAME`: every node's recorded result, or the nodes grouped by outcome.

Read from the DaemonJobReports the controller keeps (one list, however many nodes), so it
answers after the pods, the Jobs and even the nodes are gone. A node retried shows its
latest attempt. Exit 3 when a shown node failed, as `status` does. Without the reports' CRD
(the API server answers 404 for its resource) it says so and how to install it, rather than
the API server's bare "404 page not found".
"""

from __future__ import annotations

import argparse
import csv
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from daemonjob import defaults
from daemonjob.domain.jobs.contract import FAILED
from daemonjob.domain.results.noderesult import rollout_key
from daemonjob.domain.results.outcomes import Group, Outcomes
from daemonjob.domain.results.reports import LABEL_ROLLOUT, PLURAL
from daemonjob.domain.shared.apinames import API_VERSION, LABEL_NAME
from daemonjob.domain.shared.timestamps import parse_time
from daemonjob.kubectl.cluster import client
from daemonjob.kubectl.formats import output
from daemonjob.kubectl.formats.timefmt import between
from daemonjob.machinery.client.kube import ApiError, path_for

EXIT_FAILED_NODES = client.EXIT_FAILED
HEADERS = ["NODE", "STATE", "EXIT CODE", "REASON", "DURATION", "FINISHED", "MESSAGE"]
WIDE_HEADERS = [*HEADERS[:-1], "JOB", "ATTEMPT", "MESSAGE"]
CSV_FIELDS = ["node", "state", "exitCode", "reason", "startTime", "finishTime", "job", "attempt", "revision", "run"]
GROUP_HEADERS = ["NODES", "SHARE", "FAILED", "EXIT CODE", "OUTCOME", "FOR EXAMPLE"]
GROUP_NAMES = 3  # node names a group's row shows
REPORTS_CRD = f"{PLURAL}.daemonjob.io"
REPORTS_CRD_INSTALL = "kubectl apply -f manifests/reports-crd.yaml"
CRD_MISSING = (
    f"the DaemonJobReport CRD ({REPORTS_CRD}) is not installed, so no results are recorded: "
    f"install it with `{REPORTS_CRD_INSTALL}` (the controller records them once it is there)"
)


def rollout_of(dj: Mapping[str, Any], revision: str | None, run: str | None) -> str:
    """The rollout asked for: --run, --revision, else the current run or revision."""
    status = dj.get("status") or {}
    if run or revision:
        return rollout_key(revision, run)
    return rollout_key(status.get("currentRevision"), status.get("currentRun"))


def list_results(target: client.Target, name: str, rollout: str) -> list[dict[str, Any]]:
    """Every result of the rollout in one list request (the reports of all its chunks)."""
    selector = f"{LABEL_NAME}={name}" + (f",{LABEL_ROLLOUT}={rollout}" if rollout else "")
    items = target.kube.get(path_for(API_VERSION, PLURAL, target.namespace), labelSelector=selector)["items"]
    items.sort(key=lambda r: int(r.get("chunk") or 0))
    return [r for report in items for r in report.get("results") or ()]


def latest_per_node(results: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    latest: dict[str, Mapping[str, Any]] = {}
    for r in results:
        node = str(r.get("node") or "")
        order = (int(r.get("attempt") or 0), str(r.get("finishTime") or ""))
        seen = latest.get(node)
        if seen is None or order >= (int(seen.get("attempt") or 0), str(seen.get("finishTime") or "")):
            latest[node] = r
    return [latest[n] for n in sorted(latest)]


def select(results: list[Mapping[str, Any]], nodes: list[str] | None, failed: bool) -> list[Mapping[str, Any]]:
    if nodes:
        wanted = set(nodes)
        results = [r for r in results if r.get("node") in wanted]
    if failed:
        results = [r for r in results if r.get("state") == FAILED]
    return results


def _cell(value: Any) -> str:
    return "" if value is None else str(value)


def table_row(r: Mapping[str, Any], wide: bool) -> list[str]:
    message = str(r.get("message") or "")
    started, finished = parse_time(r.get("startTime")), parse_time(r.get("finishTime"))
    cells = [_cell(r.get("node")), _cell(r.get("state")), _cell(r.get("exitCode")), _cell(r.get("reason"))]
    cells += [between(started, finished), _cell(r.get("finishTime"))]
    if wide:
        return [*cells, _cell(r.get("job")), _cell(r.get("attempt") or 0), message.replace("\n", "\\n")]
    return [*cells, output.shorten(message, defaults.PLUGIN_MESSAGE_WIDTH)]


def group_rows(groups: Sequence[Group], total: int) -> list[list[str]]:
    rows = []
    for g in groups:
        names = ", ".join(g.nodes[:GROUP_NAMES]) + (
            f", ... (+{g.count - GROUP_NAMES})" if g.count > GROUP_NAMES else ""
        )
        share = f"{100 * g.count / total:.1f}%" if total else ""
        outcome = output.shorten(g.message, defaults.PLUGIN_MESSAGE_WIDTH) or "(empty)"
        rows.append([str(g.count), share, str(g.failed), _cell(g.exit_code), outcome, names])
    return rows


def write_csv(results: Sequence[Mapping[str, Any]], stream: Any = None, headers: bool = True) -> None:
    writer = csv.writer(stream or sys.stdout, lineterminator="\n")
    if headers:
        writer.writerow([*CSV_FIELDS, "message"])
    for r in results:
        writer.writerow([_cell(r.get(f)) for f in CSV_FIELDS] + [str(r.get("message") or "")])


def run(args: argparse.Namespace, target: client.Target) -> int:
    dj = client.get_daemonjob(target, args.name)
    rollout = rollout_of(dj, args.revision, args.run_name)
    try:
        recorded = list_results(target, args.name, rollout)
    except ApiError as exc:
        if exc.not_found:  # a list answers 404 only when the resource is not served
            raise client.PluginError(CRD_MISSING) from exc
        raise
    shown = select(latest_per_node(recorded), args.node, args.failed)
    group_by = args.group_by
    grouped = Outcomes(None if group_by == "message" else group_by, names=None).extend(shown) if group_by else None
    doc_groups = [g.to_dict() for g in grouped.groups()] if grouped is not None else None
    meta = dj.get("metadata") or {}
    doc: dict[str, Any] = {"name": meta.get("name"), "namespace": meta.get("namespace"), "rollout": rollout}
    if doc_groups is not None:
        doc |= {"groupBy": group_by, "groups": doc_groups}
    doc["results"] = list(shown)
    code = EXIT_FAILED_NODES if any(r.get("state") == FAILED for r in shown) else 0
    if output.emit(
        args.output,
        document=lambda: doc,
        items=lambda: doc_groups if doc_groups is not None else doc["results"],
        names=lambda: (f"node/{r.get('node')}" for r in shown),
        no_headers=args.no_headers,
    ):
        return code
    if output.kind(args.output) == "csv":
        write_csv(shown, headers=not args.no_headers)
    elif not shown:
        print(f'No results recorded for daemonjob "{args.name}" (rollout {rollout or "none yet"}).', file=sys.stderr)
    elif grouped is not None:
        if not args.no_headers:
            by = "message" if group_by == "message" else group_by
            print(f"{len(shown)} nodes, {len(grouped)} outcomes by {by} (rollout {rollout}):")
        output.print_table(GROUP_HEADERS, group_rows(grouped.groups(), len(shown)), no_headers=args.no_headers)
    else:
        wide = output.kind(args.output) == "wide"
        rows = [table_row(r, wide) for r in shown]
        output.print_table(WIDE_HEADERS if wide else HEADERS, rows, state_column=1, no_headers=args.no_headers)
    return code
