"""The controller's command line (`daemonjob-controller`): every flag with its help, and the
checks of them that need no cluster. cli.py reads them and runs the process.

Flag names follow controller-runtime's.
"""

from __future__ import annotations

import argparse
import textwrap

from daemonjob import __version__, budgetflags, defaults, flagtypes, logsetup
from daemonjob.admission import webhook as admission
from daemonjob.machinery.server.listen import parse_bind_address

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
