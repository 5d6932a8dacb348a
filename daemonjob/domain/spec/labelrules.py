"""Label keys and values as the API server checks them, and the error a refused selector raises.

`InvalidSelector` carries a kubectl-style message: field path, problem, offending value.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["InvalidSelector", "invalid_value", "unsupported_value", "validate_label_key", "validate_label_value"]

LABEL_NAME_MAX = 63
LABEL_PREFIX_MAX = 253
_NAME_RE = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_DNS1123_SUBDOMAIN_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")

_NAME_HINT = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
    "with an alphanumeric character (e.g. 'MyName', or 'my.name', or '123-abc')"
)


class InvalidSelector(ValueError):
    """A selector the API server would reject; `message` is meant for users."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def _quote(value: Any) -> str:
    return f'"{value}"' if isinstance(value, str) else repr(value)


def invalid_value(path: str, value: Any, detail: str) -> InvalidSelector:
    """The API server's "Invalid value" message."""
    return InvalidSelector(f"{path}: Invalid value: {_quote(value)}: {detail}")


def unsupported_value(path: str, value: Any, supported: tuple[str, ...]) -> InvalidSelector:
    """The API server's "Unsupported value" message."""
    allowed = ", ".join(f'"{s}"' for s in supported)
    return InvalidSelector(f"{path}: Unsupported value: {_quote(value)}: supported values: {allowed}")


def validate_label_key(key: Any, path: str) -> str:
    """Check a qualified label name (`[prefix/]name`) as the API server does."""
    if not isinstance(key, str):
        raise invalid_value(path, key, "must be a string")
    prefix, sep, name = key.rpartition("/")
    if sep:
        if not prefix:
            raise invalid_value(path, key, "prefix part must be non-empty")
        if len(prefix) > LABEL_PREFIX_MAX:
            raise invalid_value(path, key, f"prefix part must be no more than {LABEL_PREFIX_MAX} characters")
        if not _DNS1123_SUBDOMAIN_RE.match(prefix):
            raise invalid_value(
                path,
                key,
                "prefix part a lowercase RFC 1123 subdomain must consist of lower case "
                "alphanumeric characters, '-' or '.', and must start and end with an "
                "alphanumeric character (e.g. 'example.com')",
            )
    if not name:
        raise invalid_value(path, key, "name part must be non-empty")
    if len(name) > LABEL_NAME_MAX:
        raise invalid_value(path, key, f"name part must be no more than {LABEL_NAME_MAX} characters")
    if not _NAME_RE.match(name):
        raise invalid_value(path, key, f"name part {_NAME_HINT}")
    return key


def validate_label_value(value: Any, path: str) -> str:
    """Check a label value: empty, or at most 63 name characters."""
    if not isinstance(value, str):
        raise invalid_value(path, value, "must be a string")
    if value == "":
        return value
    if len(value) > LABEL_NAME_MAX:
        raise invalid_value(path, value, f"must be no more than {LABEL_NAME_MAX} characters")
    if not _NAME_RE.match(value):
        raise invalid_value(path, value, f"a valid label {_NAME_HINT}")
    return value
