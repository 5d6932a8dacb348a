"""Scale run: D DaemonJobs over N nodes on one controller (the design's 10,000 x 10).

On one local control plane with N simulated nodes (node lifecycle controller off and no
heartbeats, which at this scale would be most of what the API server does), in one run:
  (a) D DaemonJobs, each over every node, created at once: seconds until all are Complete,
      with the controller's CPU and peak RSS (VmHWM from /proc of its process);
  (b) node-join latency with the D DaemonJobs converged, as `make bench` measures it;
  (c) the informers' sync at startup: the controller is restarted on the converged cluster
      and timed from its probe port's first answer to `/readyz` answering 200 (the
      controller reports no sync time of its own; its probes start just before its
      informers and `/readyz` is "every informer synced"), against `kubectl get` and a plain
      paged list of the same objects (nodes, Jobs, DaemonJobs) measured in the same run.
With --delete-succeeded-jobs (spec.results.deleteSucceededJobs on every DaemonJob) it also
waits, after (a) and again at the end, until the API server holds no more Jobs of theirs than
are still active, and checks that every DaemonJob is still Complete.
Jobs end through the simulated Job controller (no pods): N x D Jobs through pods would
take hours on two cores, and pods play no part in what is measured here.

A phase that does not finish within its time limit ends the run with the figures measured
so far and a line saying which phase, how far it got and on how many cores.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import bench
import benchlib
import urllib3
from bench import ControllerProcess, Results

from daemonjob import defaults
from daemonjob.domain.shared.apinames import API_VERSION, LABEL_NAME
from daemonjob.machinery.client.kube import Kube, path_for
from daemonjob.testing.cluster import ClusterOptions, LocalCluster
from daemonjob.testing.sim.jobcontroller import SimJobController
from daemonjob.testing.sim.kubelet import SimKubelet

# What the controller's informers list; kubectl and the plain list read the same.
KINDS: dict[str, tuple[str, str, dict[str, str]]] = {  # name -> (apiVersion, plural, selectors)
    "nodes": ("v1", "nodes", {}),
    "jobs": ("batch/v1", "jobs", {"labelSelector": LABEL_NAME}),
    "daemonjobs": (API_VERSION, bench.DJ_PLURAL, {}),
}
KUBECTL_RESOURCE = {"nodes": "nodes", "jobs": "jobs.batch", "daemonjobs": f"{bench.DJ_PLURAL}.daemonjob.io"}


class PhaseTimeout(Exception):
    """A phase ran out of time: what was measured so far is still reported."""


def progress(kube: Kube, ctl: ControllerProcess, names: list[str], n: int) -> str:
    """How far convergence got: DaemonJobs Complete and the Jobs the controller created."""
    items = kube.get(path_for(API_VERSION, bench.DJ_PLURAL)).get("items") or []
    complete = sum(
        1
        for d in items
        if d["metadata"]["name"] in names
        and benchlib.condition_true(d, "Complete")
        and (d.get("status") or {}).get("desiredNodes") == n
    )
    succeeded = sum(int((d.get("status") or {}).get("succeededNodes") or 0) for d in items)
    created = benchlib.sample_value(benchlib.scrape(ctl.metrics_url), "daemonjob_jobs_created_total")
    return (
        f"{complete}/{len(names)} DaemonJobs Complete, {created:.0f}/{n * len(names)} Jobs created, "
        f"{succeeded} succeeded"
    )


GROUP_SIZE = 5  # --ordered: DaemonJobs per exclusion group
CHAIN_LENGTH = 4  # --ordered: DaemonJobs per spec.after chain


def create_ordered(kube: Kube, d: int) -> tuple[list[str], int]:
    """--ordered: half the D DaemonJobs in exclusion groups of GROUP_SIZE, the others in chains of
    CHAIN_LENGTH (each after the one before), each group and chain in a namespace of its own.
    Returns their names and how many of them may start on a node at once (one per group and chain)."""
    names: list[str] = []
    grouped = d // 2
    groups = [list(range(i, min(i + GROUP_SIZE, grouped))) for i in range(0, grouped, GROUP_SIZE)]
    chains = [list(range(i, min(i + CHAIN_LENGTH, d))) for i in range(grouped, d, CHAIN_LENGTH)]
    for g, members in enumerate(groups):
        namespace = f"{bench.DJ_NAMESPACE_PREFIX}group-{g:02d}"
        benchlib.create_namespace(kube, namespace)
        for i in members:
            name = f"bench-g{g:02d}-{i:03d}"
            body = bench.daemonjob_body(name, bench.CONVERGENCE_DURATION)
            body["metadata"]["namespace"] = namespace
            body["spec"]["exclusionGroup"] = "maintenance"
            kube.create(path_for(API_VERSION, bench.DJ_PLURAL, namespace), body)
            names.append(name)
    for c, members in enumerate(chains):
        namespace = f"{bench.DJ_NAMESPACE_PREFIX}chain-{c:02d}"
        benchlib.create_namespace(kube, namespace)
        previous: str | None = None
        for i in members:
            name = f"bench-c{c:02d}-{i:03d}"
            body = bench.daemonjob_body(name, bench.CONVERGENCE_DURATION)
            body["metadata"]["namespace"] = namespace
            if previous is not None:
                body["spec"]["after"] = [previous]
            kube.create(path_for(API_VERSION, bench.DJ_PLURAL, namespace), body)
            names.append(name)
            previous = name
    return names, len(groups) + len(chains)


LET_GO = {"results": {"deleteSucceededJobs": True}}


def converge(
    kube: Kube,
    ctl: ControllerProcess,
    n: int,
    d: int,
    timeout: float,
    res: Results,
    ordered: bool = False,
    spec: dict[str, Any] | None = None,
) -> tuple[list[str], int]:
    """(a): D DaemonJobs created at once; seconds until all are Complete over N nodes. Returns
    their names and how many Jobs a joining node gets at once (all D, unless --ordered)."""
    names = [f"bench-{i:02d}" for i in range(d)]
    cpu0, before = benchlib.cpu_seconds(ctl.pid), benchlib.scrape(ctl.metrics_url)
    started = time.monotonic()
    first_wave = d
    if ordered:
        names, first_wave = create_ordered(kube, d)
    else:
        for name in names:
            bench.create_daemonjob(kube, name, bench.CONVERGENCE_DURATION, spec)
    deadline = started + timeout
    while True:
        left = deadline - time.monotonic()
        try:
            done = bench.wait_complete(kube, names, n, max(0.0, min(30.0, left)), ctl.check)
            break
        except TimeoutError:
            state = progress(kube, ctl, names, n)
            if time.monotonic() >= deadline:
                raise PhaseTimeout(
                    f"{d} DaemonJobs over {n} nodes not Complete after {timeout:.0f}s: {state}"
                ) from None
            print(f"  {time.monotonic() - started:.0f}s: {state}", flush=True)
    res.add(f"{d} DaemonJobs over {n} nodes ({n * d} Jobs): seconds to all Complete", done - started)
    res.add("controller CPU seconds to all Complete", benchlib.cpu_seconds(ctl.pid) - cpu0)
    res.add("controller RSS now (MB)", benchlib.rss_mb(ctl.pid), fmt="{:.1f}")
    after = benchlib.scrape(ctl.metrics_url)
    res.note(
        "controller requests until all Complete: "
        + bench.requests_text(benchlib.request_delta(benchlib.api_requests(before), benchlib.api_requests(after)))
    )
    res.note(f"until all Complete: {passes_text(before, after)}")
    return names, first_wave


def passes_text(before: benchlib.Samples, after: benchlib.Samples) -> str:
    """The passes between two scrapes, their mean wait in the queue and time at work."""

    def mean(name: str) -> tuple[float, float]:
        count = benchlib.sample_value(after, f"{name}_count") - benchlib.sample_value(before, f"{name}_count")
        total = benchlib.sample_value(after, f"{name}_sum") - benchlib.sample_value(before, f"{name}_sum")
        return count, total / count if count else 0.0

    passes, in_queue = mean("workqueue_queue_duration_seconds")
    _, working = mean("workqueue_work_duration_seconds")
    return (
        f"{passes:.0f} passes, each {1000 * in_queue:.0f} ms in the queue and "
        f"{1000 * working:.0f} ms at work on average"
    )


def join_latencies(
    kube: Kube,
    kubelet: SimKubelet,
    ctl: ControllerProcess,
    names: list[str],
    n: int,
    args: argparse.Namespace,
    res: Results,
    pids: dict[str, int],
    first_wave: int | None = None,
) -> None:
    """(b): seconds from a node's registration until its D Jobs exist, over J joins (with
    --ordered, the Jobs that may start at once: one per exclusion group and per chain); and
    the controller's CPU seconds per join."""
    d = first_wave or len(names)
    shares = benchlib.CpuShares(pids)
    served0 = benchlib.apiserver_time(benchlib.parse_samples(kube.get_text("/metrics")))
    cpu0, before, started = benchlib.cpu_seconds(ctl.pid), benchlib.scrape(ctl.metrics_url), time.monotonic()
    firsts: list[float] = []
    latencies = bench.join_nodes(kube, kubelet, ctl, d, args.joins, args.join_interval, args.timeout, firsts)
    res.note("first Job of each join after (s): " + " ".join(f"{x:.2f}" for x in firsts))
    cpu, after = benchlib.cpu_seconds(ctl.pid) - cpu0, benchlib.scrape(ctl.metrics_url)
    res.note(f"during the joins: CPU by process: {shares.text(shares.used(), time.monotonic() - started)}")
    served = benchlib.apiserver_time(benchlib.parse_samples(kube.get_text("/metrics")))
    res.note(f"during the joins: API server time by request: {benchlib.apiserver_time_text(served0, served)}")
    res.note(
        "controller requests during the joins: "
        + bench.requests_text(benchlib.request_delta(benchlib.api_requests(before), benchlib.api_requests(after)))
    )
    waited = benchlib.sample_value(after, "daemonjob_api_rate_limiter_wait_seconds_sum") - benchlib.sample_value(
        before, "daemonjob_api_rate_limiter_wait_seconds_sum"
    )
    res.note(f"during the joins: {waited:.1f} s waited for the client-side rate limiter (--kube-api-qps)")

    res.note(f"during the joins: {passes_text(before, after)}")
    full = [
        after.get(("python_gc_duration_seconds_" + k, (("generation", "2"),)), 0.0)
        - before.get(("python_gc_duration_seconds_" + k, (("generation", "2"),)), 0.0)
        for k in ("count", "sum")
    ]
    res.note(f"during the joins: {full[0]:.0f} full garbage collections, {full[1]:.2f} s of pauses")
    bench.report_joins(res, latencies, d, "<= 0.5 (N=10000)")
    if latencies:
        res.add(
            "controller CPU seconds per join (over the joins and the intervals between them)",
            cpu / len(latencies),
            fmt="{:.3f}",
        )
    bench.wait_complete(kube, names, n + args.joins, args.timeout, ctl.check)


