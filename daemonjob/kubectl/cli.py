"""`kubectl daemonjob`: per-node answers about DaemonJobs (kubectl finds `kubectl-daemonjob` on PATH).

kubectl's global flags (-n, -A, --kubeconfig, --context, --cluster, --user, --server, --token,
--as, --as-group, --request-timeout, the certificate flags) go before or after the command.
"""

from __future__ import annotations

import argparse
import sys
import textwrap
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

import urllib3

from daemonjob import budgetflags, defaults
from daemonjob.kubectl import (
    client,
    connection,
    create,
    listing,
    logs,
    output,
    plan,
    promote,
    release,
    rerun,
    results,
    runnow,
    status,
    suspend,
    version,
    wait,
)
from daemonjob.kubectl.client import EXIT_ERROR, EXIT_OK, EXIT_USAGE, PluginError
from daemonjob.kubectl.helptext import DETAILS, EXAMPLES, EXIT_STATUS
from daemonjob.kubectl.timefmt import parse_duration
from daemonjob.machinery.client.kube import ApiError

Command = Callable[[argparse.Namespace, client.Target], int]
HELP_WIDTH = 100  # a command's description in --help, wrapped once here


class Parser(argparse.ArgumentParser):
    """A usage error in one line on stderr, as every other error, and exit status 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"error: {message} (see '{self.prog} --help')\n")


def _duration(text: str) -> str:
    """A duration flag checked when parsed (a usage error), kept as typed for the messages."""
    try:
        parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def _paragraph(text: str) -> str:
    return textwrap.fill(" ".join(text.split()), width=HELP_WIDTH, break_on_hyphens=False, break_long_words=False)


def _node_selector_flags(parser: argparse.ArgumentParser, help_: str) -> None:
    """--node-selector chooses nodes; -l, which chose them before, stays one release as its
    deprecated alias (kubectl's -l selects the objects a command shows, here DaemonJobs)."""
    parser.add_argument("--node-selector", metavar="SELECTOR", help=help_ + " (kubectl -l syntax)")
    parser.add_argument(
        "-l",
        "--selector",
        dest="deprecated_selector",
        help=argparse.SUPPRESS,  # warns: see parse()
    )


def build_parser() -> argparse.ArgumentParser:
    # No abbreviated flags, as kubectl: `version --client` must not read as --client-key.
    parser = Parser(
        prog="kubectl daemonjob",
        allow_abbrev=False,
        description=__doc__,
        epilog=EXIT_STATUS,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    connection.add_flags(parser, top=True)
    parser.add_argument("--version", action="store_true", help="the same as the version command")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    common = Parser(add_help=False, allow_abbrev=False)
    connection.add_flags(common, top=False)

    def command(name: str, help_: str, run: Command, **kw: Any) -> argparse.ArgumentParser:
        p = sub.add_parser(
            name,
            allow_abbrev=False,
            help=help_,
            description=f"{help_}\n\n{_paragraph(DETAILS[name])}" if name in DETAILS else help_,
            parents=[common],
            epilog=EXAMPLES.get(name, "") + "\n" + EXIT_STATUS,
            formatter_class=argparse.RawDescriptionHelpFormatter,
            **kw,
        )
        p.set_defaults(run=run)
        return p

    def node_filters(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--node",
            action="append",
            metavar="NODE",
            type=_node_list,
            help="only this node (repeat, or comma-separated)",
        )
        p.add_argument("--failed", action="store_true", help="only nodes whose Job of this revision failed")
        _node_selector_flags(p, "only nodes with these labels")

    p = command("status", "Show each node's state, Job, exit code, reason and message.", status.run)
    p.add_argument("name", metavar="NAME")
    node_filters(p)
    p.add_argument("--all-nodes", action="store_true", help="also list nodes the DaemonJob does not select")
    output.add_output_flags(p, ("wide", "json", "yaml", "name", "jsonpath", "custom-columns"), table=True)

    p = command("results", "Show each node's recorded result, or the nodes grouped by outcome.", results.run)
    p.add_argument("name", metavar="NAME")
    p.add_argument(
        "--node", action="append", metavar="NODE", type=_node_list, help="only this node (repeat, or comma-separated)"
    )
    p.add_argument("--failed", action="store_true", help="only nodes whose Job failed")
    p.add_argument("--revision", metavar="REVISION", help="an earlier revision still kept (default: the current one)")
    p.add_argument("--run", dest="run_name", metavar="RUN", help="an earlier run still kept (default: the current one)")
    p.add_argument(
        "--group-by",
        nargs="?",
        const="message",
        metavar="message|.FIELD",
        help="count nodes per outcome: exit code and message (the default), or a field of a JSON message",
    )
    output.add_output_flags(p, ("wide", "json", "yaml", "name", "jsonpath", "custom-columns", "csv"), table=True)

    p = command("wait", "Follow a rollout until Complete (exit 0), Failed (exit 3) or the timeout (exit 1).", wait.run)
    p.add_argument("name", metavar="NAME")
    p.add_argument(
        "--timeout", type=_duration, metavar="DURATION", help="give up after this long (e.g. 30s, 10m); default: never"
    )
    rollout = sub.add_parser(
        "rollout",
        allow_abbrev=False,
        help="kubectl rollout's verbs: `rollout status NAME` waits like `wait`",
        description="kubectl rollout's verbs: `rollout status NAME` waits like `wait`",
    )
    rollout_sub = rollout.add_subparsers(dest="verb", metavar="VERB")
    rollout_sub.required = True
    p = rollout_sub.add_parser(
        "status",
        allow_abbrev=False,
        parents=[common],
        help="the same as `wait`",
        description=f"The same as `wait`.\n\n{_paragraph(DETAILS['rollout status'])}",
        epilog=EXAMPLES["wait"] + "\n" + EXIT_STATUS,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.set_defaults(run=wait.run)
    p.add_argument("name", metavar="NAME")
    p.add_argument(
        "--timeout", type=_duration, metavar="DURATION", help="give up after this long (e.g. 30s, 10m); default: never"
    )

    p = command("logs", "Print every node's output, each line prefixed by its node.", logs.run)
    p.add_argument("name", metavar="NAME")
    node_filters(p)
    p.add_argument(
        "-c", "--container", metavar="CONTAINER", help="this container only (default: every container of the pod)"
    )
    p.add_argument("--tail", type=int, default=-1, metavar="N", help="the last N lines of each node's log")
    p.add_argument("--since", type=_duration, metavar="DURATION", help="only lines newer than this (e.g. 10s, 5m, 1h)")
    p.add_argument("--timestamps", action="store_true", help="add the time to every line")
    p.add_argument("--output-dir", metavar="DIR", help="write DIR/<node>.log per node instead of printing")
    p.add_argument("--no-prefix", action="store_true", help="print lines without the [node] prefix")
    p.add_argument(
        "--max-concurrent",
        type=int,
        metavar="N",
        default=defaults.PLUGIN_LOG_CONCURRENCY,
        help="log requests in flight at once (default %(default)s)",
    )

    p = command("rerun", "Run again everywhere (a new revision), or only failed or named nodes.", rerun.run)
    p.add_argument("name", metavar="NAME")
    group = p.add_mutually_exclusive_group()
    group.add_argument("--failed", action="store_true", help="re-run the nodes whose Job failed")
    group.add_argument(
        "--node", action="append", metavar="NODE", type=_node_list, help="re-run this node (repeat, or comma-separated)"
    )
    group.add_argument(
        "--all",
        action="store_true",
        help="re-run every eligible node (a new revision); without a scope the command asks on a terminal "
        "and refuses elsewhere",
    )
    p.add_argument("-y", "--yes", action="store_true", help="do not ask for confirmation")

    p = command("pause", "Start no new node Job (spec.suspend: true); running Jobs finish.", suspend.pause)
    p.add_argument("name", metavar="NAME")
    p = command("resume", "Start node Jobs again (spec.suspend: false).", suspend.resume)
    p.add_argument("name", metavar="NAME")

    p = command(
        "promote",
        "Let the canaried revision or run go on to every node (the daemonjob.io/promote annotation).",
        promote.run,
    )
    p.add_argument("name", metavar="NAME")

    p = command(
        "release",
        "Uncordon nodes kept cordoned after their Job failed (the daemonjob.io/release annotation).",
        release.run,
    )
    p.add_argument("name", metavar="NAME")
    group = p.add_mutually_exclusive_group(required=True)
    group.add_argument(
        "--node",
        action="append",
        metavar="NODE",
        type=_node_list,
        help="release this node (repeat, or comma-separated)",
    )
    group.add_argument("--all", action="store_true", help="release every node this DaemonJob keeps cordoned")
    p.add_argument(
        "--dry-run",
        nargs="?",
        const="client",
        default="none",
        choices=["none", "client", "server"],
        help="client: say what would be released; server: let the API server check the write too",
    )

    p = command(
        "run-now", "Start one run now on every eligible node (the daemonjob.io/run-now annotation).", runnow.run
    )
    p.add_argument("name", metavar="NAME")
    p.add_argument("--wait", action="store_true", help="follow that run to its end: exit 0 succeeded, 3 failed")
    p.add_argument(
        "--timeout",
        type=_duration,
        metavar="DURATION",
        help="with --wait: give up after this long (e.g. 30s, 10m); default: never",
    )

    p = command("create", "Create a DaemonJob running COMMAND on every selected node.", create.run)
    p.add_argument("name", metavar="NAME")
    p.add_argument("--image", metavar="IMAGE", help="the container image (required)")
    _node_selector_flags(p, "nodes to run on, by label (spec.nodeSelector)")
    p.add_argument("--max-parallel", metavar="N|P%", help="nodes running at once: N or a percentage (e.g. 25%%)")
    p.add_argument(
        "--max-failed-nodes", metavar="N|P%", help="stop starting nodes once more have failed: N or a percentage"
    )
    p.add_argument("--schedule", metavar="CRON", help="a cron schedule: a new run on every node at each tick")
    p.add_argument(
        "--time-zone", metavar="TZ", help="the IANA time zone of --schedule, e.g. Europe/Berlin (default UTC)"
    )
    p.add_argument(
        "--concurrency-policy",
        choices=["Forbid", "Replace"],
        help="a tick while the last run is still active: skip it (Forbid, the default) or Replace",
    )
    p.add_argument("--restart", choices=["Never", "OnFailure"], default="Never", help="the pod's restartPolicy")
    p.add_argument("--backoff-limit", type=int, default=0, metavar="N", help="retries per node (default %(default)s)")
    p.add_argument(
        "--cordon", action="store_true", help="cordon each node around its Job (spec.nodeMaintenance.cordon)"
    )
    p.add_argument(
        "--drain", action="store_true", help="cordon and drain each node before its Job (spec.nodeMaintenance.drain)"
    )
    p.add_argument("--container-name", metavar="NAME", help="the container's name (default: NAME)")
    p.add_argument("--pod-annotation", action="append", metavar="KEY=VALUE", help="an annotation on every pod")
    p.add_argument(
        "--dry-run",
        nargs="?",
        const="client",
        default="none",
        choices=["none", "client", "server"],
        help="client: print without creating; server: let the API server check it",
    )
    output.add_output_flags(p, ("json", "yaml", "name", "jsonpath"), table=False)
    p.add_argument("args", nargs="*", metavar="-- COMMAND", help="the command and its arguments")

    p = command(
        "plan",
        "Show what a DaemonJob would do now: revision, eligible nodes and why not, order, waves, gates, drains.",
        plan.run,
    )
    p.add_argument("name", metavar="NAME", nargs="?", help="a DaemonJob applied (or -f FILE)")
    p.add_argument("-f", "--filename", metavar="FILE", help="a DaemonJob not applied yet, or changed (- for stdin)")
    p.add_argument(
        "--prometheus-url",
        metavar="URL",
        help="read the firing alerts of spec.rollout.haltOnAlerts there, as the controller does",
    )
    budgetflags.add_flags(p)  # the controller's cluster-wide limit on nodes out of service, as it is set there
    output.add_output_flags(p, ("json", "yaml", "jsonpath", "custom-columns"), table=True)

    p = command("list", "List DaemonJobs with their counts.", listing.run)
    p.add_argument("-l", "--selector", metavar="SELECTOR", help="DaemonJobs with these labels (kubectl -l syntax)")
    output.add_output_flags(p, ("wide", "json", "yaml", "name", "jsonpath", "custom-columns"), table=True)

    p = command("version", "Print the plugin's version, and the controller's and the CRD's.", _no_command)
    p.add_argument("--client", action="store_true", help="the plugin's version only, without asking the cluster")
    output.add_output_flags(p, ("json", "yaml", "jsonpath"), table=False)
    return parser


def _no_command(args: argparse.Namespace, target: client.Target) -> int:
    raise AssertionError("handled in main")


def _node_list(text: str) -> list[str]:
    return [n for n in (s.strip() for s in text.split(",")) if n]


def _flatten(values: list[list[str]] | None) -> list[str] | None:
    return None if values is None else [n for group in values for n in group]


def parse(argv: Sequence[str]) -> argparse.Namespace:
    """Parse the command line; everything after `--` is the container's command (`create`)."""
    argv = list(argv)
    trailing = argv[argv.index("--") + 1 :] if "--" in argv else []
    argv = argv[: argv.index("--")] if "--" in argv else argv
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.version and args.command is None:
        args.command, args.client, args.output = "version", False, None
    if args.command is None:
        parser.error("a command is required")
    if args.impersonate_groups and not args.impersonate:
        parser.error("--as-group needs --as: impersonating groups takes a user")
    if args.insecure_skip_tls_verify and args.certificate_authority:
        parser.error("--certificate-authority and --insecure-skip-tls-verify do not go together")
    if trailing and args.command != "create":
        parser.error(f"unexpected arguments after --: {' '.join(trailing)}")
    if args.command == "create":
        args.command_line = [*args.args, *trailing]
    if getattr(args, "node", None) is not None:
        args.node = _flatten(args.node)
    if getattr(args, "deprecated_selector", None) is not None:
        if args.node_selector is not None:
            parser.error("-l/--selector is the deprecated alias of --node-selector: give one of them")
        print(
            f"warning: {args.command} -l/--selector is deprecated and will select DaemonJobs, as kubectl's -l does: "
            "use --node-selector to choose nodes",
            file=sys.stderr,
        )
        args.node_selector = args.deprecated_selector
    return args


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv:  # bare `kubectl daemonjob`: what it can do
        build_parser().print_help()
        return EXIT_OK
    args = parse(argv)
    conn = connection.Connection.from_args(args)
    target: client.Target | None = None
    try:
        if args.command == "version":
            return version.run(args, lambda: client.connect(conn, args.namespace, args.all_namespaces))
        if args.command == "create" and args.dry_run == "client":
            target = client.Target(None, args.namespace or client.context_namespace(args.kubeconfig, args.context))
        else:
            target = client.connect(conn, args.namespace, args.all_namespaces)
        return args.run(args, target)
    except PluginError as exc:
        print(
            f"error: {exc.message}" if not exc.message.startswith("Error from server") else exc.message, file=sys.stderr
        )
        return exc.code
    except ApiError as exc:
        print(client.api_error_line(exc), file=sys.stderr)
        return EXIT_ERROR
    except urllib3.exceptions.HTTPError as exc:
        assert target is not None
        print(f"error: {client.describe_connection_error(target.kube, exc)}", file=sys.stderr)
        return EXIT_ERROR
    except ValueError as exc:  # a duration or number the user typed
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `| head`
        sys.stderr.close()
        return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
