"""`rerun NAME`: everywhere (a new revision, like `kubectl rollout restart`), or only some nodes.

Every node is a fleet-wide action, so it is never the default: without `--failed`, `--node`
or `--all` the command asks on a terminal and refuses elsewhere (scripts, CI), as `kubectl
drain` refuses DaemonSet pods without its flag.

Deleting a node's Job of the current revision makes that node pending again, and the
controller runs it there again; no other node is touched. Preconditions on the Job's uid
keep a Job the controller has already recreated from being deleted by mistake.
"""

from __future__ import annotations

import argparse
import sys
from datetime import datetime, timezone

from daemonjob.domain.jobs.contract import FAILED, SUCCEEDED
from daemonjob.domain.shared.apinames import API_VERSION
from daemonjob.domain.shared.timestamps import format_time
from daemonjob.kubectl.cluster import client
from daemonjob.kubectl.commands.status import load_view
from daemonjob.kubectl.formats.output import is_terminal
from daemonjob.kubectl.views.nodes import NodeRow
from daemonjob.machinery.client.kube import ApiError, path_for

ANNOTATION_RERUN_AT = "daemonjob.io/rerun-at"


def rerun_patch(now: datetime) -> dict:
    return {"spec": {"jobTemplate": {"metadata": {"annotations": {ANNOTATION_RERUN_AT: format_time(now)}}}}}


def confirm(question: str, assume_yes: bool) -> bool:
    """Ask on a terminal; elsewhere (scripts, CI) proceed, as `--yes` would."""
    if assume_yes or not interactive():
        return True
    sys.stderr.write(f"{question} [y/N] ")
    sys.stderr.flush()
    return sys.stdin.readline().strip().lower() in ("y", "yes")


def pick(rows: list[NodeRow], nodes: list[str] | None, failed: bool) -> tuple[list[NodeRow], list[str]]:
    """Rows whose Job to delete, and complaints about named nodes that have none."""
    by_node = {r.node: r for r in rows}
    if failed:
        return [r for r in rows if r.state == FAILED and r.job], []
    chosen, problems = [], []
    for node in nodes or ():
        row = by_node.get(node)
        if row is None:
            problems.append(f'node "{node}" is not known to this DaemonJob')
        elif not row.job and row.state == SUCCEEDED:
            problems.append(
                f'node "{node}" has no Job to delete: its result stands for it (spec.results.deleteSucceededJobs); '
                "`rerun NAME --all` re-runs every node"
            )
        elif not row.job:
            problems.append(f'node "{node}" has no Job of the current revision ({row.state}): nothing to re-run')
        else:
            chosen.append(row)
    return chosen, problems


def _names(rows: list[NodeRow]) -> str:
    names = [r.node for r in rows]
    return ", ".join(names[:10]) + (f" and {len(names) - 10} more" if len(names) > 10 else "")


NO_SCOPE = "say which nodes: --failed, --node NODE, or --all for every eligible node (a new revision)"


def interactive() -> bool:
    return sys.stdin.isatty() and is_terminal(sys.stderr)


def run(args: argparse.Namespace, target: client.Target) -> int:
    if not args.failed and not args.node:
        if not args.all and (args.yes or not interactive()):  # no one to ask: never every node by default
            raise client.PluginError(NO_SCOPE, client.EXIT_USAGE)
        client.get_daemonjob(target, args.name)  # "not found" in kubectl's words
        if not confirm(f'Re-run daemonjob "{args.name}" on every eligible node (a new revision)?', args.yes):
            print("cancelled", file=sys.stderr)
            return client.EXIT_ERROR
        target.kube.patch(
            path_for(API_VERSION, client.PLURAL, target.namespace, args.name), rerun_patch(datetime.now(timezone.utc))
        )
        print(f"daemonjob.daemonjob.io/{args.name} restarted")
        return 0
    _, view = load_view(target, args.name, all_nodes=True)
    chosen, problems = pick(view.rows, args.node, args.failed)
    for p in problems:
        print(f"error: {p}", file=sys.stderr)
    if not chosen:
        if args.failed:
            print(f'daemonjob "{args.name}" has no failed node: nothing to re-run')
        return 1 if problems else 0
    if not confirm(f"Re-run {len(chosen)} node(s) ({_names(chosen)}) by deleting their Jobs?", args.yes):
        print("cancelled", file=sys.stderr)
        return 1
    code = 1 if problems else 0
    for row in chosen:
        try:
            target.kube.delete(
                path_for("batch/v1", "jobs", target.namespace, row.job),
                {"propagationPolicy": "Background", "preconditions": {"uid": row.job_uid}},
            )
        except ApiError as exc:
            if exc.not_found or exc.conflict:
                print(f"job.batch/{row.job} (node {row.node}) is already gone", file=sys.stderr)
                continue
            print(f"error: job.batch/{row.job} (node {row.node}): {exc.message}", file=sys.stderr)
            code = 1
            continue
        print(f"job.batch/{row.job} deleted (node {row.node}): it will run again")
    return code
