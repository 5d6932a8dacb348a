"""The controller at 5,000, 20,000 and 65,000 nodes, without a cluster.

The real controller (informers, caches, work queue, workers, decision, result recorder,
status and Event writes, the process's Manager) runs on `daemonjob.testing.sim.memapi.MemKube`,
whose API server is a `SimCluster` in this process: NODES nodes listed at start, DJS
DaemonJobs created at once, each rolling out to every node (the simulation starts each Job
and ends it Complete, as MODIFIED watch events), their results read from pods made on
demand and recorded; then JOINS nodes join one at a time. The server's CPU (thread time
spent answering, and its Job controller's thread) is taken off the process's; the rest is
the controller's.

Prints, per size: peak RSS (VmHWM of the process: the simulation's share is small, it
keeps no Job), controller CPU per Job watch event over the rollouts, a join's latency (its
node's ADDED event to its DJS Job creates) p50 / p99 with its CPU and its decisions' CPU,
and the writes of one rollout by verb and resource. With --delete-succeeded-jobs the
DaemonJobs set spec.results.deleteSucceededJobs: a rollout ends once its Jobs are deleted,
and the joins meet DaemonJobs whose recorded results stand for their Jobs. Without --nodes, each size runs in a
process of its own (peak RSS only grows) and a table ends the output.
"""

from __future__ import annotations

import argparse
import gc
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import orjson

SIZES = (5000, 20000, 65000)
WRITE_VERBS = ("create", "update", "patch", "delete", "deletecollection")


