"""`kubectl daemonjob`: per-node answers about DaemonJobs (kubectl finds `kubectl-daemonjob` on PATH).

Exit status: 0 fine; 1 an error (bad input, no such DaemonJob, no cluster, timeout);
2 the DaemonJob has failed nodes (`status`) or its rollout or run failed (`wait`, `run-now --wait`);
`plan` exits 1 when the DaemonJob would be refused or Stalled.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import Any

import urllib3

from daemonjob import budgetflags, defaults
from daemonjob.kubectl import (
    client,
    create,
    listing,
    logs,
    plan,
    promote,
    release,
    rerun,
    results,
    runnow,
    status,
    suspend,
    wait,
)
from daemonjob.kubectl.client import PluginError
from daemonjob.machinery.kube import ApiError

Command = Callable[[argparse.Namespace, client.Target], int]

EXAMPLES = {
    "status": """examples:
  kubectl daemonjob status node-setup             # header and one row per node
  kubectl daemonjob status node-setup --failed    # only failed nodes; exit 2 if any
  kubectl daemonjob status node-setup -o wide     # full messages, pods, revisions
  kubectl daemonjob status node-setup -l zone=a   # nodes with this label only
  kubectl daemonjob status node-setup -o json | jq '.nodes[] | select(.state=="failed")'
""",
    "results": """examples:
  kubectl daemonjob results node-audit                        # every node's recorded result
  kubectl daemonjob results node-audit --group-by             # nodes grouped by exit code and message
  kubectl daemonjob results node-audit --group-by .kernel     # grouped by a field of a JSON message
  kubectl daemonjob results node-audit --failed -o csv > failed.csv
  kubectl daemonjob results node-audit --revision 5f9c2d1e0a  # an earlier revision still kept
""",
    "wait": """examples:
  kubectl daemonjob wait node-setup --timeout 10m   # exit 0 Complete, 2 Failed, 1 timeout
  kubectl daemonjob rollout status node-setup       # the same, in kubectl rollout's words
""",
    "logs": """examples:
  kubectl daemonjob logs node-setup                       # every node's output, [node] prefixed
  kubectl daemonjob logs node-setup --failed --tail 20    # the last words of failed nodes
  kubectl daemonjob logs node-setup --output-dir out/     # out/<node>.log, one file per node
  kubectl daemonjob logs node-setup --node node-07 -c setup
""",
    "rerun": """examples:
  kubectl daemonjob rerun node-setup                   # every node again (a new revision)
  kubectl daemonjob rerun node-setup --failed --yes    # only the nodes that failed
  kubectl daemonjob rerun node-setup --node node-03 --node node-07
""",
    "pause": """examples:
  kubectl daemonjob pause node-setup     # no new node starts; running Jobs finish, ticks are skipped
  kubectl daemonjob resume node-setup
""",
    "resume": """examples:
  kubectl daemonjob resume node-setup    # the rollout goes on where it stopped
""",
    "promote": """examples:
  kubectl daemonjob promote node-setup   # the canaried revision (or run) goes on to every node
""",
    "release": """examples:
  kubectl daemonjob release node-setup --node node-07            # uncordon a failed node kept cordoned
  kubectl daemonjob release node-setup --node node-03,node-07 --dry-run
  kubectl daemonjob release node-setup --all                     # every node it keeps cordoned
""",
    "run-now": """examples:
  kubectl daemonjob run-now nightly-cleanup                       # one run now on every eligible node
  kubectl daemonjob run-now nightly-cleanup --wait --timeout 30m  # and follow it: exit 0, 2 failed, 1 timeout
""",
    "create": """examples:
  kubectl daemonjob create collect-dmesg --image busybox:1.36 -- sh -c 'dmesg | tail'
  kubectl daemonjob create upgrade --image tool:1.2 -l pool=gpu --max-parallel 10% -- upgrade.sh
  kubectl daemonjob create nightly --image tool:1.2 --schedule '0 3 * * *' --time-zone Europe/Berlin -- cleanup
  kubectl daemonjob create x --image busybox:1.36 --dry-run=client -o yaml -- true