def kubectl_get(cluster: LocalCluster, cache_dir: Path) -> dict[str, float]:
    """Seconds for `kubectl get -o name` of each kind, the three at once as the informers list.

    `-o name` makes kubectl fetch and decode whole objects (in pages of the informers' size)
    while printing almost nothing, so the terminal plays no part. Discovery is cached by an
    untimed first call, as a user's kubectl has it cached: the list is what is compared.
    """

    def command(kind: str) -> list[str]:
        selector = KINDS[kind][2].get("labelSelector")
        return [
            *cluster.kubectl_command(),
            "--cache-dir",
            str(cache_dir),
            "get",
            KUBECTL_RESOURCE[kind],
            "-A",
            "-o",
            "name",
            f"--chunk-size={defaults.LIST_PAGE_SIZE}",
            *(["-l", selector] if selector else []),
        ]

    subprocess.run(command("daemonjobs"), stdout=subprocess.DEVNULL, check=True, timeout=120)
    procs: dict[str, subprocess.Popen] = {}
    out: dict[str, float] = {}
    started = time.monotonic()
    try:
        for kind in KINDS:
            procs[kind] = subprocess.Popen(
                command(kind), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, preexec_fn=benchlib.die_with_parent
            )
        while len(out) < len(procs):
            for kind, proc in procs.items():
                if kind not in out and proc.poll() is not None:
                    out[kind] = time.monotonic() - started
                    if proc.returncode != 0:
                        err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
                        raise RuntimeError(f"kubectl get {kind} failed: {err[-500:]}")
            if time.monotonic() - started > 600:
                raise PhaseTimeout("kubectl get did not finish in 600s")
            time.sleep(0.01)
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            if proc.stderr:
                proc.stderr.close()
    return out