def _thread_cpu(native_id: int | None) -> float:
    if native_id is None:
        return 0.0
    with open(f"/proc/self/task/{native_id}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _pool(name: str) -> str:
    """A thread's pool: `api-writer_3` is `api-writer`."""
    return name.rstrip("0123456789").rstrip("_-")


def _threads_cpu(kube: Any, sim: Any) -> Counter[str]:
    """The controller's CPU seconds by thread (the simulation's taken off)."""
    out: Counter[str] = Counter()
    for t in threading.enumerate():
        if t is not sim.thread:
            out[_pool(t.name)] += _thread_cpu(t.native_id)
    for name, seconds in kube.server_cpu_by_thread().items():
        out[_pool(name)] -= seconds
    return out


class Meter:
    """The controller's CPU seconds: the process's, less the simulation's."""

    def __init__(self, kube: Any, sim: Any) -> None:
        self.kube, self.sim = kube, sim

    def now(self) -> float:
        return time.process_time() - self.kube.server_cpu() - _thread_cpu(self.sim.thread.native_id)


def run_one(args: argparse.Namespace) -> dict[str, Any]:
    """One size, in this process; the figures as a dict."""
    from daemonjob import defaults, logsetup
    from daemonjob.controller.metrics.metrics import Metrics
    from daemonjob.controller.runtime.events import EventRecorder
    from daemonjob.controller.wiring.controller import Controller
    from daemonjob.machinery.cache.gcpolicy import FreezeSurvivors
    from daemonjob.machinery.process.clock import RealClock
    from daemonjob.machinery.process.malloc import limit_malloc_arenas
    from daemonjob.machinery.queue.ratelimit import TokenBucket
    from daemonjob.manager import Manager
    from daemonjob.testing.doubles.builders import daemonjob
    from daemonjob.testing.sim.memapi import MemKube
    from daemonjob.testing.sim.simcluster import SimCluster

    logsetup.configure(args.log_level, "json")
    qps = args.recorded_delete_qps  # read by the history cleaner when it is made
    defaults.RECORDED_DELETE_QPS, defaults.RECORDED_DELETE_BURST = qps, max(1, int(qps))
    limit_malloc_arenas()
    n, d = args.nodes, args.daemonjobs
    out: dict[str, Any] = {"nodes": n, "daemonjobs": d, "delete_succeeded_jobs": args.delete_succeeded_jobs}
    sim = SimCluster(n, job_seconds=args.job_seconds)
    kube = MemKube(sim, TokenBucket(args.kube_api_qps, args.kube_api_burst))
    clock = RealClock()
    metrics = Metrics()
    events = EventRecorder(kube, host="bench-sim", clock=clock)  # type: ignore[arg-type]
    ctl = Controller.for_kube(kube, metrics=metrics, events=events, clock=clock, workers=args.workers)  # type: ignore[arg-type]
    decided = [0.0, 0]
    plain_decided = ctl.router.decided

    def decided_hook(key: str, seconds: float) -> None:
        decided[0] += seconds
        decided[1] += 1
        plain_decided(key, seconds)

    ctl.router.decided = decided_hook  # type: ignore[method-assign]
    workers_up = threading.Event()
    plain_start = ctl.start_workers

    def start_workers() -> None:
        plain_start()
        workers_up.set()

    ctl.start_workers = start_workers  # type: ignore[method-assign]
    gc_policy = FreezeSurvivors()
    gc_policy.install()
    manager = Manager(ctl, events, metrics, gc_policy=gc_policy)
    sim.start()
    meter = Meter(kube, sim)
    started = time.monotonic()
    runner = threading.Thread(target=manager.run, name="manager", daemon=True)
    runner.start()
    try:
        _wait(workers_up.is_set, args.timeout, "the caches synced, the workers up")
        out["sync_s"] = time.monotonic() - started
        with profile(args, "rollouts"):
            rollout(args, sim, kube, meter, out, daemonjob)
        with profile(args, "joins"):
            joins(args, sim, meter, out, decided)
    except TimeoutError as exc:
        out["not_measured_further"] = str(exc)
    finally:
        out["peak_rss_mb"] = _status_kb("VmHWM") / 1024
        out["rss_mb"] = _status_kb("VmRSS") / 1024
        out["watch_backlog_max"] = max(w.max_backlog for w in sim.watches.values())
        out["jobs_in_flight_max"] = sim.in_flight_max
        out["duplicate_creates"] = sim.duplicates
        out["unexpected_requests"] = dict(sim.unexpected)
        manager.request_stop()
        runner.join(30)
        sim.stop()
    return out


def profile(args: argparse.Namespace, phase: str) -> Any:
    """--py-spy DIR: this process sampled through `phase` (collapsed stacks, every thread;
    the simulation's share shows under memapi and simcluster)."""
    from benchlib import PySpy

    return PySpy(os.getpid(), args.py_spy / f"{args.nodes}-{phase}.txt" if args.py_spy else None, fmt="raw")


def rollout(args: argparse.Namespace, sim: Any, kube: Any, meter: Meter, out: dict[str, Any], daemonjob: Any) -> None:
    n, d = args.nodes, args.daemonjobs
    gc.collect()
    requests0, cpu0, events0, t0 = Counter(kube.requests), meter.now(), sim.watches["jobs"].sent, time.monotonic()
    threads0 = _threads_cpu(kube, sim)
    stop_sampling = _sample_backlog(sim)
    keys = []
    for i in range(d):
        name = f"bench-{i:02d}"
        spec = {"results": {"deleteSucceededJobs": True}} if args.delete_succeeded_jobs else {}
        sim.add_daemonjob(daemonjob(name, "bench", uid=f"00000000-0000-4000-9000-{i:012d}", **spec))
        keys.append(f"bench/{name}")

    def done() -> bool:
        deleted = sim.deleted >= n * d or not args.delete_succeeded_jobs
        return sim.finished >= n * d and sim.results >= n * d and deleted and all(sim.complete(k) for k in keys)

    try:
        if not sim.wait(done, args.timeout):
            raise TimeoutError(
                f"rollouts: {sim.created} Jobs created, {sim.finished} finished, {sim.results} results,"
                f" {sim.deleted} deleted of {n * d}, {sum(sim.complete(k) for k in keys)} of {d} Complete"
                f" after {args.timeout:.0f} s"
            )
    finally:
        stop_sampling()
    seconds, cpu = time.monotonic() - t0, meter.now() - cpu0
    job_events = sim.watches["jobs"].sent - events0
    writes = {
        f"{verb} {res}": c - requests0[(verb, res)]
        for (verb, res), c in sorted(kube.requests.items())
        if c - requests0[(verb, res)] > 0 and verb != "watch"
    }
    threads = _threads_cpu(kube, sim)
    threads.subtract(threads0)
    out.update(
        rollout_thread_cpu_s={k: round(v, 1) for k, v in threads.most_common() if v >= 0.5},
        rollout_s=seconds,
        rollout_cpu_s=cpu,
        job_events=job_events,
        cpu_us_per_job_event=cpu / max(job_events, 1) * 1e6,
        requests_per_rollout={k: v / d for k, v in writes.items()},
        writes_per_rollout=sum(v for k, v in writes.items() if k.split()[0] in WRITE_VERBS) / d,
    )


def joins(args: argparse.Namespace, sim: Any, meter: Meter, out: dict[str, Any], decided: list[Any]) -> None:
    from benchlib import percentile

    d = args.daemonjobs
    latencies, firsts, cpus, decide_cpus, passes = [], [], [], [], []
    for _ in range(args.joins):
        cpu0, dec0, t0 = meter.now(), list(decided), time.monotonic()
        node = sim.join_node()
        if not sim.wait(lambda node=node: len(sim.created_at[node]) >= d, args.timeout):
            raise TimeoutError(f"join {len(latencies) + 1}: {len(sim.created_at[node])} of {d} Jobs")
        times = sim.created_at[node]
        latencies.append(max(times) - t0)
        firsts.append(min(times) - t0)
        time.sleep(args.join_interval)
        cpus.append(meter.now() - cpu0)
        decide_cpus.append(decided[0] - dec0[0])
        passes.append(decided[1] - dec0[1])
    out.update(
        join_p50_s=percentile(latencies, 50),
        join_p99_s=percentile(latencies, 99),
        join_first_p50_s=percentile(firsts, 50),
        join_cpu_s=sum(cpus) / max(len(cpus), 1),
        join_decide_cpu_s=sum(decide_cpus) / max(len(decide_cpus), 1),
        join_decide_cpu_p99_s=percentile(decide_cpus, 99),
        join_passes=sum(passes) / max(len(passes), 1),
        join_latencies=[round(x, 3) for x in latencies],
    )


def _sample_backlog(sim: Any) -> Any:
    """Samples the watches' backlog every 0.2 s (events sent and not yet read) until stopped."""
    stop = threading.Event()

    def run() -> None:
        while not stop.wait(0.2):
            for w in sim.watches.values():
                w.max_backlog = max(w.max_backlog, w.backlog())

    thread = threading.Thread(target=run, name="sim-backlog", daemon=True)
    thread.start()

    def stopper() -> None:
        stop.set()
        thread.join()

    return stopper


def _status_kb(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def _wait(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not after {timeout:.0f} s")
        time.sleep(0.05)


# -- output ------------------------------------------------------------------------------------
ROWS = [
    ("peak RSS, MB (goal <= 1024 at 65,000 x 10); RSS at the end", ("peak_rss_mb", "rss_mb"), "{:.0f}; {:.0f}"),
    ("caches synced, s", "sync_s", "{:.2f}"),
    ("rollouts: seconds; controller CPU s", ("rollout_s", "rollout_cpu_s"), "{:.0f}; {:.0f}"),
    ("controller CPU per Job event, us (goal: flat within 1.5x)", "cpu_us_per_job_event", "{:.0f}"),
    ("join latency p50 / p99, s (goal p99 <= 0.5)", ("join_p50_s", "join_p99_s"), "{:.3f} / {:.3f}"),
    ("controller CPU per join, s (goal: flat within 1.5x)", "join_cpu_s", "{:.3f}"),
    ("a join's decisions: CPU s, mean / p99", ("join_decide_cpu_s", "join_decide_cpu_p99_s"), "{:.3f} / {:.3f}"),
    ("writes per rollout (one DaemonJob)", "writes_per_rollout", "{:.0f}"),
]


def cell(figures: dict[str, Any], keys: Any, fmt: str) -> str:
    keys = keys if isinstance(keys, tuple) else (keys,)
    if any(k not in figures for k in keys):
        return "-"
    return fmt.format(*(figures[k] for k in keys))


def print_one(f: dict[str, Any]) -> None:
    deleting = " deleteSucceededJobs" if f.get("delete_succeeded_jobs") else ""
    print(f"nodes={f['nodes']} daemonjobs={f['daemonjobs']}{deleting}")
    for label, keys, fmt in ROWS:
        print(f"  {label}: {cell(f, keys, fmt)}")
    if "requests_per_rollout" in f:
        parts = ", ".join(f"{k} {v:.0f}" for k, v in f["requests_per_rollout"].items())
        print(f"  requests per rollout: {parts}")
    if "rollout_thread_cpu_s" in f:
        parts = ", ".join(f"{k} {v:.1f}" for k, v in f["rollout_thread_cpu_s"].items())
        print(f"  controller CPU s by thread over the rollouts: {parts}")
    if "join_latencies" in f:
        print(f"  join latencies (s): {' '.join(str(x) for x in f['join_latencies'])}")
    print(
        f"  simulation: watch backlog max {f['watch_backlog_max']} events, Jobs in flight max"
        f" {f['jobs_in_flight_max']}, duplicate creates {f['duplicate_creates']},"
        f" unexpected requests {f['unexpected_requests'] or 'none'}"
    )
    if "not_measured_further" in f:
        print(f"  NOT MEASURED FURTHER: {f['not_measured_further']}")
    sys.stdout.flush()


def print_table(runs: list[dict[str, Any]]) -> None:
    print("\n| figure | " + " | ".join(f"{r['nodes']:,} x {r['daemonjobs']}" for r in runs) + " |")
    print("|---|" + "---|" * len(runs))
    for label, keys, fmt in ROWS:
        print(f"| {label} | " + " | ".join(cell(r, keys, fmt) for r in runs) + " |")
    first, last = runs[0], runs[-1]
    for label, key in (("CPU per Job event", "cpu_us_per_job_event"), ("CPU per join", "join_cpu_s")):
        if key in first and key in last:
            print(f"{label}: {last['nodes']:,} / {first['nodes']:,} = {last[key] / first[key]:.2f} (goal <= 1.5)")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nodes", type=int, help=f"one size in this process; default: {SIZES}, each in a process")
    p.add_argument("--daemonjobs", type=int, default=10)
    p.add_argument("--joins", type=int, default=20)
    p.add_argument("--join-interval", type=float, default=0.5, help="seconds between two joins")
    p.add_argument("--job-seconds", type=float, default=1.0, help="how long a simulated Job runs")
    p.add_argument("--workers", type=int, default=4)
    p.add_argument(
        "--delete-succeeded-jobs",
        action="store_true",
        help="the DaemonJobs set spec.results.deleteSucceededJobs (a rollout ends with its Jobs deleted)",
    )
    p.add_argument(
        "--recorded-delete-qps",
        type=float,
        default=1000.0,
        help="the pace of deletes of recorded Jobs (the controller's default is"
        " defaults.RECORDED_DELETE_QPS; faster here, so a rollout's let-go does not take minutes)",
    )
    p.add_argument("--kube-api-qps", type=float, default=5000.0, help="the client's rate limit, as the benches run it")
    p.add_argument("--kube-api-burst", type=int, default=5000)
    p.add_argument("--timeout", type=float, default=3600.0, help="seconds each phase may take")
    p.add_argument("--log-level", default="info")
    p.add_argument("--json", action="store_true", help="the figures as one JSON line (for the table)")
    p.add_argument("--py-spy", type=Path, metavar="DIR", help="profiles into DIR: NODES-rollouts.txt, NODES-joins.txt")
    args = p.parse_args()
    if args.nodes is not None:
        figures = run_one(args)
        print(orjson.dumps(figures).decode()) if args.json else print_one(figures)
        return
    runs = []
    for size in SIZES:
        log = Path(tempfile.gettempdir()) / f"bench-sim-{size}.log"  # the controller's log
        with log.open("wb") as err:
            proc = subprocess.run(
                [sys.executable, __file__, "--nodes", str(size), "--json", *sys.argv[1:]],
                stdout=subprocess.PIPE,
                stderr=err,
                check=False,
            )
        lines = proc.stdout.decode().strip().splitlines()
        if proc.returncode != 0 or not lines:
            print(f"nodes={size}: the run failed (exit {proc.returncode}), its log: {log}")
            break
        runs.append(orjson.loads(lines[-1]))
        print_one(runs[-1])
    if runs:
        print_table(runs)


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    main()
