"""`daemonjob-controller`: flags, wiring and the process lifecycle.

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
import textwrap
import uuid
from collections.abc import Callable

import structlog

from daemonjob import __version__, budgetflags, defaults, flagtypes, logsetup, release
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
from daemonjob.domain.jobs.contract import API_VERSION, GROUP
from daemonjob.machinery.clock import RealClock
from daemonjob.machinery.gcpolicy import FreezeSurvivors
from daemonjob.machinery.kube import ApiError, ConfigError, Kube
from daemonjob.machinery.leaderelection import LeaderElector
from daemonjob.machinery.listen import parse_bind_address
from daemonjob.machinery.malloc import limit_malloc_arenas
from daemonjob.machinery.podidentity import own_namespace
from daemonjob.machinery.processmetrics import process_metrics
from daemonjob.machinery.ratelimit import TokenBucket
from daemonjob.machinery.serving import Server, check_route
from daemonjob.manager import Manager
from daemonjob.metricsserver import metrics_server

log = structlog.get_logger("daemonjob")

EXIT_FAILURE = 1

COMMANDS = """command:
  release-nodes   release every node held by node maintenance and remove every DaemonJob's
                  finalizer, before the node powers go (the chart's pre-delete hook runs it);
                  its flags: daemonjob-controller release-nodes --help
"""


def _shown(value: object) -> str:
    """A default as it is typed on the command line."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, (frozenset, set, list, tuple)):
        return ",".join(sorted(str(v) for v in value)) or "none"
    return str(value) if value != "" else "none"


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Every flag's help ends with its default, unless its help already words it."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if not action.option_strings or action.default in (None, argparse.SUPPRESS) or "default" in text:
            return text
        shown = _shown(action.default).replace("%", "%%")  # the help is %-formatted next
        return f"{text} (default: {shown})" if text else f"(default: {shown})"

    def _split_lines(self, text: str, width: int) -> list[str]:
        """Lines broken between words only: a label key or path stays whole."""
        return textwrap.wrap(" ".join(text.split()), width, break_on_hyphens=False)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="daemonjob-controller",
        usage="%(prog)s [release-nodes] [flags]",
        description="Runs a Job on every eligible node for each DaemonJob.",
        epilog=COMMANDS,
        formatter_class=HelpFormatter,
    )
    p.add_argument(
        "--kubeconfig",
        default=None,
        help="kubeconfig file (default: in-cluster config, else $KUBECONFIG or ~/.kube/config)",
    )
    p.add_argument("--namespace", default=None, help="watch DaemonJobs and Jobs in this namespace only (default: all)")
    p.add_argument("--workers", type=flagtypes.positive_int, default=defaults.WORKERS, help="concurrent reconciles")
    p.add_argument(
        "--kube-api-qps",
        type=float,
        default=defaults.KUBE_API_QPS,
        help="client-side API request rate limit (0: unlimited)",
    )
    p.add_argument(
        "--kube-api-burst",
        type=flagtypes.positive_int,
        default=defaults.KUBE_API_BURST,
        help="client-side API request burst",
    )
    p.add_argument("--leader-elect", action="store_true", help="elect a leader on a Lease; only it acts")
    p.add_argument("--leader-election-id", default=defaults.LEADER_ELECTION_ID, help="name of the Lease")
    p.add_argument(
        "--leader-election-namespace",
        default=None,
        help="namespace of the Lease (default: the pod's namespace, else default)",
    )
    p.add_argument(
        "--leader-election-lease-duration",
        type=flagtypes.seconds,
        default=defaults.LEASE_DURATION,
        metavar="SECONDS",
        help="how long a stand-by waits for an unrenewed Lease before taking it",
    )
    p.add_argument(
        "--leader-election-renew-deadline",
        type=flagtypes.seconds,
        default=defaults.RENEW_DEADLINE,
        metavar="SECONDS",
        help="how long the leader acts after its last renewal was sent",
    )
    p.add_argument(
        "--leader-election-retry-period",
        type=flagtypes.seconds,
        default=defaults.RETRY_PERIOD,
        metavar="SECONDS",
        help="time between renewals, and between a stand-by's attempts",
    )
    p.add_argument(
        "--metrics-bind-address",
        default=None,
        help=f"address of /metrics ('0' disables; default {defaults.METRICS_SECURE_BIND_ADDRESS}, "
        f"{defaults.METRICS_BIND_ADDRESS} with --metrics-secure=false)",
    )
    p.add_argument(
        "--metrics-secure",
        type=flagtypes.boolean,
        nargs="?",
        const=True,
        default=defaults.METRICS_SECURE,
        metavar="BOOL",
        help="serve /metrics over HTTPS to callers whose bearer token may get "
        "/metrics (TokenReview, SubjectAccessReview); false: plain HTTP, open",
    )
    p.add_argument(
        "--metrics-cert-dir",
        default="",
        help="directory of tls.crt and tls.key for /metrics, reloaded when they change "
        "(default: a self-signed certificate made at start)",
    )
    p.add_argument(
        "--health-probe-bind-address",
        default=defaults.HEALTH_PROBE_BIND_ADDRESS,
        help="address of /healthz and /readyz ('0' disables)",
    )
    p.add_argument(
        "--max-configmap-watches",
        type=flagtypes.positive_int,
        default=defaults.MAX_CONFIGMAP_WATCHES,
        help="ConfigMaps watched for rerunOnConfigChange across all DaemonJobs (one watch each)",
    )
    p.add_argument(
        "--max-configmap-watches-per-daemonjob",
        type=flagtypes.positive_int,
        default=defaults.MAX_CONFIGMAP_WATCHES_PER_DAEMONJOB,
        help="ConfigMaps one DaemonJob may have watched; past any of the limits it is Stalled",
    )
    p.add_argument(
        "--max-configmap-watches-per-namespace",
        type=flagtypes.positive_int,
        default=defaults.MAX_CONFIGMAP_WATCHES_PER_NAMESPACE,
        help="ConfigMaps the DaemonJobs of one namespace may have watched together",
    )
    p.add_argument(
        "--prometheus-url",
        default=None,
        help="Prometheus whose firing alerts spec.rollout.haltOnAlerts reads (/api/v1/alerts); "
        "without it a DaemonJob with haltOnAlerts starts no new node (AlertsUnknown) (default: none)",
    )
    p.add_argument(
        "--prometheus-poll-interval",
        type=flagtypes.seconds,
        default=defaults.PROMETHEUS_POLL_INTERVAL,
        metavar="SECONDS",
        help="time between two reads of the firing alerts",
    )
    p.add_argument(
        "--result-chunk-bytes",
        type=int,
        default=defaults.RESULT_CHUNK_BYTES,
        help=f"results per DaemonJobReport, serialised: 4096 up to the default {defaults.RESULT_CHUNK_BYTES}",
    )
    p.add_argument(
        "--history-result-wait",
        type=flagtypes.seconds,
        default=defaults.HISTORY_RESULT_WAIT,
        metavar="SECONDS",
        help="how long history cleanup holds a finished Job beyond historyLimit whose result is not recorded "
        "(the DaemonJobReports cannot be written); then it is deleted anyway, counted in "
        "daemonjob_jobs_deleted_unrecorded_total",
    )
    p.add_argument(
        "--node-maintenance-namespaces",
        type=flagtypes.namespaces,
        default=frozenset(defaults.NODE_MAINTENANCE_NAMESPACES),
        metavar="NAMESPACES",
        help="comma-separated namespaces whose DaemonJobs may cordon, drain and uncordon nodes "
        "(spec.nodeMaintenance; the Node RBAC of manifests/node-maintenance is needed too); "
        "elsewhere the webhook refuses such a DaemonJob and the controller sets it Stalled, "
        "NodeMaintenanceNotAllowed (default: none)",
    )
    budgetflags.add_flags(p)
    admission.add_flags(p)
    p.add_argument("--log-level", choices=logsetup.LEVELS, default=defaults.LOG_LEVEL, help="least severe level logged")
    p.add_argument(
        "--log-format",
        choices=("json", "console"),
        default=None,
        help="default: json in-cluster or when stderr is not a terminal, else console",
    )
    p.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    return p


def _lease_timings(args: argparse.Namespace) -> str | None:
    """Why the leader election timings cannot work, if they cannot."""
    if args.leader_election_lease_duration > args.leader_election_renew_deadline > args.leader_election_retry_period:
        return None
    return "need --leader-election-lease-duration > --leader-election-renew-deadline > --leader-election-retry-period"


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


def read_flags(argv: list[str]) -> tuple[argparse.Namespace, str | None]:
    """The controller's flags as `main` reads them (argparse exits on a malformed one), with
    every check that needs no cluster: the problem `main` reports, if any. A test runs each
    command the chart and the manifests render through it."""
    args = parser().parse_args(argv)
    try:
        if args.metrics_bind_address is None:
            args.metrics_bind_address = (
                defaults.METRICS_SECURE_BIND_ADDRESS if args.metrics_secure else defaults.METRICS_BIND_ADDRESS
            )
        args.metrics_addr = parse_bind_address(args.metrics_bind_address)
        args.health_addr = parse_bind_address(args.health_probe_bind_address)
        args.webhook_addr = parse_bind_address(args.webhook_bind_address)
    except ValueError as exc:
        return args, str(exc)
    if args.leader_elect and (problem := _lease_timings(args)):
        return args, problem
    return args, None


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
