"""The arguments of the `kubectl daemonjob` commands that only read: status, results, wait
(and `rollout status`), logs, plan, list and version.

One function per command, called by cli.build_parser in the order --help lists them.
"""

from __future__ import annotations

import argparse

from daemonjob import budgetflags, defaults
from daemonjob.kubectl.args.cliparts import Commands, duration, node_filters, node_list, paragraph
from daemonjob.kubectl.args.helptext import DETAILS, EXAMPLES, EXIT_STATUS
from daemonjob.kubectl.cluster import client
from daemonjob.kubectl.commands import listing, logs, plan, results, status, wait
from daemonjob.kubectl.formats import output


def add_status(cmds: Commands) -> None:
    p = cmds.add("status", "Show each node's state, Job, exit code, reason and message.", status.run)
    p.add_argument("name", metavar="NAME")
    node_filters(p)
    p.add_argument("--all-nodes", action="store_true", help="also list nodes the DaemonJob does not select")
    output.add_output_flags(p, ("wide", "json", "yaml", "name", "jsonpath", "custom-columns"), table=True)


def add_results(cmds: Commands) -> None:
    p = cmds.add("results", "Show each node's recorded result, or the nodes grouped by outcome.", results.run)
    p.add_argument("name", metavar="NAME")
    p.add_argument(
        "--node", action="append", metavar="NODE", type=node_list, help="only this node (repeat, or comma-separated)"
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


def _timeout(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--timeout", type=duration, metavar="DURATION", help="give up after this long (e.g. 30s, 10m); default: never"
    )


def add_wait(cmds: Commands) -> None:
    p = cmds.add("wait", "Follow a rollout until Complete (exit 0), Failed (exit 3) or the timeout (exit 1).", wait.run)
    p.add_argument("name", metavar="NAME")
    _timeout(p)


def add_rollout(cmds: Commands) -> None:
    """`rollout status`, kubectl's spelling of `wait`: the one verb of a command group."""
    rollout = cmds.sub.add_parser(
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
        parents=[cmds.common],
        help="the same as `wait`",
        description=f"The same as `wait`.\n\n{paragraph(DETAILS['rollout status'])}",
        epilog=EXAMPLES["wait"] + "\n" + EXIT_STATUS,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.set_defaults(run=wait.run)
    p.add_argument("name", metavar="NAME")
    _timeout(p)


def add_logs(cmds: Commands) -> None:
    p = cmds.add("logs", "Print every node's output, each line prefixed by its node.", logs.run)
    p.add_argument("name", metavar="NAME")
    node_filters(p)
    p.add_argument(
        "-c", "--container", metavar="CONTAINER", help="this container only (default: every container of the pod)"
    )
    p.add_argument("--tail", type=int, default=-1, metavar="N", help="the last N lines of each node's log")
    p.add_argument("--since", type=duration, metavar="DURATION", help="only lines newer than this (e.g. 10s, 5m, 1h)")
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


def add_plan(cmds: Commands) -> None:
    p = cmds.add(
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


def add_list(cmds: Commands) -> None:
    p = cmds.add("list", "List DaemonJobs with their counts.", listing.run)
    p.add_argument("-l", "--selector", metavar="SELECTOR", help="DaemonJobs with these labels (kubectl -l syntax)")
    output.add_output_flags(p, ("wide", "json", "yaml", "name", "jsonpath", "custom-columns"), table=True)


def _no_command(args: argparse.Namespace, target: client.Target) -> int:
    raise AssertionError("handled in main")


def add_version(cmds: Commands) -> None:
    """version runs in cli.main: it may answer without a cluster (--client), so without a Target."""
    p = cmds.add("version", "Print the plugin's version, and the controller's and the CRD's.", _no_command)
    p.add_argument("--client", action="store_true", help="the plugin's version only, without asking the cluster")
    output.add_output_flags(p, ("json", "yaml", "jsonpath"), table=False)
