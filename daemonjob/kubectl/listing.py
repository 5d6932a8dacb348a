"""`list`: the DaemonJobs of a namespace (or all, -A), with their counts and verdict."""

from __future__ import annotations

import argparse
from datetime import datetime, timezone

from daemonjob.domain.jobs import API_VERSION, parse_time
from daemonjob.kubectl import client, output
from daemonjob.kubectl.timefmt import human_duration
from daemonjob.kubectl.wait import progress_of
from daemonjob.machinery.kube import path_for


def run(args: argparse.Namespace, target: client.Target) -> int:
    ns = None if target.all_namespaces else target.namespace
    params = {"labelSelector": args.selector} if args.selector else {}
    items = target.kube.get(path_for(API_VERSION, client.PLURAL, ns), **params)["items"]
    if args.output in ("json", "yaml"):
        output.dump({"apiVersion": "v1", "kind": "List", "items": items}, args.output)
        return 0
    if not items:
        where = "any namespace" if ns is None else f"{ns} namespace"
        print(f"No resources found in {where}.")
        return 0
    now = datetime.now(timezone.utc)
    headers = ["NAME", "REVISION", "DESIRED", "SUCCEEDED", "FAILED", "ACTIVE", "PENDING", "STATUS", "AGE"]
    if ns is None:
        headers.insert(0, "NAMESPACE")
    rows = []
    for dj in sorted(items, key=lambda d: (d["metadata"].get("namespace", ""), d["metadata"]["name"])):
        p = progress_of(dj)
        created = parse_time(dj["metadata"].get("creationTimestamp"))
        row = [
            dj["metadata"]["name"],
            (dj.get("status") or {}).get("currentRevision") or "",
            str(p.desired),
            str(p.succeeded),
            str(p.failed),
            str(p.active),
            str(p.pending),
            p.verdict or "InProgress",
            human_duration((now - created).total_seconds()) if created else "",
        ]
        if ns is None:
            row.insert(0, dj["metadata"].get("namespace", ""))
        rows.append(row)
    output.print_table(headers, rows)
    return 0
