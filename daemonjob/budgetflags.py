"""The flags of the cluster's disruption budget (domain/nodework/disruption.py), checked as they are read."""

from __future__ import annotations

import argparse
import re

from daemonjob import defaults
from daemonjob.domain.nodework.disruption import protected_matcher
from daemonjob.domain.spec.labelrules import InvalidSelector

__all__ = ["add_flags"]

_PERCENT_RE = re.compile(r"^(100|[1-9]?[0-9])%$")


def count_or_percent(text: str) -> int | str:
    """A number of nodes (0 or more) or a percentage of all nodes (0% to 100%)."""
    value = text.strip()
    if _PERCENT_RE.match(value):
        return value
    try:
        count = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a count nor a percentage such as 10%") from None
    if count < 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be at least 0")
    return count


def selector(text: str) -> str:
    try:
        protected_matcher(text)
    except InvalidSelector as exc:
        raise argparse.ArgumentTypeError(exc.message) from None
    return text.strip()


def add_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--max-unavailable-nodes",
        type=count_or_percent,
        default=defaults.MAX_UNAVAILABLE_NODES,
        metavar="N|N%",
        help="node maintenance cordons no node while this many nodes of the cluster are unschedulable "
        "or NotReady, whoever did it: a count, or a percentage of all nodes rounded up "
        "(default: %(default)s)",
    )
    p.add_argument(
        "--protected-node-selector",
        type=selector,
        default=defaults.PROTECTED_NODE_SELECTOR,
        metavar="SELECTOR",
        help="label selector (kubectl -l syntax) of nodes of which node maintenance never cordons the last "
        "Ready schedulable one; empty: none (default: %(default)s)",
    )
