"""The types of the controller's flags: a bad value is refused by argparse in one clear line."""

from __future__ import annotations

import argparse
import re

__all__ = ["boolean", "namespaces", "positive_int", "seconds"]


def boolean(text: str) -> bool:
    value = text.strip().lower()
    if value in ("true", "1", "yes", "t"):
        return True
    if value in ("false", "0", "no", "f"):
        return False
    raise argparse.ArgumentTypeError(f"{text!r} is not true or false")


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be at least 1")
    return value


def seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be more than 0")
    return value


_NAMESPACE_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def namespaces(text: str) -> frozenset[str]:
    """A comma-separated list of namespace names (DNS-1123 labels); empty items are ignored."""
    names = frozenset(n.strip() for n in text.split(",") if n.strip())
    bad = sorted(n for n in names if len(n) > 63 or not _NAMESPACE_RE.match(n))
    if bad:
        raise argparse.ArgumentTypeError(
            f"{bad[0]!r} is not a namespace name (a DNS-1123 label: lower case "
            "letters, digits and '-', at most 63 characters)"
        )
    return names
