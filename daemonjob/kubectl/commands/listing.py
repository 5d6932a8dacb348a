"""`list`: the DaemonJobs of a namespace (or all, -A), with their counts and verdict."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any

from daemonjob.domain.shared.apinames import API_VERSION
from daemonjob.domain.shared.timestamps import parse_time
from daemonjob.domain.spec.validate import read_spec
from daemonjob.kubectl.cluster import client
from daemonjob.kubectl.commands.wait import progress_of
from daemonjob.kubectl.formats import output
from daemonjob.kubectl.formats.timefmt import human_duration
from daemonjob.kubectl.views.nodes import current_run
from daemonjob.machinery.client.kube import path_for

HEADERS = ["NAME", "REVISION", "DESIRED", "SUCCEEDED", "FAILED", "ACTIVE", "PENDING", "STATUS", "AGE"]
WIDE_HEADERS = [*HEADERS, "RUN", "SCHEDULE", "SUSPENDED", "MAX PARALLEL"]


def name_of(dj: Mapping[str, Any]) -> str:
    """kubectl's `-o name` for a DaemonJob: resource.group/name."""
    return f"{client.KIND_RESOURCE}/{dj['metadata']['name']}"


def table_row(dj: Mapping[str, Any], now: datetime, wide: bool) -> list[str]:
    p = progress_of(dj)
    meta, status = dj["metadata"], dj.get("status") or {}
    created = parse_time(meta.get("creationTimestamp"))
    row = [
        meta["name"],
        status.get("currentRevision") or "",
        str(p.desired),
        str(p.succeeded),
        str(p.failed),
        str(p.active),
        str(p.pending),
        p.verdict or "InProgress",
        human_duration((now - created).total_seconds()) if created else "",
    ]
    if wide:
        spec = read_spec(dj)
        row += [
            current_run(dj) or "",
            spec.runs.expression or "",
            "true" if spec.settings.suspend else "false",
            "" if spec.settings.max_parallel is None else str(spec.settings.max_parallel),
        ]
    return row


def run(args: argparse.Namespace, target: client.Target) -> int:
    ns = None if target.all_namespaces else target.namespace
    params = {"labelSelector": args.selector} if args.selector else {}
    items = target.kube.get(path_for(API_VERSION, client.PLURAL, ns), **params)["items"]
    items.sort(key=lambda d: (d["metadata"].get("namespace", ""), d["metadata"]["name"]))
    if output.emit(
        args.output,
        document=lambda: {"apiVersion": "v1", "kind": "List", "items": items},
        items=lambda: items,
        names=lambda: map(name_of, items),
        no_headers=args.no_headers,
    ):
        return 0
    if not items:
        where = "any namespace" if ns is None else f"{ns} namespace"
        print(f"No resources found in {where}.", file=sys.stderr)  # as kubectl get: stdout stays the table's
        return 0
    now = datetime.now(timezone.utc)
    wide = output.kind(args.output) == "wide"
    headers = WIDE_HEADERS if wide else HEADERS
    rows = [table_row(dj, now, wide) for dj in items]
    if ns is None:
        headers = ["NAMESPACE", *headers]
        rows = [[dj["metadata"].get("namespace", ""), *row] for dj, row in zip(items, rows, strict=True)]
    output.print_table(headers, rows, no_headers=args.no_headers)
    return 0
