"""`logs NAME`: every node's output, fetched concurrently with a bound, prefixed by node.

A node whose pod or log is gone is reported on stderr and the others still print: on 500
nodes a few always are. `--output-dir` writes one file per node (and container) instead.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import urllib3

from daemonjob import defaults
from daemonjob.kubectl.cluster import client
from daemonjob.kubectl.commands.status import load_view, select_rows
from daemonjob.kubectl.formats.timefmt import parse_duration
from daemonjob.kubectl.views.nodes import NodeRow
from daemonjob.machinery.client.kube import ApiError, path_for


@dataclass(frozen=True, slots=True)
class LogResult:
    node: str
    container: str
    text: str = ""
    error: str = ""


def log_params(args: argparse.Namespace, container: str) -> dict[str, Any]:
    params: dict[str, Any] = {"container": container}
    if args.tail is not None and args.tail >= 0:
        params["tailLines"] = args.tail
    if args.since:
        params["sinceSeconds"] = max(1, int(parse_duration(args.since)))
    if args.timestamps:
        params["timestamps"] = True
    return params


def requests_for(rows: list[NodeRow], container: str | None) -> tuple[list[tuple[NodeRow, str]], list[LogResult]]:
    """(node, container) pairs to fetch, and the nodes that have nothing to fetch, with why."""
    wanted: list[tuple[NodeRow, str]] = []
    missing: list[LogResult] = []
    for row in rows:
        if not row.job:
            continue  # pending or ineligible: nothing ran there
        if not row.pod:
            missing.append(LogResult(row.node, container or "", error=f"job {row.job} has no pod left"))
            continue
        names = [container] if container else list(row.containers)
        if container and container not in row.containers:
            missing.append(LogResult(row.node, container, error=f'pod {row.pod} has no container "{container}"'))
            continue
        wanted.extend((row, c) for c in names)
    return wanted, missing


def fetch(target: client.Target, args: argparse.Namespace, row: NodeRow, container: str) -> LogResult:
    try:
        text = target.kube.get_text(
            path_for("v1", "pods", target.namespace, row.pod, "log"),
            timeout=defaults.PLUGIN_LOG_TIMEOUT,
            **log_params(args, container),
        )
    except ApiError as exc:
        return LogResult(row.node, container, error=exc.message or str(exc))
    except urllib3.exceptions.HTTPError as exc:
        return LogResult(row.node, container, error=str(exc))
    return LogResult(row.node, container, text=text)


def fetch_all(
    target: client.Target, args: argparse.Namespace, wanted: list[tuple[NodeRow, str]]
) -> Iterator[LogResult]:
    """Results in node order, each yielded as soon as it and those before it are in."""
    workers = max(1, min(args.max_concurrent, len(wanted) or 1))
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="logs") as pool:
        yield from pool.map(lambda rc: fetch(target, args, rc[0], rc[1]), wanted)


def prefix_lines(text: str, prefix: str) -> str:
    return "".join(f"{prefix}{line}\n" for line in text.splitlines())


def file_name(node: str, container: str, several: bool) -> str:
    base = f"{node}.{container}" if several else node
    return base.replace(os.sep, "_") + ".log"


def run(args: argparse.Namespace, target: client.Target) -> int:
    _, view = load_view(target, args.name, args.node_selector)
    rows = select_rows(view.rows, args.node, args.failed)
    wanted, missing = requests_for(rows, args.container)
    several = {row.node: len(row.containers) > 1 and not args.container for row, _ in wanted}
    if args.output_dir:
        os.makedirs(args.output_dir, exist_ok=True)
    written = 0
    problems = list(missing)
    for result in fetch_all(target, args, wanted):
        if result.error:
            problems.append(result)
            continue
        multi = several.get(result.node, False)
        if args.output_dir:
            path = os.path.join(args.output_dir, file_name(result.node, result.container, multi))
            with open(path, "w", encoding="utf-8") as f:
                f.write(result.text)
            written += 1
        else:
            prefix = (
                "" if args.no_prefix else (f"[{result.node}/{result.container}] " if multi else f"[{result.node}] ")
            )
            sys.stdout.write(prefix_lines(result.text, prefix))
            sys.stdout.flush()
    for p in sorted(problems, key=lambda r: r.node):
        print(f"{p.node}: no log: {p.error}", file=sys.stderr)
    if args.output_dir:
        print(f"wrote {written} log files to {args.output_dir}", file=sys.stderr)
    if not wanted and not missing:
        print("no node has run this DaemonJob's current revision yet", file=sys.stderr)
    return 0
