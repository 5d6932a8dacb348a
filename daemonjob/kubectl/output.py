"""Tables and documents: rich on a terminal, kubectl's plain columns when piped."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TextIO

import orjson
import yaml

if TYPE_CHECKING:
    from rich.text import Text

GAP = "   "
STATE_STYLES = {
    "succeeded": "green",
    "failed": "bold red",
    "active": "cyan",
    "pending": "yellow",
    "terminating": "magenta",
    "ineligible": "dim",
    # plan
    "runs": "cyan",
    "done": "green",
    "running": "cyan",
    "held": "yellow",
    "waits": "yellow",
    "keeps": "magenta",
    "maintenance": "magenta",
    "left out": "dim",
    "-": "dim",
}


def is_terminal(stream: TextIO | None = None) -> bool:
    stream = stream or sys.stdout
    return hasattr(stream, "isatty") and stream.isatty()


def shorten(text: str, width: int) -> str:
    """First line of `text`, cut to `width` characters with an ellipsis."""
    line = text.strip().splitlines()[0] if text.strip() else ""
    if len(line) > width or len(text.strip().splitlines()) > 1:
        return line[: max(width - 3, 0)] + "..."
    return line


def _column_widths(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[int]:
    widths = [len(h) for h in headers]
    for row in rows:
        for i, cell in enumerate(row):
            if len(cell) > widths[i]:
                widths[i] = len(cell)
    return widths


def _padded(row: Sequence[str], widths: Sequence[int]) -> list[str]:
    return [cell.ljust(widths[i]) if i < len(row) - 1 else cell for i, cell in enumerate(row)]


def plain_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """kubectl's columns: each as wide as its widest cell, three spaces apart, no trailing blanks."""
    widths = _column_widths(headers, rows)
    return "\n".join(GAP.join(_padded(row, widths)).rstrip() for row in (headers, *rows))


def styled_table(headers: Sequence[str], rows: Sequence[Sequence[str]], state_column: int | None = None) -> Text:
    """The same columns for a terminal: a bold header and each STATE in its colour.

    Lines are never wrapped or cells folded (a long row runs on, as with kubectl), and the
    layout is computed once rather than measured cell by cell, so 5000 rows print in a blink.
    """
    from rich.text import Text

    widths = _column_widths(headers, rows)
    text = Text(no_wrap=True, overflow="ignore", end="")
    text.append(GAP.join(_padded(headers, widths)).rstrip(), style="bold")
    for row in rows:
        cells = _padded(row, widths)
        text.append("\n")
        if state_column is None or state_column >= len(cells):
            text.append(GAP.join(cells).rstrip())
            continue
        before = GAP.join(cells[:state_column] + [""])
        after = GAP.join([""] + cells[state_column + 1 :]).rstrip()
        text.append(before)
        text.append(cells[state_column], style=STATE_STYLES.get(row[state_column], ""))
        text.append(after)
    return text


def print_table(
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    state_column: int | None = None,
    stream: TextIO | None = None,
    force_terminal: bool = False,
) -> None:
    stream = stream or sys.stdout
    if not (force_terminal or is_terminal(stream)):
        stream.write(plain_table(headers, rows) + "\n")
        return
    from rich.console import Console

    console = Console(file=stream, soft_wrap=True, force_terminal=True, highlight=False)
    console.print(styled_table(headers, rows, state_column))


def dump(obj: Any, fmt: str, stream: TextIO | None = None) -> None:
    stream = stream or sys.stdout
    if fmt == "json":  # orjson: ten times json's speed on a 5000-node document
        stream.write(orjson.dumps(obj, option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE, default=str).decode())
    elif fmt == "yaml":
        stream.write(yaml.safe_dump(obj, sort_keys=False, allow_unicode=True, default_flow_style=False))
    else:
        raise ValueError(f"unknown output format {fmt!r}")


def print_warnings(warnings: Sequence[str]) -> None:
    """As kubectl prints the API server's warnings: on stderr, one `Warning: ...` line each."""
    for warning in warnings:
        print(f"Warning: {warning}", file=sys.stderr)
