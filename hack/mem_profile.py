"""Where the controller's memory goes in the bench's join phase, measured in one process.

`make bench NODES=5000` reports the controller's peak RSS; it peaks while 10 DaemonJobs over
5000 nodes have 50,000 Jobs in the caches. This builds the same state without a cluster: a
Controller on the fake informers (with the production transforms and indexes), 5000 nodes of
the bench's pool, 10 DaemonJobs shaped like the bench's, one succeeded Job of each on every
node (as the API server returns them once the simulated Job controller ended them), a pass
over each DaemonJob, then a few node joins (a pass creates the Jobs, they show and succeed,
a pass counts them). It prints RSS after each phase and the peak (VmHWM), and with `--trace`
what tracemalloc attributes to each source line, grouped by file and by line.

    .venv/bin/python hack/mem_profile.py [--nodes 5000] [--daemonjobs 10] [--converge] [--trace] [--top 25]

It reads only what every version of the controller offers (the fakes, `Controller.reconcile`),
so two commits can be compared: `PYTHONPATH=<other worktree> .venv/bin/python hack/mem_profile.py`.
RSS also counts the imports (the process imports what `python -m daemonjob` does) and, with
`--trace`, tracemalloc's own bookkeeping: compare RSS without it.
"""

from __future__ import annotations

import argparse
import gc
import itertools
import linecache
import os
import sys
import time
import tracemalloc
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta, timezone
from typing import Any

import daemonjob
import daemonjob.cli
from daemonjob import logsetup
from daemonjob.controller.wiring.controller import Controller
from daemonjob.domain.jobs.jobbody import build_job
from daemonjob.domain.shared.apinames import API_VERSION, KIND
from daemonjob.domain.spec.revision import template_revision
from daemonjob.machinery.process.clock import FakeClock
from daemonjob.machinery.process.malloc import limit_malloc_arenas
from daemonjob.testing.doubles.fakes import FakeJobControl, fake_informers

POOL_LABEL, POOL = "bench.daemonjob.io/pool", "bench"  # as hack/bench.py labels its nodes
FINISHED_PER_SECOND = 300  # Jobs the bench's simulated Job controller ends per second: they share a status


