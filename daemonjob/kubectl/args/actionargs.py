"""The arguments of the `kubectl daemonjob` commands that write: rerun, pause, resume,
promote, release, run-now and create.

One function per command, called by cli.build_parser in the order --help lists them.
"""

from __future__ import annotations

import argparse

from daemonjob.kubectl.args.cliparts import Commands, duration, node_list, node_selector_flags
from daemonjob.kubectl.commands import create, promote, release, rerun, runnow, suspend
from daemonjob.kubectl.formats import output


def _dry_run(p: argparse.ArgumentParser, help_: str) -> None:
    p.add_argument(
        "--dry-run",
        nargs="?",
        const="client",
        default="none",
        choices=["none", "client", "server"],
        help=help_,
    )


def add_rerun(cmds: Commands) -> None:
    p = cmds.add("rerun", "Run again everywhere (a new revision), or only failed or named nodes.", rerun.run)
    p.add_argument("name", metavar="NAME")
    group = p.add_mutually_exclusive_group()
    group.add_argument("--failed", action="store_true", help="re-run the nodes whose Job failed")
    group.add_argument(
        "--node", action="append", metavar="NODE", type=node_list, help="re-run this node (repeat, or comma-separated)"
    )
    group.add_argument(
        "--all",
        action="store_true",
        help="re-run every eligible node (a new revision); without a scope the command asks on a terminal "
        "and refuses elsewhere",
    )
    p.add_argument("-y", "--yes", action="store_true", help="do not ask for confirmation")


def add_pause_resume(cmds: Commands) -> None:
    p = cmds.add("pause", "Start no new node Job (spec.suspend: true); running Jobs finish.", suspend.pause)
    p.add_argument("name", metavar="NAME")
    p = cmds.add("resume", "Start node Jobs again (spec.suspend: false).", suspend.resume)
    p.add_argument("name", metavar="NAME")


def add_promote(cmds: Commands) -> None:
    p = cmds.add(
        "promote",
        "Let the canaried revision or run go on to every node (the daemonjob.io/promote annotation).",
        promote.run,
    )
    p.add_argument("name", metavar="NAME")


def add_release(cmds: Commands) -> None:
    p = cmds.add(
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
        type=node_list,
        help="release this node (repeat, or comma-separated)",
    )
    group.add_argument("--all", action="store_true", help="release every node this DaemonJob keeps cordoned")
    _dry_run(p, "client: say what would be released; server: let the API server check the write too")


def add_run_now(cmds: Commands) -> None:
    p = cmds.add(
        "run-now", "Start one run now on every eligible node (the daemonjob.io/run-now annotation).", runnow.run
    )
    p.add_argument("name", metavar="NAME")
    p.add_argument("--wait", action="store_true", help="follow that run to its end: exit 0 succeeded, 3 failed")
    p.add_argument(
        "--timeout",
        type=duration,
        metavar="DURATION",
        help="with --wait: give up after this long (e.g. 30s, 10m); default: never",
    )


def add_create(cmds: Commands) -> None:
    p = cmds.add("create", "Create a DaemonJob running COMMAND on every selected node.", create.run)
    p.add_argument("name", metavar="NAME")
    p.add_argument("--image", metavar="IMAGE", help="the container image (required)")
    node_selector_flags(p, "nodes to run on, by label (spec.nodeSelector)")
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
    _dry_run(p, "client: print without creating; server: let the API server check it")
    output.add_output_flags(p, ("json", "yaml", "name", "jsonpath"), table=False)
    p.add_argument("args", nargs="*", metavar="-- COMMAND", help="the command and its arguments")