""",
    "plan": """examples:
  kubectl daemonjob plan -f node-setup.yaml        # before kubectl apply: nodes, order, waves, gates
  kubectl daemonjob plan node-setup                # the applied one, on the cluster as it is now
  kubectl daemonjob plan -f node-setup.yaml -o json | jq '.waves[0]'
exit status: 0; 1 when the DaemonJob would be refused or Stalled
""",
    "list": """examples:
  kubectl daemonjob list -A
  kubectl daemonjob list -n ops -l team=storage
""",
}


def _connection_flags(parser: argparse.ArgumentParser, top: bool) -> None:
    """kubectl's global flags, accepted before and after the command (later ones win)."""
    d: dict[str, Any] = {} if top else {"default": argparse.SUPPRESS}
    parser.add_argument("-n", "--namespace", help="the namespace (default: the context's, else default)", **d)
    parser.add_argument(
        "-A",
        "--all-namespaces",
        action="store_true",
        help="look in every namespace (for NAME: the one namespace holding it)",
        **d,
    )
    parser.add_argument("--context", help="the kubeconfig context to use", **d)
    parser.add_argument("--kubeconfig", help="path to the kubeconfig file", **d)


def _output_flag(parser: argparse.ArgumentParser, choices: Sequence[str]) -> None:
    parser.add_argument("-o", "--output", choices=list(choices), help="output format")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kubectl daemonjob", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    _connection_flags(parser, top=True)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    common = argparse.ArgumentParser(add_help=False)
    _connection_flags(common, top=False)

    def command(name: str, help_: str, run: Command, **kw: Any) -> argparse.ArgumentParser:
        p = sub.add_parser(
            name,
            help=help_,
            description=help_,
            parents=[common],
            epilog=EXAMPLES.get(name),
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
        p.add_argument("-l", "--selector", help="only nodes with these labels (kubectl -l syntax)")

    p = command("status", "Show each node's state, Job, exit code, reason and message.", status.run)
    p.add_argument("name", metavar="NAME")
    node_filters(p)
    p.add_argument("--all-nodes", action="store_true", help="also list nodes the DaemonJob does not select")
    _output_flag(p, ("wide", "json", "yaml"))

    p = command("results", "Show each node's recorded result, or the nodes grouped by outcome.", results.run)
    p.add_argument("name", metavar="NAME")
    p.add_argument(
        "--node", action="append", metavar="NODE", type=_node_list, help="only this node (repeat, or comma-separated)"
    )
    p.add_argument("--failed", action="store_true", help="only nodes whose Job failed")
    p.add_argument("--revision", help="an earlier revision still kept (default: the current one)")
    p.add_argument("--run", dest="run_name", help="an earlier run still kept (default: the current one)")
    p.add_argument(
        "--group-by",
        nargs="?",
        const="message",
        metavar="message|.FIELD",
        help="count nodes per outcome: exit code and message (the default), or a field of a JSON message",
    )
    _output_flag(p, ("wide", "json", "yaml", "csv"))

    p = command("wait", "Follow a rollout until Complete (exit 0), Failed (exit 2) or the timeout (exit 1).", wait.run)
    p.add_argument("name", metavar="NAME")
    p.add_argument("--timeout", help="give up after this long (e.g. 30s, 10m); default: never")
    rollout = sub.add_parser(
        "rollout",
        help="kubectl rollout's verbs: `rollout status NAME` waits like `wait`",
        description="kubectl rollout's verbs: `rollout status NAME` waits like `wait`",
    )
    rollout_sub = rollout.add_subparsers(dest="verb", metavar="VERB")
    rollout_sub.required = True
    p = rollout_sub.add_parser(
        "status",
        parents=[common],
        help="the same as `wait`",
        description="The same as `wait`",
        epilog=EXAMPLES["wait"],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.set_defaults(run=wait.run)
    p.add_argument("name", metavar="NAME")
    p.add_argument("--timeout", help="give up after this long (e.g. 30s, 10m); default: never")

    p = command("logs", "Print every node's output, each line prefixed by its node.", logs.run)
    p.add_argument("name", metavar="NAME")
    node_filters(p)
    p.add_argument("-c", "--container", help="this container only (default: every container of the pod)")
    p.add_argument("--tail", type=int, default=-1, help="the last N lines of each node's log")
    p.add_argument("--since", help="only lines newer than this (e.g. 10s, 5m, 1h)")
    p.add_argument("--timestamps", action="store_true", help="add the time to every line")
    p.add_argument("--output-dir", metavar="DIR", help="write DIR/<node>.log per node instead of printing")
    p.add_argument("--no-prefix", action="store_true", help="print lines without the [node] prefix")
    p.add_argument(
        "--max-concurrent",
        type=int,
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
    p.add_argument("--wait", action="store_true", help="follow that run to its end: exit 0 succeeded, 2 failed")
    p.add_argument("--timeout", help="with --wait: give up after this long (e.g. 30s, 10m); default: never")

    p = command("create", "Create a DaemonJob running COMMAND on every selected node.", create.run)
    p.add_argument("name", metavar="NAME")
    p.add_argument("--image", help="the container image (required)")
    p.add_argument("-l", "--selector", dest="node_selector", help="nodes to run on, by label (kubectl -l syntax)")
    p.add_argument("--max-parallel", help="nodes running at once: N or a percentage (e.g. 25%%)")
    p.add_argument("--max-failed-nodes", help="stop starting nodes once more have failed: N or a percentage")
    p.add_argument("--schedule", help="a cron schedule: a new run on every node at each tick")
    p.add_argument("--time-zone", help="the IANA time zone of --schedule, e.g. Europe/Berlin (default UTC)")
    p.add_argument(
        "--concurrency-policy",
        choices=["Forbid", "Replace"],
        help="a tick while the last run is still active: skip it (Forbid, the default) or Replace",
    )
    p.add_argument("--restart", choices=["Never", "OnFailure"], default="Never", help="the pod's restartPolicy")
    p.add_argument("--backoff-limit", type=int, default=0, help="retries per node (default %(default)s)")
    p.add_argument("--container-name", help="the container's name (default: NAME)")
    p.add_argument("--pod-annotation", action="append", metavar="KEY=VALUE", help="an annotation on every pod")
    p.add_argument(
        "--dry-run",
        nargs="?",
        const="client",
        default="none",
        choices=["none", "client", "server"],
        help="client: print without creating; server: let the API server check it",
    )
    _output_flag(p, ("json", "yaml"))
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
    _output_flag(p, ("json", "yaml"))

    p = command("list", "List DaemonJobs with their counts.", listing.run)
    p.add_argument("-l", "--selector", help="DaemonJobs with these labels")
    _output_flag(p, ("json", "yaml"))
    return parser


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
    if trailing and args.command != "create":
        parser.error(f"unexpected arguments after --: {' '.join(trailing)}")
    if args.command == "create":
        args.command_line = [*args.args, *trailing]
    if getattr(args, "node", None) is not None:
        args.node = _flatten(args.node)
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    target: client.Target | None = None
    try:
        if args.command == "create" and args.dry_run == "client":
            target = client.Target(None, args.namespace or client.context_namespace(args.kubeconfig, args.context))
        else:
            target = client.connect(args.kubeconfig, args.context, args.namespace, args.all_namespaces)
        return args.run(args, target)
    except PluginError as exc:
        print(
            f"error: {exc.message}" if not exc.message.startswith("Error from server") else exc.message, file=sys.stderr
        )
        return exc.code
    except ApiError as exc:
        print(client.api_error_line(exc), file=sys.stderr)
        return 1
    except urllib3.exceptions.HTTPError as exc:
        assert target is not None
        print(f"error: {client.describe_connection_error(target.kube, exc)}", file=sys.stderr)
        return 1
    except ValueError as exc:  # a duration or number the user typed
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `| head`
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    sys.exit(main())
