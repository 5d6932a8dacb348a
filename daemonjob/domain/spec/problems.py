"""A problem of a DaemonJob's spec as the rule book (validate.py) reports it, and how a refused
value is quoted: in the words kubectl shows for the API server's own errors
(`spec.schedule: Invalid value: "0 25 * * *": ...`)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

__all__ = [
    "Problem",
    "show",
    "is_int",
    "SHOWN_VALUE_MAX",
    "INVALID_SELECTOR",
    "TTL_NOT_ALLOWED",
    "INVALID_RESTART_POLICY",
    "INVALID_NAME",
    "INVALID_SPEC",
    "TEMPLATE_TOO_LARGE",
]

# Stalled reasons for specs the schema cannot catch
INVALID_SELECTOR = "InvalidSelector"
TTL_NOT_ALLOWED = "TTLNotAllowed"
INVALID_RESTART_POLICY = "InvalidRestartPolicy"
INVALID_NAME = "InvalidName"
INVALID_SPEC = "InvalidSpec"
TEMPLATE_TOO_LARGE = "TemplateTooLarge"

SHOWN_VALUE_MAX = 200  # characters of a refused value quoted in a message


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing wrong with a spec: `message` is `<field>: <detail>`, `field` that path."""

    reason: str
    message: str
    field: str = ""

    def __post_init__(self) -> None:
        if not self.field:
            object.__setattr__(self, "field", self.message.split(": ", 1)[0])


def show(value: Any) -> str:
    """A refused value as a message quotes it (JSON, cut short)."""
    text = json.dumps(value, default=str)
    if len(text) > SHOWN_VALUE_MAX:  # a refused 1 MB string is not repeated in a condition
        text = text[:SHOWN_VALUE_MAX] + "..."
    return text


def too_many(raw: list[Any], limit: int, path: str, problems: list[Problem]) -> bool:
    """A list longer than `limit` (the schema's maxItems, where it has one): one problem, in the
    API server's words, and its items are not read one by one. A problem per item of a 3 MiB
    list of empty values would cost a review hundreds of times its size."""
    if len(raw) <= limit:
        return False
    problems.append(Problem(INVALID_SPEC, f"{path}: Too many: {len(raw)}: must have at most {limit} items"))
    return True


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
