"""`kubectl daemonjob`: per-node answers about DaemonJobs (kubectl finds `kubectl-daemonjob` on PATH).

kubectl's global flags (-n, -A, --kubeconfig, --context, --cluster, --user, --server, --token,
--as, --as-group, --request-timeout, the certificate flags) go before or after the command.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import urllib3

from daemonjob.kubectl.args import actionargs, viewargs
from daemonjob.kubectl.args.cliparts import Commands, Parser
from daemonjob.kubectl.args.helptext import EXIT_STATUS
from daemonjob.kubectl.cluster import client, connection
from daemonjob.kubectl.cluster.client import EXIT_ERROR, EXIT_OK, EXIT_USAGE, PluginError
from daemonjob.kubectl.commands import version
from daemonjob.machinery.client.kube import ApiError

# Each command's arguments, in the order --help lists the commands: those that read are in
# viewargs, those that write in actionargs, what they share in cliparts.
COMMANDS = (
    viewargs.add_status,
    viewargs.add_results,
    viewargs.add_wait,
    viewargs.add_rollout,
    viewargs.add_logs,
    actionargs.add_rerun,
    actionargs.add_pause_resume,
    actionargs.add_promote,
    actionargs.add_release,
    actionargs.add_run_now,
    actionargs.add_create,
    viewargs.add_plan,
    viewargs.add_list,
    viewargs.add_version,
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
    cmds = Commands(sub, common)
    for add in COMMANDS:
        add(cmds)
    return parser


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
