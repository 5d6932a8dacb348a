"""The report objects that keep results: kind DaemonJobReport, one per rollout per chunk.

A rollout (a revision, or a run) of N nodes keeps its results in ceil(size / chunk)
objects of at most RESULT_CHUNK_BYTES of results each, so an object stays under the API
server's 1.5 MB; each is owned by the DaemonJob (removed with it) and labelled with it,
the revision, the run and the chunk's index, so one list by label reads them all.
Results are appended with a JSON patch guarded by the chunk's count: a retried append
whose first try went through fails the guard instead of adding the results twice.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from daemonjob import defaults
from daemonjob.domain.jobs.owners import owner_reference
from daemonjob.domain.shared.apinames import API_VERSION, LABEL_NAME, LABEL_REVISION, LABEL_RUN

__all__ = [
    "KIND",
    "PLURAL",
    "LABEL_CHUNK",
    "LABEL_ROLLOUT",
    "append_patch",
    "pack",
    "report_body",
    "report_name",
    "result_size",
]

KIND = "DaemonJobReport"
PLURAL = "daemonjobreports"
LABEL_CHUNK = "daemonjob.io/chunk"
LABEL_ROLLOUT = "daemonjob.io/rollout"  # the run, else the revision: what results are kept by
_NAME_MAX = 253


def report_name(daemonjob: str, rollout: str, chunk: int) -> str:
    """`<daemonjob>-<rollout>-<chunk>`, with a long DaemonJob name cut and a digest of it kept."""
    tail = f"-{rollout}-{chunk}"
    if len(daemonjob) + len(tail) <= _NAME_MAX:
        return daemonjob + tail
    digest = hashlib.sha256(daemonjob.encode()).hexdigest()[:10]
    return f"{daemonjob[: _NAME_MAX - len(tail) - 11].rstrip('-.')}-{digest}{tail}"


def result_size(result: Mapping[str, Any]) -> int:
    """Bytes a result takes in a report (its JSON and a separator)."""
    return len(orjson.dumps(result)) + 1


def report_body(
    dj: Mapping[str, Any],
    revision: str,
    run: str | None,
    rollout: str,
    chunk: int,
    results: Sequence[Mapping[str, Any]],
) -> dict[str, Any]:
    meta = dj.get("metadata") or {}
    name = meta.get("name") or ""
    labels = {LABEL_NAME: name, LABEL_REVISION: revision, LABEL_ROLLOUT: rollout, LABEL_CHUNK: str(chunk)}
    if run:
        labels[LABEL_RUN] = run
    body: dict[str, Any] = {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {
            "name": report_name(name, rollout, chunk),
            "namespace": meta.get("namespace"),
            "labels": labels,
            "ownerReferences": [owner_reference(dj)],
        },
        "daemonJob": name,
        "revision": revision,
        "chunk": chunk,
        "count": len(results),
        "results": [dict(r) for r in results],
    }
    if run:
        body["run"] = run
    return body


def append_patch(count: int, results: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """A JSON patch adding `results` to a chunk that holds `count`, refused if it holds another number."""
    ops: list[dict[str, Any]] = [{"op": "test", "path": "/count", "value": count}]
    ops += [{"op": "add", "path": "/results/-", "value": dict(r)} for r in results]
    ops.append({"op": "replace", "path": "/count", "value": count + len(results)})
    return ops


def pack(
    results: Sequence[Mapping[str, Any]],
    last_chunk: int,
    last_size: int,
    limit: int = defaults.RESULT_CHUNK_BYTES,
    append_limit: int = defaults.RESULT_APPEND_BYTES,
) -> list[tuple[int, list[Mapping[str, Any]]]]:
    """Which chunk each result goes to: the last one (`last_size` bytes full; -1: none yet)
    while an append leaves it within `append_limit`, then new ones of up to `limit`. The API
    server reads, checks and rewrites the whole object on an append (about 0.2 ms of its CPU per
    result held), and a create costs what it holds: results that trickle in after a large
    batch start a small chunk rather than rewrite the large one each time. A result is never
    split; one alone may fill a chunk."""
    out: list[tuple[int, list[Mapping[str, Any]]]] = []
    chunk, size = (last_chunk, last_size) if last_chunk >= 0 else (0, 0)
    room = min(append_limit, limit) if last_chunk >= 0 else limit
    current: list[Mapping[str, Any]] = []
    for r in results:
        n = result_size(r)
        if size + n > room and (size > 0 or current):
            if current:
                out.append((chunk, current))
            chunk, size, current, room = chunk + 1, 0, [], limit
        current.append(r)
        size += n
    if current:
        out.append((chunk, current))
    return out