def paged_list(kube: Kube) -> tuple[dict[str, float], dict[str, int]]:
    """Seconds for a plain paged list of each kind (decoded, nothing kept), the three at once."""
    started = time.monotonic()

    def one(kind: str) -> tuple[str, float, int]:
        api_version, plural, selectors = KINDS[kind]
        path = path_for(api_version, plural)
        count, cont = 0, None
        while True:
            page = kube.get(path, limit=defaults.LIST_PAGE_SIZE, **selectors, **({"continue": cont} if cont else {}))
            count += len(page.get("items") or ())
            cont = page["metadata"].get("continue")
            if not cont:
                return kind, time.monotonic() - started, count

    with ThreadPoolExecutor(max_workers=len(KINDS)) as pool:
        results = list(pool.map(one, KINDS))
    return {k: t for k, t, _ in results}, {k: c for k, _, c in results}


def sync_at_startup(cluster: LocalCluster, workdir: Path, args: argparse.Namespace, res: Results) -> ControllerProcess:
    """(c): a controller started on the converged cluster, timed to `/readyz`, against plain reads."""
    kube = Kube.from_config(str(cluster.kubeconfig))
    ctl_times = kubectl_get(cluster, workdir / "kubectl-cache")
    list_times, counts = paged_list(kube)
    res.note("objects: " + ", ".join(f"{counts[k]} {k}" for k in KINDS))
    started = time.monotonic()
    ctl = ControllerProcess(cluster.kubeconfig, workdir / "controller-restarted.log", args.workers)
    probe_up, ready = wait_probe(ctl, started, args.timeout)
    sync = ready - probe_up
    kubectl_all, list_all = max(ctl_times.values()), max(list_times.values())
    res.add("controller start -> /readyz (s; interpreter, imports and API check included)", ready - started)
    res.add("informer sync: probe port up -> /readyz (s)", sync)
    res.add("kubectl get -o name of the same objects (s; the three kinds at once)", kubectl_all)
    res.note("kubectl get per kind (s): " + ", ".join(f"{k} {v:.2f}" for k, v in ctl_times.items()))
    res.add("plain paged list of the same objects (s; the three kinds at once)", list_all)
    res.add("ratio informer sync / kubectl get", sync / kubectl_all, "<= 1.5")
    res.add("ratio informer sync / plain paged list", sync / list_all)
    res.add(
        "restarted controller RSS / peak RSS when ready (MB)",
        f"{benchlib.rss_mb(ctl.pid):.1f} / {benchlib.hwm_mb(ctl.pid):.1f}",
        "<= 300",
    )
    return ctl


