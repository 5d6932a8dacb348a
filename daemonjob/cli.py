"""`daemonjob-controller`: flags, wiring and the process lifecycle.

Flag names follow controller-runtime's. Problems the user can fix (a bad flag, missing
credentials, an unreachable API server, a CRD not installed) end the process with one
clear line and a non-zero exit, never a traceback.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import sys
import threading
import uuid

import structlog

from daemonjob import __version__, defaults, logsetup
from daemonjob.machinery.malloc import limit_malloc_arenas
from daemonjob.controller.controller import GROUP_VERSION, PLURAL, Controller
from daemonjob.controller.events import EventRecorder
from daemonjob.machinery.kube import ApiError, ConfigError, Kube
from daemonjob.machinery.leaderelection import LeaderElector
from daemonjob.controller.metrics import Metrics
from daemonjob.machinery.ratelimit import TokenBucket
from daemonjob.machinery.serving import Server, check_route, metrics_route, parse_bind_address

log = structlog.get_logger("daemonjob")

EXIT_USAGE = 2
EXIT_FAILURE = 1


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="daemonjob-controller",
                                description="Runs a Job on every eligible node for each DaemonJob.")
    p.add_argument("--kubeconfig", default=None,
                   help="kubeconfig file (default: in-cluster config, else $KUBECONFIG or ~/.kube/config)")
    p.add_argument("--namespace", default=None, help="watch DaemonJobs and Jobs in this namespace only (default: all)")
    p.add_argument("--workers", type=_positive_int, default=defaults.WORKERS, help="concurrent reconciles")
    p.add_argument("--kube-api-qps", type=float, default=defaults.KUBE_API_QPS,
                   help="client-side API request rate limit (0: unlimited)")
    p.add_argument("--kube-api-burst", type=_positive_int, default=defaults.KUBE_API_BURST,
                   help="client-side API request burst")
    p.add_argument("--leader-elect", action="store_true", help="elect a leader on a Lease; only it acts")
    p.add_argument("--leader-election-id", default=defaults.LEADER_ELECTION_ID, help="name of the Lease")
    p.add_argument("--leader-election-namespace", default=None,
                   help="namespace of the Lease (default: the pod's namespace, else default)")
    p.add_argument("--metrics-bind-address", default=defaults.METRICS_BIND_ADDRESS,
                   help="address of /metrics ('0' disables)")
    p.add_argument("--health-probe-bind-address", default=defaults.HEALTH_PROBE_BIND_ADDRESS,
                   help="address of /healthz and /readyz ('0' disables)")
    p.add_argument("--log-level", choices=logsetup.LEVELS, default=defaults.LOG_LEVEL)
    p.add_argument("--log-format", choices=("json", "console"), default=None,
                   help="default: json in-cluster or when stderr is not a terminal, else console")
    p.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    return p


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be at least 1")
    return value


def _lease_namespace(flag: str | None) -> str:
    if flag:
        return flag
    if os.environ.get("POD_NAMESPACE"):
        return os.environ["POD_NAMESPACE"]
    try:
        with open("/var/run/secrets/kubernetes.io/serviceaccount/namespace") as f:
            return f.read().strip()
    except OSError:
        return "default"


def fail(message: str) -> int:
    print(f"daemonjob-controller: error: {message}", file=sys.stderr)
    return EXIT_FAILURE


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        metrics_addr = parse_bind_address(args.metrics_bind_address)
        health_addr = parse_bind_address(args.health_probe_bind_address)
    except ValueError as exc:
        return fail(str(exc))
    logsetup.configure(args.log_level, args.log_format)
    limit_malloc_arenas()  # before any thread starts

    metrics = Metrics()
    try:
        kube = Kube.from_config(args.kubeconfig, limiter=TokenBucket(args.kube_api_qps, args.kube_api_burst),
                                on_request=metrics.on_request)
    except ConfigError as exc:
        return fail(str(exc))
    try:
        kube.request("GET", "/version", timeout=10)
        kube.request("GET", f"/apis/{GROUP_VERSION}", timeout=10)
    except ApiError as exc:
        if exc.not_found:
            return fail(f"the DaemonJob CRD ({PLURAL}.daemonjob.io) is not installed on {kube.host}: "
                        "kubectl apply -f manifests/crd.yaml")
        return fail(f"the API server at {kube.host} refused the controller: {exc}")
    except Exception as exc:
        return fail(f"cannot reach the Kubernetes API server at {kube.host}: {exc}")

    identity = f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}"
    events = EventRecorder(kube, host=socket.gethostname())
    controller = Controller(kube, namespace=args.namespace, workers=args.workers, metrics=metrics, events=events)
    servers: list[Server] = []
    try:
        if metrics_addr:
            servers.append(Server(metrics_addr, {"/metrics": metrics_route(metrics.registry)}, "metrics").start())
        if health_addr:
            servers.append(Server(health_addr, {"/healthz": check_route(controller.healthy),
                                                "/readyz": check_route(controller.ready)}, "health").start())
    except OSError as exc:
        for s in servers:
            s.stop()
        return fail(f"cannot listen: {exc}")

    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())

    events.start()
    controller.start_informers()
    log.info("starting", version=__version__, namespace=args.namespace or "(all)", workers=args.workers,
             leader_elect=args.leader_elect, identity=identity)
    exit_code = 0
    elector: LeaderElector | None = None
    lost = threading.Event()

    def lead() -> None:
        while not controller.wait_synced(timeout=1.0):
            if stop.is_set():
                return
        if stop.is_set() or (elector is not None and not elector.is_leader):
            return
        controller.start_workers()
        log.info("workers started", workers=args.workers)

    try:
        if args.leader_elect:
            try:
                elector = LeaderElector(kube, _lease_namespace(args.leader_election_namespace),
                                        args.leader_election_id, identity, on_leading=lead)
            except ValueError as exc:
                return fail(str(exc))
            metrics.leader.set(0)

            def elect() -> None:
                if not elector.run():  # type: ignore[union-attr]
                    lost.set()
                stop.set()

            threading.Thread(target=elect, name="leader-election", daemon=True).start()
            while not stop.wait(0.5):
                metrics.leader.set(1 if elector.is_leader else 0)
        else:
            metrics.leader.set(1)
            threading.Thread(target=lead, name="start", daemon=True).start()
            stop.wait()
    finally:
        log.info("shutting down")
        if elector is not None:
            elector.stop()
        controller.stop()
        if elector is not None and not lost.is_set():
            elector.release()
        events.stop()
        for s in servers:
            s.stop()
        metrics.leader.set(0)
    if lost.is_set():
        exit_code = EXIT_FAILURE
    log.info("stopped", exit_code=exit_code)
    return exit_code


if __name__ == "__main__":
    sys.exit(main())
