"""The results side of the simulated cluster: finished Jobs' pods made from their uids, reports counted."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import orjson

from daemonjob.controller.results.store import POD_JOB_LABEL
from daemonjob.domain.results.reports import PLURAL as REPORTS
from daemonjob.testing.sim.memapi import Answer, Request, status_error
from daemonjob.testing.sim.simjobs import api_time, node_name, of_uid

__all__ = ["FINISHED", "SimReports", "finished_pods"]

FINISHED = 2  # a (DaemonJob, node)'s state once its Job ended Complete


def finished_pods(uids: Iterable[str], states: list[bytearray], namespace: str | None) -> list[dict[str, Any]]:
    """The pods of the finished Jobs among `uids`: one each, succeeded."""
    pods = []
    for uid in uids:
        dj, node = of_uid(uid)
        if states[dj][node] != FINISHED:
            continue
        now = api_time()
        terminated = {"exitCode": 0, "reason": "Completed", "startedAt": now, "finishedAt": now}
        pods.append(
            {
                "metadata": {
                    "name": f"{uid[-17:]}-pod",
                    "namespace": namespace,
                    "labels": {POD_JOB_LABEL: uid},
                    "creationTimestamp": now,
                },
                "spec": {"nodeName": node_name(node)},
                "status": {
                    "phase": "Succeeded",
                    "containerStatuses": [{"name": "work", "state": {"terminated": terminated}}],
                },
            }
        )
    return pods


class SimReports:
    """Report objects counted, never kept: each one's result count, the results, the lists (a
    list always finds none)."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self.results = 0  # results appended to reports
        self.lists = 0

    def answer(self, r: Request, next_rv: Callable[[], int]) -> Answer | None:
        """The API server's answer to a create, patch or delete of a report; None when not simulated."""
        if r.method == "POST":
            body = orjson.loads(r.body or b"{}")
            name = body["metadata"]["name"]
            if name in self.counts:
                return status_error(409, "AlreadyExists", f'{REPORTS} "{name}" already exists')
            self.counts[name] = body.get("count") or 0
            self.results += len(body.get("results") or ())
            body["metadata"].update(uid=f"report-{len(self.counts)}", resourceVersion=str(next_rv()))
            return 201, orjson.dumps(body)
        if r.method == "PATCH" and r.name in self.counts:
            ops = orjson.loads(r.body or b"[]")
            test = next((op["value"] for op in ops if op["op"] == "test" and op["path"] == "/count"), None)
            if test is not None and test != self.counts[r.name]:
                return status_error(422, "Invalid", "the test operation failed")
            added = sum(1 for op in ops if op["op"] == "add")
            self.counts[r.name] += added
            self.results += added
            return 200, b"{}"
        if r.method == "DELETE":
            self.counts.pop(r.name or "", None)
            return 200, b"{}"
        return None
