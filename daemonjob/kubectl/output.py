"""Tables and documents: rich on a terminal, kubectl's plain columns when piped."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import Any, TextIO

import yaml

STATE_STYLES = {"succeeded": "green", "failed": "bold red", "active": "cyan", "pending": "yellow",
                "terminating": "magenta", "ineligible": "dim"}


def is_terminal(stream: TextIO | None = None) -> bool:
    stream = stream or sys.stdout
    return hasattr(stream, "isatty") and stream.isatty()


def shorten(text: str, width: int) -> str:
    """First line of `text`, cut to `width` characters with an ellipsis."""
    line = text.strip().splitlines()[0] if text.strip() else ""
    if len(line) > width or len(text.strip().splitlines()) > 1:
        return line[: max(width - 3, 0)] + "..."
    return line


def plain_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """kubectl's columns: each as wide as its widest cell, three spaces apart, no trailing blanks."""
    widths = [len(h) for h in headers]
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))
    lines = []
    for row in (headers, *rows):
        cells = [cell.ljust(widths[i]) if i < len(row) - 1 else cell for i, cell in enumerate(row)]
        lines.append("   ".join(cells).rstrip())
    return "\n".join(lines)


def print_table(headers: Sequence[str], rows: Sequence[Sequence[str]], state_column: int | None = None,
                stream: TextIO | None = None) -> None:
    stream = stream or sys.stdout
    if not is_terminal(stream):
        stream.write(plain_table(headers, rows) + "\n")
        return
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    table = Table(box=None, show_edge=False, pad_edge=False, header_style="bold", padding=(0, 3, 0, 0))
    for h in headers:
        table.add_column(h, overflow="fold")
    for row in rows:
        cells = [Text(c, style=STATE_STYLES.get(c, "")) if i == state_column else Text(c) for i, c in enumerate(row)]
        table.add_row(*cells)
    Console(file=stream, soft_wrap=False).print(table)


def dump(obj: Any, fmt: str, stream: TextIO | None = None) -> None:
    stream = stream or sys.stdout
    if fmt == "json":
        stream.write(json.dumps(obj, indent=4, ensure_ascii=False, default=str) + "\n")
    elif fmt == "yaml":
        stream.write(yaml.safe_dump(obj, sort_keys=False, allow_unicode=True, default_flow_style=False))
    else:
        raise ValueError(f"unknown output format {fmt!r}")
