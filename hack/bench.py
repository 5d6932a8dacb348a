"""End-to-end benchmark of the controller against the built-in DaemonSet controller.

Scenario `default`: on one local control plane with N simulated nodes, in one run:
  (a) a DaemonSet over the nodes: seconds until N pods exist (the baseline), then its deletion;
  (b) the controller as a subprocess, one DaemonJob over the same nodes: seconds until N Jobs
      exist and until its Complete condition, with the controller's CPU and peak RSS;
  (c) node-join latency with D DaemonJobs converged: seconds from a node's registration until
      its D Jobs exist, over J joins;
  (d) idle cost once converged: API writes and lists per minute from the controller's metrics.
Both controllers run unthrottled (QPS/burst 5000), so the comparison is of work per object.
The limit ratio comes from (b)'s own CPU accounting: the seconds a controller of zero CPU
would take (the other processes' CPU seconds over the cores the phase kept busy) over (a)'s;
"controller / limit" is the ratio over it, the controller's own share of the rollout.

(a) and (b) run on the real kube-controller-manager, scheduler and simulated kubelet, so
Jobs run pods. For (c) and (d), the Job controller is switched off and a simulated one ends
each Job by a write to its status: what is measured there is the controller's time to
Jobs and its requests, in which pods play no part, while converging 50,000 Jobs through
pods would take most of an hour on two cores (some eight API writes per Job).
Each DaemonJob lives in a namespace of its own, as teams' DaemonJobs would.

Scenario `tick`: one scheduled DaemonJob with `historyLimit: 1` over N nodes (5000 by
default), its runs started by the schedule's ticks (`* * * * *`) or by run-now annotations.
A first run (the first rollout), then further runs while the earlier runs' Jobs exist: for
each, seconds from the tick or trigger to N new Jobs and to Complete, and the ratio to the
first rollout measured in the same run. The second run keeps every node's first Job as
history; from the third on, each node has a Job beyond `historyLimit` to delete, which is
the cost a scheduled run must not wait for. Jobs end through the simulated Job controller
throughout, so every run meets the same load and only the controller's work differs.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import benchlib
import urllib3

from daemonjob.domain.jobs.contract import job_run
from daemonjob.domain.schedule.runs import ANNOTATION_RUN_NOW
from daemonjob.domain.shared.apinames import ANNOTATION_NODE, API_VERSION, KIND, LABEL_NAME, PLURAL
from daemonjob.machinery.client.kube import Kube, path_for
from daemonjob.testing.cluster import ClusterOptions, LocalCluster, free_port
from daemonjob.testing.sim.jobcontroller import SimJobController
from daemonjob.testing.sim.kubelet import ANNOTATION_DURATION, NodeSpec, SimKubelet

POOL_LABEL = "bench.daemonjob.io/pool"
POOL = "bench"
DS_NAMESPACE = "bench-ds"
DJ_NAMESPACE_PREFIX = "bench-dj-"
DJ_PLURAL = PLURAL
UNTHROTTLED = 5000
CONVERGENCE_DURATION = 0.0  # Jobs of bench-01.. finish at once: only that they finish matters
SCENARIOS = ("default", "tick")
DEFAULT_NODES = {"default": 1000, "tick": 5000}
TICK_NAME = "bench-tick"
EVERY_MINUTE = "* * * * *"
# With run-now triggers, a schedule that does not tick during a benchmark: every run is
# started by a trigger, the first one included, so all of them are runs of one kind.
NEVER_DURING_BENCH = "0 0 1 1 *"
RUN_LABEL_TIME = "%Y%m%dt%H%M%Sz"  # a scheduled run's daemonjob.io/run label: its tick in UTC
TICK_LEAD = 0.3  # seconds before a scheduled tick that a run's measurement starts


@dataclass
class Results:
    rows: list[tuple[str, str, str]] = field(default_factory=list)  # (figure, value, target)
    notes: list[str] = field(default_factory=list)

    def add(self, figure: str, value: float | str, target: str = "", fmt: str = "{:.2f}") -> None:
        text = fmt.format(value) if isinstance(value, (int, float)) else value
        self.rows.append((figure, text, target))
        print(f"  {figure}: {text}", flush=True)

    def note(self, text: str) -> None:
        self.notes.append(text)
        print(f"  {text}", flush=True)

    def table(self) -> str:
        w0 = max(len(r[0]) for r in self.rows)
        w1 = max(len(r[1]) for r in self.rows)
        lines = [f"{'figure':<{w0}}  {'value':>{w1}}  target", "-" * (w0 + w1 + 12)]
        lines += [f"{a:<{w0}}  {b:>{w1}}  {c}" for a, b, c in self.rows]
        return "\n".join(lines + self.notes)


# -- bodies -------------------------------------------------------------------------------
def daemonset_body(seconds_running: int) -> dict[str, Any]:
    labels = {"app": "bench-ds"}
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "bench", "namespace": DS_NAMESPACE},
        "spec": {
            "selector": {"matchLabels": labels},
            "template": {
                # Pods keep running for the whole measurement: a finished pod would be replaced.
                "metadata": {"labels": labels, "annotations": {ANNOTATION_DURATION: str(seconds_running)}},
                "spec": {
                    "nodeSelector": {POOL_LABEL: POOL},
                    "terminationGracePeriodSeconds": 0,
                    "containers": [{"name": "work", "image": "registry.k8s.io/pause:3.2"}],
                },
            },
        },
    }


def daemonjob_body(name: str, duration: float, spec: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """`spec`: more fields of the DaemonJob's spec (say spec.results)."""
    body: dict[str, Any] = {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": name, "namespace": dj_namespace(name)},
        "spec": {
            "nodeSelector": {"matchLabels": {POOL_LABEL: POOL}},
            "jobTemplate": {
                "metadata": {"labels": {"app": "bench-dj"}},
                "spec": {
                    "backoffLimit": 0,
                    "template": {
                        "metadata": {"annotations": {ANNOTATION_DURATION: str(duration)}},
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
    body["spec"].update(spec or {})
    return body


def dj_namespace(name: str) -> str:
    return DJ_NAMESPACE_PREFIX + name


def create_daemonjob(kube: Kube, name: str, duration: float, spec: Mapping[str, Any] | None = None) -> None:
    benchlib.create_namespace(kube, dj_namespace(name))
    kube.create(path_for(API_VERSION, DJ_PLURAL, dj_namespace(name)), daemonjob_body(name, duration, spec))


def job_node(obj: Mapping[str, Any]) -> str | None:
    return ((obj.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION_NODE)


# -- the controller process ---------------------------------------------------------------
class ControllerProcess:
    """`python -m daemonjob` with its metrics and probes on loopback ports."""

    def __init__(self, kubeconfig: Path, log_path: Path, workers: int | None):
        self.metrics_port, self.health_port = free_port(), free_port()
        self.log_path = log_path
        cmd = [
            sys.executable,
            "-m",
            "daemonjob",
            "--kubeconfig",
            str(kubeconfig),
            "--kube-api-qps",
            str(UNTHROTTLED),
            "--kube-api-burst",
            str(UNTHROTTLED),
            "--metrics-bind-address",
            f"127.0.0.1:{self.metrics_port}",
            "--metrics-secure=false",
            "--webhook-bind-address=0",  # the local control plane reaches no webhook Service
            "--health-probe-bind-address",
            f"127.0.0.1:{self.health_port}",
            "--log-level",
            os.environ.get("BENCH_CONTROLLER_LOG_LEVEL", "warning"),
        ]
        if workers:
            cmd += ["--workers", str(workers)]
        with open(log_path, "ab") as log:
            self.proc = subprocess.Popen(
                cmd,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=benchlib.ROOT,
                preexec_fn=benchlib.die_with_parent,
            )

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.metrics_port}/metrics"

    def check(self) -> None:
        """Raise if the controller died: every wait calls this, so a crash fails fast."""
        if self.proc.poll() is not None:
            tail = self.log_path.read_text(errors="replace")[-3000:]
            raise RuntimeError(f"the controller exited with {self.proc.returncode}; log tail:\n{tail}")

    def wait_ready(self, timeout: float) -> float:
        def ready() -> bool:
            self.check()
            try:
                return benchlib.http_get(f"http://127.0.0.1:{self.health_port}/readyz", timeout=1.0)[0] == 200
            except urllib3.exceptions.HTTPError:  # not listening yet
                return False

        return benchlib.wait_until(ready, timeout, "the controller's /readyz", interval=0.1)

    def requests(self) -> dict[tuple[str, str], float]:
        return benchlib.api_requests(benchlib.scrape(self.metrics_url))

    def stop(self) -> None:
        benchlib.stop_process(self.proc)


def simulated_nodes(kube: Kube, n: int, writers: int, timeout: float) -> SimKubelet:
    """N nodes of the bench pool, registered and Ready, on a started simulated kubelet.

    Node heartbeats are off (the clusters run without the node lifecycle controller): at
    scale they would load the API server.
    """
    kubelet = SimKubelet(kube, heartbeat_interval=3600, clear_not_ready_taint=True, writers=writers)
    kubelet.start()
    try:
        names = [f"bench-{i:05d}" for i in range(n)]
        kubelet.add_nodes(NodeSpec(name, labels={POOL_LABEL: POOL}) for name in names)
        kubelet.wait_ready(names, timeout=timeout)
    except BaseException:
        kubelet.stop()
        raise
    return kubelet


# -- phases -------------------------------------------------------------------------------
def bench_daemonset(kube: Kube, n: int, timeout: float, res: Results, pids: Mapping[str, int]) -> float:
    """(a): seconds until the DaemonSet controller has created N pods."""
    benchlib.create_namespace(kube, DS_NAMESPACE)
    pods = benchlib.ObjectWatch(kube, path_for("v1", "pods", DS_NAMESPACE)).start()
    try:
        ds_path = path_for("apps/v1", "daemonsets", DS_NAMESPACE)
        shares = benchlib.CpuShares(pids)
        started = time.monotonic()
        kube.create(ds_path, daemonset_body(seconds_running=86400))
        pods.wait(lambda w: len(w.first_seen) >= n, timeout, f"{n} DaemonSet pods")
        used = shares.used()
        seconds = pods.time_of_nth(n) - started
        res.add(f"daemonset: seconds to {n} pods", seconds)
        res.note(f"daemonset: CPU until {n} pods: {benchlib.CpuShares.text(used, seconds)}")
        started = time.monotonic()
        kube.delete(f"{ds_path}/bench", {"propagationPolicy": "Background"})
        gone = pods.wait(lambda w: not w.live, timeout, "the DaemonSet's pods to be gone")
        res.add("daemonset: seconds until its pods are gone", gone - started)
        return seconds
    finally:
        pods.stop()


def wait_complete(kube: Kube, names: list[str], desired: int, timeout: float, check: Callable[[], None]) -> float:
    """Until every named DaemonJob is Complete over `desired` nodes; returns that time."""
    path = path_for(API_VERSION, DJ_PLURAL)
    wanted = set(names)

    def done() -> bool:
        check()
        items = kube.get(path).get("items") or []
        ok = {
            d["metadata"]["name"]
            for d in items
            if benchlib.condition_true(d, "Complete") and (d.get("status") or {}).get("desiredNodes") == desired
        }
        return wanted <= ok

    return benchlib.wait_until(
        done,
        timeout,
        f"{len(names)} DaemonJob(s) Complete over {desired} nodes",
        interval=0.1 if len(names) == 1 else 0.5,
    )


def gc_text(before: benchlib.Samples, after: benchlib.Samples) -> str:
    """The cyclic collector's pauses between two scrapes, by generation (python_gc_duration_seconds)."""
    parts = []
    for gen in ("1", "2"):
        key = ("generation", gen)
        count = after.get(("python_gc_duration_seconds_count", (key,)), 0.0) - before.get(
            ("python_gc_duration_seconds_count", (key,)), 0.0
        )
        total = after.get(("python_gc_duration_seconds_sum", (key,)), 0.0) - before.get(
            ("python_gc_duration_seconds_sum", (key,)), 0.0
        )
        parts.append(f"generation {gen}: {count:.0f} collections, {total:.2f}s")
    return "; ".join(parts)


def bench_rollout(
    kube: Kube, ctl: ControllerProcess, n: int, args: argparse.Namespace, res: Results, pids: Mapping[str, int]
) -> tuple[float, float]:
    """(b) and (e): one DaemonJob over N nodes; seconds to N Jobs, to Complete; CPU and RSS.
    Returns the seconds to N Jobs and those a controller of zero CPU would have taken."""
    benchlib.create_namespace(kube, dj_namespace("bench-00"))
    jobs = benchlib.ObjectWatch(kube, path_for("batch/v1", "jobs", dj_namespace("bench-00"))).start()
    try:
        before = ctl.requests()
        gc0 = benchlib.scrape(ctl.metrics_url)
        cpu0 = benchlib.cpu_seconds(ctl.pid)
        # Two profiles: until N Jobs (the figure the goal is about), then until Complete.
        with benchlib.PySpy(ctl.pid, args.py_spy / "rollout.json" if args.py_spy else None):
            shares = benchlib.CpuShares(pids)
            started = time.monotonic()
            create_daemonjob(kube, "bench-00", args.duration)

            def enough(w: benchlib.ObjectWatch) -> bool:
                ctl.check()
                return len(w.first_seen) >= n

            jobs.wait(enough, args.timeout, f"{n} Jobs")
            used = shares.used()
            seconds = jobs.time_of_nth(n) - started
            gc_pauses = gc_text(gc0, benchlib.scrape(ctl.metrics_url))
        # the figures until N Jobs are printed as soon as they are known, not after Complete
        res.add(f"daemonjob: seconds to {n} Jobs", seconds)
        res.note(f"daemonjob: CPU until {n} Jobs: {benchlib.CpuShares.text(used, seconds)}")
        res.note(f"controller's garbage collector until {n} Jobs: {gc_pauses}")
        res.add(f"controller CPU seconds until {n} Jobs", used.get("controller", 0.0), "<= 1.75 (N=5000)")
        with benchlib.PySpy(ctl.pid, args.py_spy / "rollout-complete.json" if args.py_spy else None):
            complete = wait_complete(kube, ["bench-00"], n, args.timeout, ctl.check)
        cpu = benchlib.cpu_seconds(ctl.pid) - cpu0
        delta = benchlib.request_delta(before, ctl.requests())
    finally:
        jobs.stop()
    res.add("daemonjob: seconds to Complete", complete - started)
    res.add("controller CPU seconds for the rollout", cpu)
    res.add("controller peak RSS so far, startup included (MB)", benchlib.hwm_mb(ctl.pid), fmt="{:.1f}")
    res.note(f"controller requests during the rollout: {requests_text(delta)}")
    return seconds, benchlib.limit_seconds(used, seconds, without="controller")


def join_nodes(
    kube: Kube,
    kubelet: SimKubelet,
    ctl: ControllerProcess,
    d: int,
    joins: int,
    interval: float,
    timeout: float,
    firsts: list[float] | None = None,
) -> list[float]:
    """Nodes joined one at a time: for each, seconds from its registration until its D Jobs exist
    (and, into `firsts`, until its first Job did).

    From the start of registration: the node is eligible once the simulated kubelet has
    cleared its not-ready taint, a few milliseconds later.
    """
    jobs = benchlib.ObjectWatch(kube, path_for("batch/v1", "jobs"), label_selector=LABEL_NAME, group=job_node).start(
        include_existing=False
    )
    latencies: list[float] = []
    try:
        for i in range(joins):
            node = f"bench-join-{i:03d}"
            started = time.monotonic()
            kubelet.add_nodes([NodeSpec(node, labels={POOL_LABEL: POOL})])

            def joined(w: benchlib.ObjectWatch, node: str = node) -> bool:
                ctl.check()
                return len(w.groups.get(node, ())) >= d

            jobs.wait(joined, timeout, f"{d} Jobs on {node}")
            latencies.append(jobs.time_of_nth(d, jobs.groups[node]) - started)
            if firsts is not None:
                firsts.append(jobs.time_of_nth(1, jobs.groups[node]) - started)
            time.sleep(interval)
    finally:
        jobs.stop()
    return latencies


def report_joins(res: Results, latencies: list[float], d: int, p99_target: str) -> None:
    p = benchlib.percentile
    res.add(f"join latency p50 (s, {d} Jobs, {len(latencies)} joins)", p(latencies, 50))
    res.add(f"join latency p99 (s, {d} Jobs, {len(latencies)} joins)", p(latencies, 99), p99_target)
    res.note("join latencies (s): " + " ".join(f"{x:.2f}" for x in latencies))


def bench_joins(
    kube: Kube, kubelet: SimKubelet, ctl: ControllerProcess, n: int, args: argparse.Namespace, res: Results
) -> None:
    """(c): with D DaemonJobs converged, seconds from a node's registration to its D Jobs."""
    d = args.daemonjobs
    names = [f"bench-{i:02d}" for i in range(d)]
    started = time.monotonic()
    for name in names[1:]:
        create_daemonjob(kube, name, CONVERGENCE_DURATION)
    convergence_timeout = max(args.timeout, 0.2 * n * d)
    wait_complete(kube, names, n, convergence_timeout, ctl.check)
    res.add(f"{d} DaemonJobs Complete after (s)", time.monotonic() - started)

    before, cpu0 = benchlib.scrape(ctl.metrics_url), benchlib.cpu_seconds(ctl.pid)
    with benchlib.PySpy(ctl.pid, args.py_spy / "joins.json" if args.py_spy else None):
        latencies = join_nodes(kube, kubelet, ctl, d, args.joins, args.join_interval, 60)
    cpu, after = benchlib.cpu_seconds(ctl.pid) - cpu0, benchlib.scrape(ctl.metrics_url)
    wait_complete(kube, names, n + args.joins, args.timeout, ctl.check)
    report_joins(res, latencies, d, "< 1 (N=1000)")
    count = benchlib.sample_value(after, "daemonjob_reconcile_duration_seconds_count") - benchlib.sample_value(
        before, "daemonjob_reconcile_duration_seconds_count"
    )
    total = benchlib.sample_value(after, "daemonjob_reconcile_duration_seconds_sum") - benchlib.sample_value(
        before, "daemonjob_reconcile_duration_seconds_sum"
    )
    res.note(
        f"during the joins: {count:.0f} reconciles ({count / max(1, len(latencies)):.1f} per join), "
        f"mean {1000 * total / max(1, count):.0f} ms wall each, controller CPU {cpu:.1f}s"
    )


def wait_recorded(kube: Kube, timeout: float, check: Callable[[], None]) -> float:
    """Until every DaemonJob's status.results counts each of its nodes: converged includes the
    results written (the recorder writes a batch up to RESULT_FLUSH_DELAY after the last Job ends)."""
    path = path_for(API_VERSION, DJ_PLURAL)

    def done() -> bool:
        check()
        for d in kube.get(path).get("items") or []:
            status = d.get("status") or {}
            if (status.get("results") or {}).get("recorded") != status.get("desiredNodes"):
                return False
        return True

    return benchlib.wait_until(done, timeout, "every DaemonJob's results recorded", interval=0.5)


def bench_idle(kube: Kube, ctl: ControllerProcess, args: argparse.Namespace, res: Results) -> None:
    """(d): API requests of a converged controller over a quiet window."""
    wait_recorded(kube, args.timeout, ctl.check)
    time.sleep(args.settle)
    before = ctl.requests()
    time.sleep(args.idle_seconds)
    ctl.check()
    delta = benchlib.request_delta(before, ctl.requests())
    per_min = 60.0 / args.idle_seconds
    writes = sum(v for (verb, _), v in delta.items() if verb in benchlib.WRITE_VERBS)
    lists = sum(v for (verb, _), v in delta.items() if verb == "list")
    res.add(f"idle writes per minute (over {args.idle_seconds:.0f}s)", writes * per_min, "0")
    res.add("idle lists per minute", lists * per_min, "0")
    if delta:
        res.note(f"controller requests while idle: {requests_text(delta)}")


def requests_text(delta: Mapping[tuple[str, str], float]) -> str:
    return ", ".join(f"{verb} {resource or '-'} {v:.0f}" for (verb, resource), v in sorted(delta.items())) or "none"


# -- scenario tick ------------------------------------------------------------------------
@dataclass
class RunFigures:
    run: str
    to_first: float  # seconds from the tick or trigger to the run's first Job
    to_jobs: float  # seconds from the tick or trigger to N Jobs of the run
    to_complete: float  # seconds from the tick or trigger to Complete of the run
    cpu: float  # controller CPU seconds from the trigger (or the previous run's end) to Complete
    requests: dict[tuple[str, str], float]
    cpu_shares: dict[str, float]  # CPU seconds per process from the trigger to N Jobs
    watches: str  # the controller's watch restarts and relists until N Jobs


def tick_daemonjob_body(trigger: str, duration: float, run_now: str | None) -> dict[str, Any]:
    body = daemonjob_body(TICK_NAME, duration)
    body["spec"]["historyLimit"] = 1
    body["spec"]["schedule"] = EVERY_MINUTE if trigger == "tick" else NEVER_DURING_BENCH
    if run_now is not None:
        body["metadata"]["annotations"] = {ANNOTATION_RUN_NOW: run_now}
    return body


def tick_monotonic(run: str) -> float:
    """A scheduled run's tick (its run label, UTC) on the monotonic clock the waits use."""
    tick = datetime.strptime(run, RUN_LABEL_TIME).replace(tzinfo=timezone.utc).timestamp()
    return time.monotonic() - (time.time() - tick)


def wait_run(
    kube: Kube,
    ctl: ControllerProcess,
    jobs: benchlib.ObjectWatch,
    n: int,
    known: set[str],
    started: float | None,
    timeout: float,
    pids: Mapping[str, int],
) -> RunFigures:
    """Until a run not in `known` has N Jobs and its DaemonJob is Complete for that run.

    `started`: when the trigger was written; None for a scheduled run, whose start is its tick.
    """
    if started is None:  # the run starts at the next minute's tick: CPU shares count from just before it
        time.sleep(max(0.0, 60 - time.time() % 60 - TICK_LEAD))
    scraped, cpu0 = benchlib.scrape(ctl.metrics_url), benchlib.cpu_seconds(ctl.pid)
    before = benchlib.api_requests(scraped)
    shares = benchlib.CpuShares(pids)

    def new_run(w: benchlib.ObjectWatch) -> bool:
        ctl.check()
        return any(len(names) >= n for run, names in w.groups.items() if run not in known)

    jobs.wait(new_run, timeout, f"{n} Jobs of a new run")
    used = shares.used()
    churn = benchlib.watch_churn(scraped, benchlib.scrape(ctl.metrics_url))
    run = next(r for r, names in jobs.groups.items() if r not in known and len(names) >= n)
    t0 = started if started is not None else tick_monotonic(run)
    to_first, to_jobs = (jobs.time_of_nth(k, jobs.groups[run]) - t0 for k in (1, n))
    path = path_for(API_VERSION, DJ_PLURAL, dj_namespace(TICK_NAME), TICK_NAME)

    def complete() -> bool:
        ctl.check()
        dj = kube.get(path)
        status = dj.get("status") or {}
        return (
            status.get("currentRun") == run
            and status.get("desiredNodes") == n
            and benchlib.condition_true(dj, "Complete")
        )

    done = benchlib.wait_until(complete, timeout, f"run {run} Complete over {n} nodes")
    return RunFigures(
        run,
        to_first,
        to_jobs,
        done - t0,
        benchlib.cpu_seconds(ctl.pid) - cpu0,
        benchlib.request_delta(before, ctl.requests()),
        used,
        churn,
    )


def bench_tick(
    kube: Kube, ctl: ControllerProcess, n: int, args: argparse.Namespace, res: Results, cluster_pids: Mapping[str, int]
) -> list[float]:
    """Scenario tick: a first rollout, then `--next-runs` runs over the earlier runs' Jobs.

    Returns each next run's ratio (seconds to N Jobs) to the first rollout's.
    """
    ns = dj_namespace(TICK_NAME)
    benchlib.create_namespace(kube, ns)
    jobs = benchlib.ObjectWatch(kube, path_for("batch/v1", "jobs", ns), group=job_run).start()
    # A scheduled run waits for its tick, up to a minute after the previous run's end.
    timeout = args.timeout + (60 if args.trigger == "tick" else 0)
    path = path_for(API_VERSION, DJ_PLURAL, ns, TICK_NAME)
    runs: list[RunFigures] = []
    try:
        for i in range(1 + args.next_runs):
            trigger = f"bench-{i + 1}" if args.trigger == "run-now" else None
            benchlib.wait_quiet(cluster_pids, args.timeout)  # every run meets the same state
            with benchlib.PySpy(ctl.pid, args.py_spy / f"run-{i + 1}.json" if args.py_spy else None):
                started = time.monotonic() if trigger is not None else None
                if i == 0:
                    kube.create(
                        path_for(API_VERSION, DJ_PLURAL, ns), tick_daemonjob_body(args.trigger, args.duration, trigger)
                    )
                    if trigger is None:
                        print("  waiting for the first tick (at most a minute)", flush=True)
                elif trigger is not None:
                    kube.patch(path, {"metadata": {"annotations": {ANNOTATION_RUN_NOW: trigger}}})
                figures = wait_run(kube, ctl, jobs, n, {r.run for r in runs}, started, timeout, cluster_pids)
            runs.append(figures)
            _report_run(i, figures, runs[0], n, res)
    finally:
        jobs.stop()
    res.add("controller peak RSS over the run (MB)", benchlib.hwm_mb(ctl.pid), fmt="{:.1f}")
    return [r.to_jobs / runs[0].to_jobs for r in runs[1:]]


def _report_run(i: int, figures: RunFigures, first: RunFigures, n: int, res: Results) -> None:
    what = ("run 1 (first rollout)", "run 2 (history kept)")[i] if i < 2 else f"run {i + 1} (history deleted)"
    res.add(f"{what}: seconds to the first Job", figures.to_first)
    res.add(f"{what}: seconds to {n} Jobs", figures.to_jobs)
    res.add(f"{what}: seconds to Complete", figures.to_complete)
    if i > 0:
        res.add(f"{what}: ratio to run 1, to {n} Jobs", figures.to_jobs / first.to_jobs, "<= 1.1")
        res.add(f"{what}: ratio to run 1, to Complete", figures.to_complete / first.to_complete)
    res.add(f"{what}: controller CPU seconds", figures.cpu)
    res.note(f"{what}, {figures.run}: requests {requests_text(figures.requests)}")
    res.note(
        f"{what}: CPU until {n} Jobs: {benchlib.CpuShares.text(figures.cpu_shares, figures.to_jobs)}; "
        f"controller: {figures.watches}"
    )


def busy_pids(cluster: LocalCluster, ctl: ControllerProcess | None = None) -> dict[str, int]:
    """The processes whose leftover work would load a phase: the control plane, this process
    (simulated kubelet and Job controller, watches) and the controller."""
    return {**cluster.pids(), "bench": os.getpid(), **({"controller": ctl.pid} if ctl is not None else {})}


def quiet(cluster: LocalCluster, args: argparse.Namespace, res: Results, before: str) -> None:
    """Both rollouts start on a control plane that has finished the work before them."""
    waited = benchlib.wait_quiet(busy_pids(cluster), args.timeout)
    res.note(f"control plane quiet {waited:.1f}s before {before}")


# -- main ---------------------------------------------------------------------------------
def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--scenario",
        choices=SCENARIOS,
        default="default",
        help="default: DaemonSet baseline, rollout, joins, idle; tick: a first rollout, then further runs",
    )
    p.add_argument(
        "--nodes",
        type=int,
        default=None,
        help="simulated nodes (N); default " + ", ".join(f"{k}: {v}" for k, v in DEFAULT_NODES.items()),
    )
    p.add_argument(
        "--trigger",
        choices=("tick", "run-now"),
        default="tick",
        help=f"tick scenario: runs start at the ticks of '{EVERY_MINUTE}', or by run-now annotations",
    )
    p.add_argument("--next-runs", type=int, default=2, help="tick scenario: runs after the first rollout")
    p.add_argument("--daemonjobs", type=int, default=10, help="DaemonJobs converged during the join test (D)")
    p.add_argument("--joins", type=int, default=20, help="nodes joined one at a time (J)")
    p.add_argument("--join-interval", type=float, default=0.5, help="seconds between two joins")
    p.add_argument("--duration", type=float, default=1.0, help="seconds each Job's pod runs")
    p.add_argument("--idle-seconds", type=float, default=120.0, help="idle window for the request counts")
    p.add_argument("--settle", type=float, default=5.0, help="seconds after convergence before the idle window")
    p.add_argument("--workers", type=int, default=None, help="controller --workers (default: its own)")
    p.add_argument("--writers", type=int, default=16, help="simulated kubelet's API writer threads")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds allowed for each wait")
    p.add_argument("--skip-daemonset", action="store_true", help="no DaemonSet baseline (no ratio)")
    p.add_argument(
        "--py-spy",
        type=Path,
        default=None,
        metavar="DIR",
        help="py-spy profiles of the controller into DIR: rollout until N Jobs, until Complete, joins, runs of tick",
    )
    args = p.parse_args()
    if args.nodes is None:
        args.nodes = DEFAULT_NODES[args.scenario]
    if args.next_runs < 1:
        p.error("--next-runs must be at least 1")
    return args


def _interrupt(signum: int, _frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")  # so that the cluster and controller are stopped


def main() -> int:
    args = parse_args()
    signal.signal(signal.SIGTERM, _interrupt)
    n = args.nodes
    tick = args.scenario == "tick"
    res = Results()
    workdir = Path(tempfile.mkdtemp(prefix="daemonjob-bench-"))
    # Scenario tick ends Jobs through the simulated Job controller from the start: the real one is off.
    cluster = LocalCluster(
        options=ClusterOptions(
            node_lifecycle=False,
            kcm_qps=UNTHROTTLED,
            kcm_burst=UNTHROTTLED,
            scheduler_qps=UNTHROTTLED,
            scheduler_burst=UNTHROTTLED,
            controllers="*,-job" if tick else "*",
        )
    )
    kubelet: SimKubelet | None = None
    jobsim: SimJobController | None = None
    ctl: ControllerProcess | None = None
    ok = False
    ds_seconds = dj_seconds = limit = float("nan")
    tick_ratios: list[float] = []
    try:
        cluster.start()
        kube = Kube.from_config(str(cluster.kubeconfig))
        started = time.monotonic()
        kubelet = simulated_nodes(kube, n, args.writers, args.timeout)
        print(f"{n} nodes Ready in {time.monotonic() - started:.1f}s", flush=True)
        benchlib.apply_crd(kube)

        if tick:
            jobsim = SimJobController(kube, label_selector=LABEL_NAME, writers=args.writers)
            jobsim.start()
            ctl = ControllerProcess(cluster.kubeconfig, workdir / "controller.log", args.workers)
            ctl.wait_ready(120)
            res.note(
                f"scenario tick: historyLimit 1, runs started by {args.trigger}; "
                "Jobs end through a simulated Job controller (no pods)"
            )
            tick_ratios = bench_tick(kube, ctl, n, args, res, busy_pids(cluster, ctl))
        else:
            if not args.skip_daemonset:
                quiet(cluster, args, res, "the DaemonSet")
                ds_seconds = bench_daemonset(kube, n, args.timeout, res, busy_pids(cluster))
            ctl = ControllerProcess(cluster.kubeconfig, workdir / "controller.log", args.workers)
            ctl.wait_ready(120)
            quiet(cluster, args, res, "the DaemonJob")
            # The informers' share: all nodes cached, no DaemonJob yet. VmHWM here is the sync's peak.
            res.add(
                "controller RSS / peak RSS when ready, no DaemonJob yet (MB)",
                f"{benchlib.rss_mb(ctl.pid):.1f} / {benchlib.hwm_mb(ctl.pid):.1f}",
            )
            dj_seconds, limit = bench_rollout(kube, ctl, n, args, res, busy_pids(cluster, ctl))
            cluster.restart_controller_manager(f"{cluster.options.controllers},-job")
            jobsim = SimJobController(kube, label_selector=LABEL_NAME, writers=args.writers)
            jobsim.start()
            res.note("after the rollout the Job controller is off: a simulated one ends Jobs without pods")
            if args.joins > 0:
                bench_joins(kube, kubelet, ctl, n, args, res)
            if args.idle_seconds > 0:
                bench_idle(kube, ctl, args, res)
            ctl.check()
            res.add("controller peak RSS over the run (MB)", benchlib.hwm_mb(ctl.pid), "< 150 (N=5000)", fmt="{:.1f}")
        ok = True
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    finally:
        benchlib.tear_down(ctl, jobsim, kubelet, cluster, workdir=workdir, ok=ok)
    if tick:
        return _print_tick(res, tick_ratios)
    ratio, limit_ratio = dj_seconds / ds_seconds, limit / ds_seconds
    res.rows[0:0] = [
        ("ratio daemonjob/daemonset (seconds to N Jobs / to N pods)", f"{ratio:.2f}", "<= 1.0"),
        ("limit ratio (a controller of zero CPU, same run) / daemonset", f"{limit_ratio:.2f}", ""),
        ("controller / limit (ratio / limit ratio)", f"{ratio / limit_ratio:.2f}", "<= 1.1"),
    ]
    print()
    print(res.table())
    print(f"ratio daemonjob/daemonset: {ratio:.2f}; limit ratio {limit_ratio:.2f}; ", end="")
    print(f"controller / limit {ratio / limit_ratio:.2f}")
    return 0


def _print_tick(res: Results, ratios: list[float]) -> int:
    print()
    print(res.table())
    # The last run is the one with history to delete (from the third run on).
    print(
        "ratio tick/first rollout (seconds to N Jobs): "
        + ", ".join(f"run {i + 2}: {r:.2f}" for i, r in enumerate(ratios))
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