def wait_probe(ctl: ControllerProcess, started: float, timeout: float) -> tuple[float, float]:
    """(first answer of the probe port, first 200 of /readyz), polled every 20 ms."""
    url = f"http://127.0.0.1:{ctl.health_port}/readyz"
    probe_up: float | None = None
    while True:
        ctl.check()
        try:
            status = benchlib.http_get(url, timeout=1.0)[0]
            now = time.monotonic()
            probe_up = now if probe_up is None else probe_up
            if status == 200:
                return probe_up, now
        except urllib3.exceptions.HTTPError:  # not listening yet
            pass
        if time.monotonic() - started > timeout:
            raise PhaseTimeout(f"the restarted controller was not ready after {timeout:.0f}s")
        time.sleep(0.02)


def wait_quiet(ctl: ControllerProcess, timeout: float, res: Results, quiet: float = 3.0) -> tuple[float, float]:
    """Until no reconcile ran for `quiet` seconds; returns (seconds waited, API writes meanwhile)."""
    started = time.monotonic()
    before = ctl.requests()
    last, last_change = -1.0, started
    while time.monotonic() - last_change < quiet:
        ctl.check()
        count = benchlib.sample_value(benchlib.scrape(ctl.metrics_url), "daemonjob_reconcile_total")
        if count != last:
            last, last_change = count, time.monotonic()
        if time.monotonic() - started > timeout:
            raise PhaseTimeout(f"the restarted controller still reconciling after {timeout:.0f}s")
        time.sleep(0.5)
    delta = benchlib.request_delta(before, ctl.requests())
    writes = {k: v for k, v in delta.items() if k[0] in benchlib.WRITE_VERBS}
    res.note(f"restarted controller: writes in its first passes: {bench.requests_text(writes)}")
    return last_change - started, sum(writes.values())