def status_kb(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def fmt_time(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def daemonjob_body(name: str, i: int) -> dict[str, Any]:
    """A DaemonJob as hack/bench.py makes it, as the API server returns it."""
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {
            "name": name,
            "namespace": f"bench-dj-{name}",
            "uid": f"00000000-0000-0000-0000-{i:012d}",
            "generation": 1,
            "resourceVersion": "1",
            "creationTimestamp": "2026-11-24T10:00:00Z",
        },
        "spec": {
            "nodeSelector": {"matchLabels": {POOL_LABEL: POOL}},
            "jobTemplate": {
                "metadata": {"labels": {"app": "bench-dj"}},
                "spec": {
                    "backoffLimit": 0,
                    "template": {
                        "metadata": {"annotations": {"sim.daemonjob.io/duration": "0.0"}},
                        "spec": {
                            "restartPolicy": "Never",
                            "terminationGracePeriodSeconds": 0,
                            "containers": [{"name": "work", "image": "busybox:1.36", "command": ["true"]}],
                        },
                    },
                },
            },
        },
    }


def node_body(name: str) -> dict[str, Any]:
    """A simulated node of the bench's pool (the cache keeps name, uid, labels, taints)."""
    return {
        "metadata": {
            "name": name,
            "uid": f"uid-{name}",
            "resourceVersion": "1",
            "labels": {POOL_LABEL: POOL, "kubernetes.io/hostname": name},
        },
        "spec": {"taints": []},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    }


def job_body(
    dj: dict[str, Any],
    node: str,
    revision: str,
    template_hash: str | None,
    created: datetime,
    finished: datetime | None,
    serial: int,
) -> dict[str, Any]:
    """A Job the controller created, as the API server returns it (succeeded if `finished`)."""
    body = build_job(dj, node, revision, template_hash=template_hash)
    meta = body["metadata"]
    meta.update(
        namespace=dj["metadata"]["namespace"],
        uid=f"job-uid-{serial:012d}",
        resourceVersion=str(serial),
        generation=1,
        creationTimestamp=fmt_time(created),
    )
    status: dict[str, Any] = {"startTime": fmt_time(created)}
    if finished is not None:
        now = fmt_time(finished)
        status.update(
            succeeded=1,
            completionTime=now,
            conditions=[{"type": "Complete", "status": "True", "lastProbeTime": now, "lastTransitionTime": now}],
        )
    body["status"] = status
    return body


_created = itertools.count(1)


class LeanJobControl(FakeJobControl):
    """Creates Jobs as the API server would, keeping of each only what the Jobs cache shows (its
    metadata) and no record of the call: 45,000 full bodies would outweigh the controller."""

    def create_job(self, namespace: str, body: Mapping[str, Any]) -> None:
        meta = dict(
            body["metadata"],
            namespace=namespace,
            uid=f"created-{next(_created):012d}",
            creationTimestamp="2026-11-24T11:00:00Z",
        )
        job = {"metadata": meta, "status": {}}
        with self._lock:
            self.objects[f"{namespace}/{meta['name']}"] = job
            self._pending.append(("add", job))


class Bed:
    def __init__(self, daemonjobs: int) -> None:
        self.clock = FakeClock()
        self.informers = fake_informers()
        self.control = LeanJobControl(jobs=self.informers.jobs)
        self.ctl = Controller(self.informers, self.control, clock=self.clock, resync_interval=0)
        self.djs = [daemonjob_body(f"bench-{i:02d}", i) for i in range(daemonjobs)]
        self.keys = [f"{d['metadata']['namespace']}/{d['metadata']['name']}" for d in self.djs]
        self.rv = 1
        self.serial = 0

    def apply_statuses(self) -> None:
        """The last status patch of each DaemonJob is in its cached object (the API server merged it)."""
        last: dict[tuple[str, str], dict[str, Any]] = {}
        for call in self.control.of("status"):
            last[(call.namespace, call.name)] = call.body
        self.control.reset()
        for dj in self.djs:
            body = last.get((dj["metadata"]["namespace"], dj["metadata"]["name"]))
            if body is None:
                continue
            status = dict(dj.get("status") or {})
            for k, v in body.items():
                if v is None:
                    status.pop(k, None)
                else:
                    status[k] = v
            self.rv += 1
            dj["status"] = status
            dj["metadata"]["resourceVersion"] = str(self.rv)
            self.informers.daemonjobs.update(dj)

    def passes(self) -> None:
        for key in self.keys:
            try:
                self.ctl.reconcile(key)
            except Exception as exc:  # a failed write is retried in production; here it is shown
                print(f"  pass over {key} failed: {exc}", file=sys.stderr)
        self.apply_statuses()

    def finish_created(self, when: datetime) -> None:
        """The Jobs created so far show in the cache, then succeed."""
        self.control.deliver()
        for job in list(self.control.objects.values()):
            if not (job.get("status") or {}).get("conditions"):
                now = fmt_time(when)
                job["status"] = {
                    "succeeded": 1,
                    "startTime": now,
                    "completionTime": now,
                    "conditions": [
                        {"type": "Complete", "status": "True", "lastProbeTime": now, "lastTransitionTime": now}
                    ],
                }
                self.informers.jobs.update(job)
        self.control.objects.clear()  # the API server's copies are no part of the controller


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nodes", type=int, default=5000)
    p.add_argument("--daemonjobs", type=int, default=10)
    p.add_argument("--joins", type=int, default=5)
    p.add_argument(
        "--converge",
        action="store_true",
        help="the Jobs of the DaemonJobs after the first created by the controller's passes, as in the "
        "bench (only what the cache shows of them kept on the API server's side)",
    )
    p.add_argument("--trace", action="store_true", help="tracemalloc: what each source line holds")
    p.add_argument("--top", type=int, default=25, help="lines shown per tracemalloc table")
    args = p.parse_args()
    limit_malloc_arenas()  # as the controller process does, before any thread
    logsetup.configure("warning")  # as the bench runs it
    root = os.path.dirname(os.path.dirname(os.path.abspath(daemonjob.__file__)))
    print(f"code: {root}  nodes={args.nodes} daemonjobs={args.daemonjobs} trace={args.trace}")
    snapshots: list[tuple[str, tracemalloc.Snapshot]] = []
    rows: list[tuple[str, int, int, float]] = []

    def phase(name: str, started: float) -> None:
        gc.collect()
        rss, hwm = status_kb("VmRSS"), status_kb("VmHWM")
        rows.append((name, rss, hwm, time.monotonic() - started))
        print(
            f"  {name:<40} RSS {rss / 1024:7.1f} MB  peak {hwm / 1024:7.1f} MB  ({time.monotonic() - started:.1f}s)",
            flush=True,
        )
        if args.trace:
            snapshots.append((name, tracemalloc.take_snapshot()))

    if args.trace:
        tracemalloc.start(1)  # from here on: the imports are not traced
    t = time.monotonic()
    phase("imports", t)
    bed = Bed(args.daemonjobs)
    t = time.monotonic()
    for dj in bed.djs:
        bed.informers.daemonjobs.add(dj)
    phase(f"controller, {args.daemonjobs} DaemonJobs", t)

    t = time.monotonic()
    names = [f"bench-{i:05d}" for i in range(args.nodes)]
    for name in names:
        bed.informers.nodes.add(node_body(name))
    phase(f"{args.nodes} nodes cached", t)

    t = time.monotonic()
    start = datetime(2026, 11, 24, 10, 0, tzinfo=timezone.utc)
    for d, dj in enumerate(bed.djs[:1] if args.converge else bed.djs):
        revision = template_hash = template_revision(dj["spec"]["jobTemplate"])  # a new DaemonJob's first
        for n, name in enumerate(names):
            bed.serial += 1
            k = d * len(names) + n
            created = start + timedelta(seconds=k // FINISHED_PER_SECOND)
            finished = created + timedelta(seconds=2)
            bed.informers.jobs.add(job_body(dj, name, revision, template_hash, created, finished, bed.serial))
    phase(f"{len(bed.informers.jobs.store)} succeeded Jobs cached", t)

    if args.converge:
        t = time.monotonic()
        when = start + timedelta(minutes=30)
        for rounds in range(1, 100):  # noqa: B007 - read after the loop: how many it took
            bed.passes()
            if not bed.control.objects:
                break
            when += timedelta(seconds=1)
            bed.finish_created(when)
        phase(f"{len(bed.informers.jobs.store)} Jobs after {rounds} rounds of passes", t)

    t = time.monotonic()
    bed.passes()  # each kept plan loaded whole, the status written
    bed.passes()  # a pass with nothing to do
    phase("a pass over each DaemonJob (twice)", t)
    counts = {k: v for k, v in (bed.djs[-1].get("status") or {}).items() if type(v) is int}
    print(f"  {bed.keys[-1]} status: {counts}")

    t = time.monotonic()
    when = start + timedelta(hours=1)
    for j in range(args.joins):
        name = f"bench-join-{j:03d}"
        bed.informers.nodes.add(node_body(name))
        bed.passes()  # creates its Jobs
        when += timedelta(seconds=1)
        bed.finish_created(when)
        bed.passes()  # counts them
    phase(f"{args.joins} node joins", t)

    print("\nphase                                         RSS MB  peak MB")
    for name, rss, hwm, _ in rows:
        print(f"{name:<44} {rss / 1024:7.1f}  {hwm / 1024:7.1f}")
    if args.trace:
        current, peak = tracemalloc.get_traced_memory()
        print(f"tracemalloc: {current / 2**20:.1f} MB traced now, {peak / 2**20:.1f} MB at most")
        report(snapshots, root, args.top)
    bed.ctl.stop(timeout=1)
    return 0


def _short(filename: str, root: str) -> str:
    if filename.startswith(root + os.sep):
        return filename[len(root) + 1 :]
    parts = filename.split(os.sep)
    return os.sep.join(parts[-3:])


def report(snapshots: list[tuple[str, tracemalloc.Snapshot]], root: str, top: int) -> None:
    """What each file and line holds at the end, and what each phase added."""
    final = snapshots[-1][1].filter_traces([tracemalloc.Filter(False, tracemalloc.__file__)])

    def table(title: str, stats: list[Any], label: Callable[[Any], str]) -> None:
        print(f"\n{title}")
        for stat in stats[:top]:
            size = getattr(stat, "size_diff", stat.size)
            count = getattr(stat, "count_diff", stat.count)
            print(f"{size / 2**20:8.2f} MB {count:9d} blocks  {label(stat)}")

    def where(stat: Any) -> str:
        frame = stat.traceback[0]
        line = linecache.getline(frame.filename, frame.lineno).strip()
        return f"{_short(frame.filename, root)}:{frame.lineno}  {line[:90]}"

    table("held at the end, by file", final.statistics("filename"), lambda s: _short(s.traceback[0].filename, root))
    table("held at the end, by line", final.statistics("lineno"), where)
    for (_, before), (name, after) in zip(snapshots, snapshots[1:], strict=False):
        stats = [s for s in after.compare_to(before, "lineno") if s.size_diff]
        stats.sort(key=lambda s: -abs(s.size_diff))
        table(f"added by the phase '{name}', by line", stats, where)


if __name__ == "__main__":
    sys.exit(main())
