"""`daemonjob-controller`: its flags read (flags.py), the wiring and the process lifecycle.

Flag names follow controller-runtime's. Problems the user can fix (a bad flag, missing
credentials, an unreachable API server, a CRD not installed) end the process with one
clear line and a non-zero exit, never a traceback.
"""

from __future__ import annotations

import argparse
import random
import signal
import socket
import sys
import uuid
from collections.abc import Callable

import structlog

from daemonjob import __version__, defaults, logsetup, release
from daemonjob.admission import webhook as admission
from daemonjob.controller.metrics.limiter import MeasuredLimiter
from daemonjob.controller.metrics.metrics import Metrics
from daemonjob.controller.nodework.cordonstop import LeaseStop
from daemonjob.controller.nodework.options import NodeMaintenanceOptions
from daemonjob.controller.runtime.configmaps import ConfigMapLimits
from daemonjob.controller.runtime.events import EventRecorder
from daemonjob.controller.runtime.fence import Fence
from daemonjob.controller.runtime.turnseal import TurnSeal, load_key
from daemonjob.controller.wiring.controller import Controller
from daemonjob.domain.shared.apinames import API_VERSION, GROUP
from daemonjob.flags import parser, read_flags
from daemonjob.machinery.cache.gcpolicy import FreezeSurvivors
from daemonjob.machinery.client.kube import ApiError, ConfigError, Kube
from daemonjob.machinery.process.clock import RealClock
from daemonjob.machinery.process.leaderelection import LeaderElector
from daemonjob.machinery.process.malloc import limit_malloc_arenas
from daemonjob.machinery.process.podidentity import own_namespace
from daemonjob.machinery.process.processmetrics import process_metrics
from daemonjob.machinery.queue.ratelimit import TokenBucket
from daemonjob.machinery.server.serving import Server, check_route
from daemonjob.manager import Manager
from daemonjob.metricsserver import metrics_server

__all__ = ["fail", "main", "parser", "read_flags"]

log = structlog.get_logger("daemonjob")

EXIT_FAILURE = 1


def fail(message: str) -> int:
    print(f"daemonjob-controller: error: {message}", file=sys.stderr)
    return EXIT_FAILURE


def _check_api(kube: Kube) -> str | None:
    """One line saying why the controller cannot work against this API server, if it cannot."""
    try:
        kube.request("GET", "/version", timeout=10)
        kube.request("GET", f"/apis/{API_VERSION}", timeout=10)
    except ApiError as exc:
        if exc.not_found:
            return (
                f"the DaemonJob CRD (daemonjobs.{GROUP}) is not installed on {kube.host}: "
                "kubectl apply -f manifests/crd.yaml"
            )
        return f"the API server at {kube.host} refused the controller: {exc}"
    except Exception as exc:
        return f"cannot reach the Kubernetes API server at {kube.host}: {exc}"
    return None


def _servers(
    args: argparse.Namespace, metrics: Metrics, controller: Controller, ready: Callable[[], str | None]
) -> list[Server]:
    """Start /metrics and the probes; OSError when an address is taken (nothing left running)."""
    servers: list[Server] = []
    try:
        if args.metrics_addr:
            servers.append(metrics_server(args, metrics.registry).start())
        if args.health_addr:
            servers.append(
                Server(
                    args.health_addr,
                    {"/healthz": check_route(controller.healthy), "/readyz": check_route(ready)},
                    "health",
                    max_connections=defaults.HEALTH_MAX_CONNECTIONS,
                ).start()
            )
    except OSError:
        for s in servers:
            s.stop()
        raise
    return servers