def jobs_left(kube: Kube) -> tuple[int, int]:
    """(the DaemonJobs' Jobs on the API server, those of them not finished), one paged list."""
    total = active = 0
    params: dict[str, Any] = {"labelSelector": LABEL_NAME, "limit": 5000}
    while True:
        page = kube.get(path_for("batch/v1", "jobs"), **params)
        for job in page.get("items") or ():
            total += 1
            conds = (job.get("status") or {}).get("conditions") or ()
            if not any(c.get("type") in ("Complete", "Failed") and c.get("status") == "True" for c in conds):
                active += 1
        token = (page.get("metadata") or {}).get("continue")
        if not token:
            return total, active
        params["continue"] = token


def wait_let_go(
    kube: Kube, ctl: ControllerProcess, names: list[str], n: int, timeout: float, res: Results, when: str
) -> None:
    """--delete-succeeded-jobs: seconds until no more Jobs than active ones are left, every DaemonJob Complete."""
    started = time.monotonic()
    while True:
        total, active = jobs_left(kube)
        if total <= active:
            break
        if time.monotonic() - started > timeout:
            raise PhaseTimeout(f"{when}: {total} Jobs left on the API server, {active} active, after {timeout:.0f}s")
        print(f"  {when}: {total} Jobs left ({active} active)", flush=True)
        time.sleep(10)
    res.add(f"{when}: seconds until only active Jobs are left (Jobs left, active)", time.monotonic() - started)
    res.note(f"{when}: {total} Jobs left on the API server, {active} of them active")
    bench.wait_complete(kube, names, n, 60, ctl.check)
    res.note(f"{when}: {progress(kube, ctl, names, n)}")


def profile(ctl: ControllerProcess, args: argparse.Namespace, phase: str) -> benchlib.PySpy:
    """--py-spy: the controller sampled through `phase` (PY_SPY_GIL=1: only while it holds the GIL)."""
    return benchlib.PySpy(ctl.pid, args.py_spy / f"{phase}.txt" if args.py_spy else None, fmt="raw")


# -- main ---------------------------------------------------------------------------------
def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nodes", type=int, default=10000, help="simulated nodes (N); 1000, 2500, 5000 for a trend")
    p.add_argument("--daemonjobs", type=int, default=10, help="DaemonJobs over all nodes (D)")
    p.add_argument("--joins", type=int, default=20, help="nodes joined one at a time (J)")
    p.add_argument(
        "--ordered",
        action="store_true",
        help="half the DaemonJobs in exclusion groups of 5, half in spec.after chains of 4",
    )
    p.add_argument(
        "--delete-succeeded-jobs",
        action="store_true",
        help="spec.results.deleteSucceededJobs on every DaemonJob: at the end only active Jobs are left",
    )
    p.add_argument("--join-interval", type=float, default=0.5, help="seconds between two joins")
    p.add_argument("--workers", type=int, default=None, help="controller --workers (default: its own)")
    p.add_argument("--writers", type=int, default=16, help="API writer threads of the simulated kubelet and Jobs")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds allowed for each short wait")
    p.add_argument(
        "--py-spy",
        type=Path,
        metavar="DIR",
        default=None,
        help="py-spy profiles of the controller (collapsed stacks) into DIR: converge.txt, joins.txt",
    )
    p.add_argument(
        "--converge-timeout",
        type=float,
        default=None,
        help="seconds allowed for all DaemonJobs to be Complete (default: 3600, or more above 50,000 Jobs)",
    )
    return p.parse_args()


