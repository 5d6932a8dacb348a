"""The pieces every `kubectl daemonjob` command's parser is made of: the parser class, the
argument types, the node flags several commands share, and how a command is added.

Kept apart from the commands' own arguments (viewargs, actionargs) so that each flag that
means the same thing is written once.
"""

from __future__ import annotations

import argparse
import textwrap
from collections.abc import Callable
from typing import Any, NoReturn

from daemonjob.kubectl.args.helptext import DETAILS, EXAMPLES, EXIT_STATUS
from daemonjob.kubectl.cluster import client
from daemonjob.kubectl.cluster.client import EXIT_USAGE
from daemonjob.kubectl.formats.timefmt import parse_duration

Command = Callable[[argparse.Namespace, client.Target], int]
HELP_WIDTH = 100  # a command's description in --help, wrapped once here


class Parser(argparse.ArgumentParser):
    """A usage error in one line on stderr, as every other error, and exit status 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"error: {message} (see '{self.prog} --help')\n")


def duration(text: str) -> str:
    """A duration flag checked when parsed (a usage error), kept as typed for the messages."""
    try:
        parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def node_list(text: str) -> list[str]:
    """--node's value: one node or several, comma-separated (main flattens the repeats)."""
    return [n for n in (s.strip() for s in text.split(",")) if n]


def paragraph(text: str) -> str:
    return textwrap.fill(" ".join(text.split()), width=HELP_WIDTH, break_on_hyphens=False, break_long_words=False)


def node_selector_flags(parser: argparse.ArgumentParser, help_: str) -> None:
    """--node-selector chooses nodes; -l, which chose them before, stays one release as its
    deprecated alias (kubectl's -l selects the objects a command shows, here DaemonJobs)."""
    parser.add_argument("--node-selector", metavar="SELECTOR", help=help_ + " (kubectl -l syntax)")
    parser.add_argument(
        "-l",
        "--selector",
        dest="deprecated_selector",
        help=argparse.SUPPRESS,  # warns: see cli.parse()
    )


def node_filters(p: argparse.ArgumentParser) -> None:
    """The nodes a command that reads shows: --node, --failed and --node-selector."""
    p.add_argument(
        "--node",
        action="append",
        metavar="NODE",
        type=node_list,
        help="only this node (repeat, or comma-separated)",
    )
    p.add_argument("--failed", action="store_true", help="only nodes whose Job of this revision failed")
    node_selector_flags(p, "only nodes with these labels")


class Commands:
    """Adds commands to the plugin's parser, each with kubectl's global flags (`common`), its
    details and examples from helptext, and the exit statuses every command shares."""

    def __init__(self, sub: Any, common: argparse.ArgumentParser) -> None:
        self.sub, self.common = sub, common

    def add(self, name: str, help_: str, run: Command, **kw: Any) -> argparse.ArgumentParser:
        p: argparse.ArgumentParser = self.sub.add_parser(
            name,
            allow_abbrev=False,
            help=help_,
            description=f"{help_}\n\n{paragraph(DETAILS[name])}" if name in DETAILS else help_,
            parents=[self.common],
            epilog=EXAMPLES.get(name, "") + "\n" + EXIT_STATUS,
            formatter_class=argparse.RawDescriptionHelpFormatter,
            **kw,
        )
        p.set_defaults(run=run)
        return p