def _both(first: Callable[[], str | None], second: Callable[[], str | None]) -> Callable[[], str | None]:
    return lambda: first() or second()


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["release-nodes"]:  # before the node powers go: see daemonjob/release.py
        return release.main(argv[1:])
    args, problem = read_flags(argv)
    if problem:
        return fail(problem)
    logsetup.configure(args.log_level, args.log_format)
    limit_malloc_arenas()  # before any thread starts

    clock = RealClock()
    rng = random.Random()  # the one source of jitter: watch timeouts, backoffs, lease retries
    metrics = Metrics()
    process_metrics(metrics.registry)
    try:
        limiter = MeasuredLimiter(TokenBucket(args.kube_api_qps, args.kube_api_burst), metrics.limiter_wait)
        kube = Kube.from_config(args.kubeconfig, limiter=limiter, on_request=metrics.on_request)
    except ConfigError as exc:
        return fail(str(exc))
    problem = _check_api(kube)
    if problem:
        return fail(problem)

    identity = f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}"
    elector: LeaderElector | None = None
    fence = Fence()
    lease_ns = own_namespace(args.leader_election_namespace)
    try:  # every replica reads the one key: a node turn's records verify across restarts and leaders
        seal = TurnSeal(load_key(kube, lease_ns, defaults.TURN_SEAL_SECRET))
    except (ApiError, ValueError) as exc:
        return fail(f"cannot read or create the Secret {lease_ns}/{defaults.TURN_SEAL_SECRET}: {exc}")
    if args.leader_elect:
        # Its own client, without the rate limiter: a renewal never queues behind the workers' writes.
        lease_kube = Kube.from_config(args.kubeconfig, on_request=metrics.on_request)
        elector = LeaderElector(
            lease_kube,
            lease_ns,
            args.leader_election_id,
            identity,
            lease_duration=args.leader_election_lease_duration,
            renew_deadline=args.leader_election_renew_deadline,
            retry_period=args.leader_election_retry_period,
            clock=clock,
            rng=rng,
        )
        fence = Fence(elector.holds_lease, elector.lease_remaining)
    events = EventRecorder(kube, host=socket.gethostname(), clock=clock, fence=fence)
    controller = Controller.for_kube(
        kube,
        namespace=args.namespace,
        workers=args.workers,
        metrics=metrics,
        events=events,
        fence=fence,
        clock=clock,
        rng=rng,
        configmap_limits=ConfigMapLimits(
            args.max_configmap_watches_per_daemonjob,
            args.max_configmap_watches,
            args.max_configmap_watches_per_namespace,
        ),
        prometheus_url=args.prometheus_url,
        prometheus_poll_interval=args.prometheus_poll_interval,
        node_maintenance=NodeMaintenanceOptions.from_flags(
            args, LeaseStop(kube, lease_ns, args.leader_election_id, clock.wall)
        ),
        result_chunk_bytes=args.result_chunk_bytes,
        history_result_wait=args.history_result_wait,
        seal=seal,
    )
    ready = controller.ready
    webhook: admission.Webhook | None = None
    try:
        if args.webhook_addr:  # every replica serves: admission never waits for an election
            args.webhook_service_namespace = own_namespace(args.webhook_service_namespace)  # the pod's
            webhook = admission.start(
                args,
                args.webhook_addr,
                kube,
                metrics.registry,
                maintenance_namespaces=args.node_maintenance_namespaces,
                nodes=controller.nodes.store.list,
            )
            ready = _both(controller.ready, webhook.problem)
        servers = _servers(args, metrics, controller, ready)
    except OSError as exc:
        if webhook is not None:
            webhook.stop()
        return fail(f"cannot listen: {exc}")
    if webhook is not None:
        servers.append(webhook)  # type: ignore[arg-type]  # stopped with the servers
    gc_policy = FreezeSurvivors()
    gc_policy.install()
    manager = Manager(controller, events, metrics, elector=elector, fence=fence, servers=servers, gc_policy=gc_policy)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: manager.request_stop())
    log.info(
        "starting",
        version=__version__,
        namespace=args.namespace or "(all)",
        workers=args.workers,
        leader_elect=args.leader_elect,
        identity=identity,
        node_maintenance_namespaces=sorted(args.node_maintenance_namespaces),
        max_unavailable_nodes=args.max_unavailable_nodes,
        protected_node_selector=args.protected_node_selector,
    )
    return manager.run()


if __name__ == "__main__":
    sys.exit(main())
