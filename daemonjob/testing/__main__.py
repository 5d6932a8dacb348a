"""`python -m daemonjob.testing up|down|serve`: a local cluster with simulated nodes and the CRD.

`up` starts a detached supervisor (`serve`) and returns once every node is Ready; `down`
stops it by its PID, then anything it started that is still recorded in `pids` (and
`prometheus.pid`). With `--prometheus`, a Prometheus with the shipped alerts runs beside
the cluster and scrapes the controller at `--prometheus-target` (default: `make run`'s
metrics address).
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from daemonjob.machinery.client.kube import Kube
from daemonjob.testing.cluster import ClusterOptions, LocalCluster, stop_pid
from daemonjob.testing.crd import install_crd
from daemonjob.testing.prometheus import LocalPrometheus
from daemonjob.testing.sim.kubelet import NodeSpec, SimKubelet

PROMETHEUS_PID = "prometheus.pid"
PROMETHEUS_URL = "prometheus.url"
DEFAULT_PROMETHEUS_TARGET = "127.0.0.1:8080"  # `make run`'s plain-HTTP /metrics (--metrics-secure=false)

SUPERVISOR_PID = "supervisor.pid"
READY_MARK = "ready"


def node_names(count: int, prefix: str = "sim-node") -> list[str]:
    width = max(4, len(str(count)))
    return [f"{prefix}-{i:0{width}d}" for i in range(1, count + 1)]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _read_pid(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def up(args: argparse.Namespace) -> int:
    workdir = Path(args.dir).resolve()
    pid = _read_pid(workdir / SUPERVISOR_PID)
    if pid and _alive(pid):
        print(
            f"a cluster is already running from {workdir} (supervisor PID {pid}); `make cluster-down` stops it",
            file=sys.stderr,
        )
        return 1
    if workdir.exists():
        shutil.rmtree(workdir)
    workdir.mkdir(parents=True)
    log = open(workdir / "supervisor.log", "ab")
    cmd = [sys.executable, "-m", "daemonjob.testing", "serve", "--dir", str(workdir), "--nodes", str(args.nodes)]
    if args.no_node_lifecycle:
        cmd.append("--no-node-lifecycle")
    if args.prometheus:
        cmd.append("--prometheus")
        for target in args.prometheus_target or ():
            cmd += ["--prometheus-target", target]
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + args.timeout
    while time.monotonic() < deadline:
        if (workdir / READY_MARK).exists():
            print(f"cluster up: {args.nodes} Ready node(s); KUBECONFIG={workdir / 'kubeconfig'}")
            if args.prometheus:
                url, alerts = (workdir / PROMETHEUS_URL).read_text().split()
                print(
                    f"prometheus: {url} (alerts: {alerts}), scraping "
                    f"{', '.join(args.prometheus_target or [DEFAULT_PROMETHEUS_TARGET])}"
                )
            return 0
        if proc.poll() is not None:
            print(
                f"cluster failed to start (exit {proc.returncode}); see {workdir / 'supervisor.log'}", file=sys.stderr
            )
            return 1
        time.sleep(0.3)
    print(f"cluster not ready after {args.timeout}s; stopping it (see {workdir / 'supervisor.log'})", file=sys.stderr)
    stop_pid(proc.pid, timeout=30)
    return 1


def down(args: argparse.Namespace) -> int:
    workdir = Path(args.dir).resolve()
    pid = _read_pid(workdir / SUPERVISOR_PID)
    if pid and _alive(pid):
        stop_pid(pid, timeout=30)
    prom_pid = _read_pid(workdir / PROMETHEUS_PID)
    if prom_pid and _alive(prom_pid):
        stop_pid(prom_pid)
    pids_file = workdir / "pids"
    if pids_file.exists():
        for line in pids_file.read_text().splitlines():
            name, _, child = line.partition(" ")
            if child.isdigit() and _alive(int(child)):
                stop_pid(int(child))
    for leftover in (
        "etcd",
        "pki",
        "kubeconfig",
        SUPERVISOR_PID,
        READY_MARK,
        "pids",
        PROMETHEUS_PID,
        PROMETHEUS_URL,
        "prometheus",
    ):
        path = workdir / leftover
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        elif path.exists():
            path.unlink()
    print("cluster down")
    return 0


def serve(args: argparse.Namespace) -> int:
    workdir = Path(args.dir).resolve()
    (workdir / SUPERVISOR_PID).write_text(f"{os.getpid()}\n")
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda *_: stop.set())
    options = ClusterOptions(node_lifecycle=not args.no_node_lifecycle)
    cluster = LocalCluster(workdir=workdir, options=options)
    kubelet = None
    prometheus = None
    try:
        if args.prometheus:  # first: provisioning it may take a moment, before nodes need heartbeats
            prometheus = LocalPrometheus(
                workdir / "prometheus",
                targets=args.prometheus_target or [DEFAULT_PROMETHEUS_TARGET],
                scrape_interval="5s",
                evaluation_interval="5s",
            ).start()
            (workdir / PROMETHEUS_PID).write_text(f"{prometheus.pid}\n")
            (workdir / PROMETHEUS_URL).write_text(f"{prometheus.url} {prometheus.page('alerts')}\n")
        cluster.start()
        kube = Kube.from_config(str(cluster.kubeconfig))
        interval = 2.0 if args.nodes <= 200 else 10.0
        kubelet = SimKubelet(kube, heartbeat_interval=interval, clear_not_ready_taint=args.no_node_lifecycle)
        kubelet.start()
        kubelet.add_nodes(NodeSpec(n) for n in node_names(args.nodes))
        kubelet.wait_ready(timeout=300)
        install_crd(cluster.kubectl_command(), reports=not args.without_reports_crd)
        (workdir / READY_MARK).write_text("ready\n")
        print(f"ready: {args.nodes} nodes, kubeconfig {cluster.kubeconfig}", flush=True)
        stop.wait()
    finally:
        if kubelet is not None:
            kubelet.stop()
        cluster.stop()
        if prometheus is not None:
            prometheus.stop()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m daemonjob.testing")
    sub = parser.add_subparsers(dest="cmd", required=True)
    for name in ("up", "down", "serve"):
        p = sub.add_parser(name)
        p.add_argument("--dir", default=".cluster")
        if name != "down":
            p.add_argument("--nodes", type=int, default=3)
            p.add_argument(
                "--no-node-lifecycle",
                action="store_true",
                help="turn the node lifecycle controller off (large clusters: no heartbeats)",
            )
            p.add_argument("--timeout", type=float, default=600.0)
            p.add_argument(
                "--without-reports-crd",
                action="store_true",
                help="install manifests/crd.yaml only, not the DaemonJobReport CRD: a controller records no result",
            )
            p.add_argument(
                "--prometheus",
                action="store_true",
                help="also run Prometheus with the shipped alerts, scraping the controller",
            )
            p.add_argument(
                "--prometheus-target",
                action="append",
                metavar="HOST:PORT",
                help=f"a controller's metrics address to scrape (repeatable; default {DEFAULT_PROMETHEUS_TARGET})",
            )
    args = parser.parse_args(argv)
    return {"up": up, "down": down, "serve": serve}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