def _interrupt(signum: int, _frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")  # so that the cluster and controller are stopped


def main() -> int:
    args = parse_args()
    signal.signal(signal.SIGTERM, _interrupt)
    n, d = args.nodes, args.daemonjobs
    converge_timeout = args.converge_timeout or max(3600.0, 0.05 * n * d)
    cores = os.cpu_count() or 1
    res = Results()
    res.note(
        f"N={n} nodes, D={d} DaemonJobs{' (ordered: groups of 5, chains of 4)' if args.ordered else ''}, "
        f"{cores} cores; Jobs end through a simulated Job controller (no pods)"
    )
    workdir = Path(tempfile.mkdtemp(prefix="daemonjob-bench-scale-"))
    # No Job controller (the simulated one ends Jobs) and no node lifecycle controller (no heartbeats).
    cluster = LocalCluster(
        options=ClusterOptions(
            node_lifecycle=False,
            controllers="*,-job",
            kcm_qps=bench.UNTHROTTLED,
            kcm_burst=bench.UNTHROTTLED,
            scheduler_qps=bench.UNTHROTTLED,
            scheduler_burst=bench.UNTHROTTLED,
        )
    )
    kubelet: SimKubelet | None = None
    jobsim: SimJobController | None = None
    ctl: ControllerProcess | None = None
    failure: str | None = None
    ok = False
    peak_rss = 0.0
    try:
        cluster.start()
        kube = Kube.from_config(str(cluster.kubeconfig))
        started = time.monotonic()
        kubelet = bench.simulated_nodes(kube, n, args.writers, max(args.timeout, 0.1 * n))
        res.add(f"{n} nodes registered and Ready after (s)", time.monotonic() - started)
        benchlib.apply_crd(kube)
        jobsim = SimJobController(kube, label_selector=LABEL_NAME, writers=args.writers)
        jobsim.start()
        ctl = ControllerProcess(cluster.kubeconfig, workdir / "controller.log", args.workers)
        ctl.wait_ready(120)

        spec = LET_GO if args.delete_succeeded_jobs else None
        with profile(ctl, args, "converge"):
            dj_names, first_wave = converge(kube, ctl, n, d, converge_timeout, res, args.ordered, spec)
        if args.delete_succeeded_jobs:
            wait_let_go(kube, ctl, dj_names, n, converge_timeout, res, "after the rollouts")
        if args.joins > 0:
            with profile(ctl, args, "joins"):
                join_latencies(kube, kubelet, ctl, dj_names, n, args, res, bench.busy_pids(cluster, ctl), first_wave)
        if args.delete_succeeded_jobs and args.joins > 0:
            wait_let_go(kube, ctl, dj_names, n + args.joins, args.timeout, res, "after the joins")
        peak_rss = benchlib.hwm_mb(ctl.pid)
        res.add("controller peak RSS over rollouts and joins (MB)", peak_rss, "<= 300", fmt="{:.1f}")
        # Stopped once converged: the last results written and status.results with them, so the
        # restarted controller's first passes have nothing left to write.
        waited_from = time.monotonic()
        recorded_at = bench.wait_recorded(kube, args.timeout, ctl.check)
        res.add("every DaemonJob's results recorded, seconds after the joins", recorded_at - waited_from)
        ctl.stop()
        ctl = None

        ctl = sync_at_startup(cluster, workdir, args, res)
        waited, writes = wait_quiet(ctl, args.timeout, res)
        res.add("restarted controller: seconds until its first passes are done", waited)
        res.add("restarted controller: API writes in its first passes", writes, "0", fmt="{:.0f}")
        restarted_peak = benchlib.hwm_mb(ctl.pid)
        res.add("restarted controller peak RSS (MB)", restarted_peak, "<= 300", fmt="{:.1f}")
        peak_rss = max(peak_rss, restarted_peak)
        if args.delete_succeeded_jobs:
            wait_let_go(kube, ctl, dj_names, n + args.joins, args.timeout, res, "at the end")
        ok = True
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except (PhaseTimeout, TimeoutError) as exc:
        failure = str(exc)
        if ctl is not None and ctl.proc.poll() is None:
            peak_rss = max(peak_rss, benchlib.hwm_mb(ctl.pid))
    finally:
        benchlib.tear_down(ctl, jobsim, kubelet, cluster, workdir=workdir, ok=ok)
    print()
    if res.rows:
        print(res.table())
    else:
        print("\n".join(res.notes))
    if failure is not None:
        print(
            f"NOT MEASURED FURTHER: on this machine ({cores} cores) N={n} x D={d} did not finish within the "
            f"time limits (--timeout, --converge-timeout): {failure}. The figures above are those measured "
            f"until then; the controller's peak RSS until then: {peak_rss:.1f} MB. "
            "For a trend, run N=1000, 2500 and 5000."
        )
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
