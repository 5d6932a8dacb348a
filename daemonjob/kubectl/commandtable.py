"""The `kubectl daemonjob` command table of docs/guides/kubectl.md, made from the parsers' own --help.

Each row is a command's usage line (its own flags; kubectl's global flags are described once
above the table) and its description, so the table cannot drift from what the plugin accepts:
a unit test fails when the page's copy is stale, and `python -m daemonjob.kubectl.commandtable
docs/guides/kubectl.md` writes it again.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

from daemonjob.kubectl.cluster import connection

BEGIN = "<!-- the command table is generated: python -m daemonjob.kubectl.commandtable docs/guides/kubectl.md -->"
END = "<!-- end of the generated command table -->"


def _global_dests() -> set[str]:
    """kubectl's global flags, which every command takes and the guide describes once."""
    probe = argparse.ArgumentParser(add_help=False)
    connection.add_flags(probe, top=False)
    return {a.dest for a in probe._actions}


def commands(parser: argparse.ArgumentParser, prefix: str = "") -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """(`rollout status`, its parser) for every command that runs, in the parser's order."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                nested = list(commands(sub, f"{prefix}{name} "))
                yield from nested or [(f"{prefix}{name}", sub)]


def usage(name: str, parser: argparse.ArgumentParser) -> str:
    """The usage line of the command's own arguments, as argparse writes it, on one line."""
    skip = _global_dests() | {"help"}
    actions = [a for a in parser._actions if a.dest not in skip]
    formatter = argparse.HelpFormatter(prog=name, width=10_000)
    formatter.add_usage(None, actions, parser._mutually_exclusive_groups, prefix="")
    return " ".join(formatter.format_help().split())


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def table(parser: argparse.ArgumentParser) -> str:
    lines = ["| command | |", "|---|---|"]
    for name, sub in commands(parser):
        lines.append(f"| `{_cell(usage(name, sub))}` | {_cell(sub.description or '')} |")
    return "\n".join(lines)


def rewrite(readme: str, parser: argparse.ArgumentParser) -> str:
    """`readme` with the text between BEGIN and END replaced by the table of `parser`."""
    start, end = readme.index(BEGIN) + len(BEGIN), readme.index(END)
    return f"{readme[:start]}\n{table(parser)}\n{readme[end:]}"


def main(argv: Sequence[str] | None = None) -> int:
    from daemonjob.kubectl.cli import build_parser

    args = list(sys.argv[1:] if argv is None else argv)
    if not args:
        print(table(build_parser()))
        return 0
    path = Path(args[0])
    path.write_text(rewrite(path.read_text(encoding="utf-8"), build_parser()), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
