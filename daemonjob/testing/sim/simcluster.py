"""A cluster that exists only as the API answers it: the `Server` of `memapi.MemKube` for
benchmarks at 65,000 nodes on one machine.

Nodes are numbered and made when listed or joined, never stored. Jobs are sent on the watch
as the API server sends them (pod template, managedFields) and then forgotten: the Job
controller's stand-in here starts each one (`active: 1`) and ends it Complete `job_seconds`
later, each a MODIFIED event; what is kept is a byte per (DaemonJob, node). A finished Job's
delete (spec.results.deleteSucceededJobs) is answered as the API server and the garbage
collector answer it: a MODIFIED event with its deletionTimestamp, the DELETED one
`delete_seconds` later. A Job's uid
names its DaemonJob and node, so the pods a result read asks for (`controller-uid in (...)`)
are made from the uid alone. DaemonJobs are kept whole (their status patches merged);
report objects and Events are counted, not kept.
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Mapping
from typing import Any

import orjson

from daemonjob.controller.results.store import POD_JOB_LABEL
from daemonjob.domain.results.reports import PLURAL as REPORTS
from daemonjob.domain.shared.apinames import ANNOTATION_NODE, LABEL_NAME
from daemonjob.machinery.client.watchstream import Decode
from daemonjob.testing.sim.memapi import Answer, MemStream, Request, Watches, status_error
from daemonjob.testing.sim.simjobs import (
    CREATED,
    JobTemplate,
    api_time,
    as_served,
    job_uid,
    node_index,
    node_name,
)
from daemonjob.testing.sim.simnode import NodeSpec, node_body
from daemonjob.testing.sim.simresults import FINISHED, SimReports, finished_pods

__all__ = ["SimCluster"]

NONE, CREATED_STATE, DELETED = 0, 1, 3


class SimCluster:
    """Nodes, DaemonJobs, their Jobs, pods and reports as one API server answers for them."""

    def __init__(
        self, nodes: int, job_seconds: float = 1.0, start_seconds: float = 0.1, delete_seconds: float = 0.1
    ) -> None:
        self.nodes = nodes  # nodes 0..nodes-1 exist
        self.job_seconds, self.start_seconds, self.delete_seconds = job_seconds, start_seconds, delete_seconds
        self._lock = threading.Condition()
        self._rv = 1
        self.watches = {kind: Watches() for kind in ("nodes", "jobs", "daemonjobs")}
        self.daemonjobs: dict[str, dict[str, Any]] = {}  # ns/name -> the object
        self._dj_index: dict[str, int] = {}  # name -> its index in `states`
        self.states: list[bytearray] = []  # per DaemonJob, per node: NONE, CREATED_STATE, FINISHED, DELETED
        self.created = 0
        self.finished = 0
        self.deleted = 0  # finished Jobs deleted (their DELETED event sent)
        self.duplicates = 0  # creates of a second Job for one (DaemonJob, node)
        self.created_at: dict[int, list[float]] = {}  # joined node -> monotonic times of its Jobs' creates
        self.reports = SimReports()
        self.unexpected: collections.Counter[str] = collections.Counter()
        self._templates: dict[int, JobTemplate] = {}  # by DaemonJob: its Jobs differ in name and node only
        # due, DaemonJob, node, name, creationTimestamp
        self._starting: collections.deque[tuple[float, int, int, str, str]] = collections.deque()
        self._running: collections.deque[tuple[float, int, int, str, str]] = collections.deque()
        self._deleting: collections.deque[tuple[float, int, int, str, str]] = collections.deque()
        self.in_flight_max = 0
        self._stopped = threading.Event()
        self.thread = threading.Thread(target=self._job_controller, name="sim-job-controller", daemon=True)

    # -- the bench's side ------------------------------------------------------------------
    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self._stopped.set()
        with self._lock:
            self._lock.notify_all()
        self.thread.join(5)
        for w in self.watches.values():
            w.close()

    def _next_rv(self) -> int:
        self._rv += 1
        return self._rv

    def add_daemonjob(self, dj: dict[str, Any]) -> None:
        meta = dj["metadata"]
        with self._lock:
            rv = self._next_rv()
            self._dj_index[meta["name"]] = len(self.states)
            self.states.append(bytearray(self.nodes + 1000))
            meta.update(resourceVersion=str(rv), generation=1, creationTimestamp=api_time())
            self.daemonjobs[f"{meta['namespace']}/{meta['name']}"] = dj
            self.watches["daemonjobs"].send(rv, meta["namespace"], "ADDED", orjson.dumps(dj))

    def join_node(self) -> int:
        """A node registers; returns its index."""
        with self._lock:
            index = self.nodes
            self.nodes += 1
            self.created_at[index] = []
            rv = self._next_rv()
            self.watches["nodes"].send(rv, None, "ADDED", orjson.dumps(self._node(index, rv)))
        return index

    def wait(self, predicate: Any, timeout: float) -> bool:
        """Until `predicate()` holds (checked under the lock, at each create and finish)."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while not predicate():
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._lock.wait(min(left, 1.0))
        return True

    def complete(self, key: str) -> bool:
        """Whether the DaemonJob's last status says Complete."""
        status = self.daemonjobs[key].get("status") or {}
        return any(c.get("type") == "Complete" and c.get("status") == "True" for c in status.get("conditions") or ())

    @property
    def results(self) -> int:
        """Results appended to reports."""
        return self.reports.results

    def backlog(self) -> int:
        return sum(w.backlog() for w in self.watches.values())

    # -- requests --------------------------------------------------------------------------
    def handle(self, r: Request) -> Answer:
        key = (r.method, r.resource, r.name is not None, r.subresource)
        if key == ("GET", "nodes", False, None):
            return self._list_nodes(r.params)
        if r.resource == "jobs":
            return self._jobs(r)
        if r.resource == "daemonjobs":
            return self._daemonjobs(r)
        if key == ("GET", "pods", False, None):
            return self._pods(r)
        if r.resource == REPORTS:
            return self._reports(r)
        if key == ("POST", "events", False, None):
            return 201, r.body or b"{}"
        self.unexpected[f"{r.method} {r.resource}"] += 1
        return status_error(404, "NotFound", f"{r.resource} not served by the simulation")

    def watch(self, r: Request, since: int, decode: Decode) -> MemStream | Answer:
        if r.resource not in self.watches:
            return status_error(404, "NotFound", f"no watch of {r.resource}")
        return self.watches[r.resource].open(r.namespace, since, decode)

    def _list(self, items: list[Any], rv: int, cont: str | None = None) -> Answer:
        meta: dict[str, Any] = {"resourceVersion": str(rv)}
        if cont:
            meta["continue"] = cont
        return 200, orjson.dumps({"kind": "List", "apiVersion": "v1", "metadata": meta, "items": items})

    # -- nodes -----------------------------------------------------------------------------
    def _node(self, index: int, rv: int) -> dict[str, Any]:
        body = node_body(NodeSpec(node_name(index), boot_id="sim"))
        body["metadata"].update(uid=job_uid(0xFFFF, index), resourceVersion=str(rv), creationTimestamp=CREATED)
        return body

    def _list_nodes(self, params: Mapping[str, Any]) -> Answer:
        limit = int(params.get("limit") or 500)
        cont = str(params.get("continue") or "")  # the next index, the list's size and resourceVersion
        with self._lock:
            start, total, rv = (int(x) for x in cont.split(":")) if cont else (0, self.nodes, self._rv)
        end = min(start + limit, total)
        more = f"{end}:{total}:{rv}" if end < total else None
        return self._list([self._node(i, rv) for i in range(start, end)], rv, more)

    # -- Jobs ------------------------------------------------------------------------------
    def _jobs(self, r: Request) -> Answer:
        if r.method == "GET" and r.name is None:
            if self.created:
                self.unexpected["Job list after the first"] += 1
            return self._list([], self._rv)
        if r.method == "POST" and r.name is None:
            return self._create_job(r)
        if r.method == "GET" and r.name is not None:
            return self._get_job(r.name)
        if r.method == "DELETE" and r.name is not None:
            return self._delete_job(r)
        self.unexpected[f"{r.method} jobs"] += 1
        return 200, b"{}"

    def _named(self, name: str) -> tuple[int | None, int]:
        """A Job's DaemonJob and node, read from its name (`<daemonjob>-node-<n>-<hash>`)."""
        dj_name, _, rest = name.partition("-node-")
        node = int(rest.split("-")[0]) if rest.split("-")[0].isdigit() else -1
        return self._dj_index.get(dj_name), node

    def _get_job(self, name: str) -> Answer:
        """A fresh read (the controller checks a late cache against it): the Job as it is now."""
        (dj, node), template = self._named(name), None
        with self._lock:
            if dj is not None and 0 <= node < len(self.states[dj]) and self.states[dj][node] not in (NONE, DELETED):
                template, state, rv = self._templates[dj], self.states[dj][node], self._rv
        if template is None or dj is None:
            return status_error(404, "NotFound", f'jobs.batch "{name}" not found')
        status = self._ended(api_time().encode()) if state == FINISHED else b"{}"
        return 200, template.render(name, node, dj, rv, status, api_time())

    def _create_job(self, r: Request) -> Answer:
        job = orjson.loads(r.body or b"{}")
        meta = job["metadata"]
        dj = self._dj_index[(meta.get("labels") or {})[LABEL_NAME]]
        node_label = (meta.get("annotations") or {})[ANNOTATION_NODE]
        node, name = node_index(node_label), meta["name"]
        meta["namespace"] = r.namespace
        with self._lock:
            if self.states[dj][node] != NONE:
                self.duplicates += 1
                return status_error(409, "AlreadyExists", f'jobs.batch "{name}" already exists')
            rv = self._next_rv()
            created = api_time()
            served = as_served(job, rv, job_uid(dj, node), created)
            template = self._templates.get(dj)
            if template is None:
                template = self._templates[dj] = JobTemplate(served, name, node_label)
            self.states[dj][node] = CREATED_STATE
            self.created += 1
            if node in self.created_at:
                self.created_at[node].append(time.monotonic())
            self.watches["jobs"].send(rv, r.namespace, "ADDED", (template.render, (name, node, dj, rv, b"{}", created)))
            self._starting.append((time.monotonic() + self.start_seconds, dj, node, name, created))
            self.in_flight_max = max(self.in_flight_max, len(self._starting) + len(self._running))
            self._lock.notify_all()
        return 201, r.body or b"{}"  # what the client asks not to decode (the watch brings the Job)

    def _delete_job(self, r: Request) -> Answer:
        """A finished Job's delete: MODIFIED with its deletionTimestamp now, DELETED a little later
        (its pod gone); a Job still running is not the controller's to delete here."""
        (dj, node), name = self._named(r.name or ""), r.name or ""
        with self._lock:
            state = self.states[dj][node] if dj is not None and 0 <= node < len(self.states[dj]) else NONE
            if dj is None or state != FINISHED:
                if state == CREATED_STATE:
                    self.unexpected["delete of a running Job"] += 1
                return status_error(404, "NotFound", f'jobs.batch "{name}" not found')
            self.states[dj][node] = DELETED
            stamp = api_time()
            created = stamp  # its creationTimestamp is not kept; nothing reads it of a deleted Job
            rv = self._next_rv()
            body = self._templates[dj].render(name, node, dj, rv, self._ended(stamp.encode()), created)
            self.watches["jobs"].send(rv, r.namespace, "MODIFIED", _terminating(body, stamp))
            self._deleting.append((time.monotonic() + self.delete_seconds, dj, node, name, created))
            self._lock.notify_all()
        return 200, b"{}"

    def _job_controller(self) -> None:
        """Starts each Job `start_seconds` after its create, ends it `job_seconds` later."""
        while not self._stopped.is_set():
            now = time.monotonic()
            with self._lock:
                due = [self._starting.popleft() for _ in range(len(self._starting)) if self._starting[0][0] <= now]
                done = [self._running.popleft() for _ in range(len(self._running)) if self._running[0][0] <= now]
                gone = [self._deleting.popleft() for _ in range(len(self._deleting)) if self._deleting[0][0] <= now]
                stamp = api_time().encode()
                started = b'{"active":1,"ready":0,"startTime":"' + stamp + b'"}'
                ended = self._ended(stamp)
                for _, dj, node, name, created in due:
                    self._modify(dj, node, name, started, created)
                    self._running.append((now + self.job_seconds, dj, node, name, created))
                for _, dj, node, name, created in done:
                    self._modify(dj, node, name, ended, created)
                    self.states[dj][node] = FINISHED
                    self.finished += 1
                for _, dj, node, name, created in gone:
                    rv = self._next_rv()
                    body = self._templates[dj].render(name, node, dj, rv, ended, created)
                    self.watches["jobs"].send(rv, self._templates[dj].namespace, "DELETED", _terminating(body, created))
                    self.deleted += 1
                if done or gone:
                    self._lock.notify_all()
            if not due and not done and not gone:
                self._stopped.wait(0.02)

    @staticmethod
    def _ended(stamp: bytes) -> bytes:
        return (
            b'{"succeeded":1,"ready":0,"startTime":"%s","completionTime":"%s","conditions":[{"type":'
            b'"Complete","status":"True","lastProbeTime":"%s","lastTransitionTime":"%s"}]}'
        ) % ((stamp,) * 4)

    def _modify(self, dj: int, node: int, name: str, status: bytes, created: str) -> None:
        rv, template = self._next_rv(), self._templates[dj]
        args = (name, node, dj, rv, status, created)
        self.watches["jobs"].send(rv, template.namespace, "MODIFIED", (template.render, args))

    def _pods(self, r: Request) -> Answer:
        """The pods of finished Jobs named by `controller-uid in (...)`: one each, succeeded."""
        selector = str(r.params.get("labelSelector") or "")
        prefix = f"{POD_JOB_LABEL} in ("
        if not selector.startswith(prefix):
            self.unexpected["pod list by another selector"] += 1
            return self._list([], self._rv)
        pods = finished_pods(selector[len(prefix) : -1].split(","), self.states, r.namespace)
        return self._list(pods, self._rv)

    # -- DaemonJobs and their reports ---------------------------------------------------------
    def _daemonjobs(self, r: Request) -> Answer:
        if r.method == "GET" and r.name is None:
            with self._lock:
                return self._list(list(self.daemonjobs.values()), self._rv)
        key = f"{r.namespace}/{r.name}"
        if key not in self.daemonjobs:
            return status_error(404, "NotFound", f'daemonjobs "{r.name}" not found')
        if r.method == "GET":
            return 200, orjson.dumps(self.daemonjobs[key])
        if r.method == "PATCH" and r.subresource == "status":
            patch = orjson.loads(r.body or b"{}")
            with self._lock:
                dj = self.daemonjobs[key]
                wanted = (patch.get("metadata") or {}).get("resourceVersion")
                if wanted and wanted != dj["metadata"]["resourceVersion"]:
                    return status_error(409, "Conflict", "the object has been modified")
                dj["status"] = _merged(dj.get("status") or {}, patch.get("status") or {})
                rv = self._next_rv()
                dj["metadata"]["resourceVersion"] = str(rv)
                obj = orjson.dumps(dj)
                self.watches["daemonjobs"].send(rv, r.namespace, "MODIFIED", obj)
                self._lock.notify_all()
            return 200, obj
        self.unexpected[f"{r.method} daemonjobs"] += 1
        return status_error(405, "MethodNotAllowed", "not simulated")

    def _reports(self, r: Request) -> Answer:
        with self._lock:
            if r.method == "GET" and r.name is None:
                self.reports.lists += 1
                return self._list([], self._rv)
            answer = self.reports.answer(r, self._next_rv)
            if answer is not None:
                self._lock.notify_all()
                return answer
        self.unexpected[f"{r.method} {REPORTS}"] += 1
        return status_error(404, "NotFound", f'{REPORTS} "{r.name}" not found')


def _terminating(body: bytes, stamp: str) -> bytes:
    """A Job's encoding with its deletionTimestamp and the foreground deletion's finalizer."""
    job = orjson.loads(body)
    job["metadata"].update(deletionTimestamp=stamp, finalizers=["foregroundDeletion"])
    return orjson.dumps(job)


def _merged(current: Mapping[str, Any], patch: Mapping[str, Any]) -> dict[str, Any]:
    """A JSON merge patch (RFC 7386): None removes a key, objects merge, the rest replaces."""
    out = dict(current)
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        elif isinstance(v, Mapping) and isinstance(out.get(k), Mapping):
            out[k] = _merged(out[k], v)
        else:
            out[k] = v
    return out
