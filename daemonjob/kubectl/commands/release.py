"""`release NAME --node N` (or `--all`): end the cordon of nodes a DaemonJob keeps cordoned
after their Job failed (spec.nodeMaintenance.keepFailedCordoned).

The controller holds the node's record, so it does the uncordon: this writes the request,
the `daemonjob.io/release` annotation (domain/nodework/releases.py), naming each node with the cordon
it ends (its record's `since`), as `promote` and `run-now` write theirs. A node that carries
no record of this DaemonJob, or one held for a Job that has not failed (released when that Job
ends), is refused by name and nothing is written. Entries whose cordon has ended already
are dropped from the annotation as it is written again.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from typing import Any

from daemonjob.domain.nodework.releases import ANNOTATION_RELEASE, release_requests, release_text
from daemonjob.domain.shared.apinames import API_VERSION
from daemonjob.domain.shared.noderecord import NodeRecord, record_of
from daemonjob.kubectl.cluster import client
from daemonjob.kubectl.cluster.client import PluginError
from daemonjob.machinery.client.conflicts import retry_on_conflict
from daemonjob.machinery.client.kube import ApiError, path_for


def release_patch(requests: Mapping[str, str], resource_version: str) -> dict[str, Any]:
    """A merge patch carrying the resourceVersion read, so a request written in between is kept."""
    return {
        "metadata": {
            "resourceVersion": resource_version,
            "annotations": {ANNOTATION_RELEASE: release_text(requests) if requests else None},
        }
    }


def _kept_names(dj: Mapping[str, Any]) -> set[str]:
    """The status's kept nodes: a failure seen by the controller before its mark reached the Node."""
    maintenance = (dj.get("status") or {}).get("nodeMaintenance") or {}
    return {n for n in maintenance.get("keptCordonedNodes") or () if isinstance(n, str)}


def verdict(name: str, node: Mapping[str, Any] | None, dj: Mapping[str, Any]) -> NodeRecord | str:
    """The record to release on `node`, or why it cannot be released."""
    dj_name = (dj.get("metadata") or {}).get("name")
    if node is None:
        return f'Error from server (NotFound): nodes "{name}" not found'
    record = record_of(node)
    if record is None or record.uid != (dj.get("metadata") or {}).get("uid"):
        return f'node "{name}" is not held by daemonjob "{dj_name}": nothing to release'
    if not record.kept and name not in _kept_names(dj):
        return (
            f'node "{name}" is held by daemonjob "{dj_name}" for its Job, not kept cordoned: '
            "it is released when that Job ends"
        )
    return record


def _get_node(target: client.Target, name: str) -> dict[str, Any] | None:
    try:
        return target.kube.get(path_for("v1", "nodes", None, name))
    except ApiError as exc:
        if exc.not_found:
            return None
        raise


def chosen(target: client.Target, dj: Mapping[str, Any], nodes: list[str] | None) -> tuple[dict[str, str], list[str]]:
    """Node -> the `since` of the record to release, and the refusals of named nodes."""
    if nodes is None:  # --all
        uid = (dj.get("metadata") or {}).get("uid")
        named = _kept_names(dj)
        found = {}
        for node in client.list_nodes(target):
            record = record_of(node)
            name = node["metadata"]["name"]
            if record is not None and record.uid == uid and (record.kept or name in named):
                found[name] = record.since
        return found, []
    picked: dict[str, str] = {}
    problems: list[str] = []
    for name in dict.fromkeys(nodes):
        answer = verdict(name, _get_node(target, name), dj)
        if isinstance(answer, str):
            problems.append(answer)
        else:
            picked[name] = answer.since
    return picked, problems


def _still_held(target: client.Target, requests: Mapping[str, str], uid: str) -> dict[str, str]:
    """The requests whose cordon has not ended yet (the others match nothing any more)."""
    out = {}
    for name, since in requests.items():
        node = _get_node(target, name)
        record = record_of(node) if node is not None else None
        if record is not None and record.uid == uid and record.since == since:
            out[name] = since
    return out


def run(args: argparse.Namespace, target: client.Target) -> int:
    dry_run = args.dry_run != "none"
    suffix = " (dry run)" if dry_run else ""
    path = path_for(API_VERSION, client.PLURAL, target.namespace, args.name)

    def attempt() -> int:  # a conflict (a request written in between) is decided again on a fresh read
        dj = client.get_daemonjob(target, args.name)
        picked, problems = chosen(target, dj, None if args.all else args.node)
        if problems:  # nothing is written: each refused node is named
            for problem in problems[:-1]:
                print(problem if problem.startswith("Error from server") else f"error: {problem}", file=sys.stderr)
            raise PluginError(problems[-1])
        if not picked:
            print(f'daemonjob "{args.name}" keeps no node cordoned: nothing to release')
            return 0
        meta = dj.get("metadata") or {}
        earlier = {n: s for n, s in release_requests(dj).items() if n not in picked}
        requests = {**_still_held(target, earlier, meta.get("uid") or ""), **picked}
        if args.dry_run != "client":
            params: dict[str, Any] = {"dryRun": "All"} if dry_run else {}
            target.kube.patch(path, release_patch(requests, meta.get("resourceVersion") or ""), **params)
        for name in picked:
            print(f"node/{name} release requested ({client.KIND_RESOURCE}/{args.name}){suffix}")
        return 0

    return retry_on_conflict(attempt)
