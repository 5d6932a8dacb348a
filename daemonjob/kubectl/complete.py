"""`kubectl_complete-daemonjob`: shell completion through kubectl (1.26 and later).

kubectl's own completion (`source <(kubectl completion bash)`, or zsh, fish, powershell)
runs this executable, found on PATH next to the plugin, with the plugin's words so far, the
last one being the word to complete (empty for a new word). It prints one candidate a line,
then `:<directive>` (cobra's ShellCompDirective). Commands, flags and flag choices come from
the plugin's own argument parser, so they cannot drift from it; DaemonJob names, namespaces
and contexts cost at most one list call. Any failure (no cluster) just completes nothing.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

# cobra's ShellCompDirective bits
ERROR = 1
NO_SPACE = 2
NO_FILE = 4
FILTER_DIRS = 16

# whose NAME is an existing DaemonJob
_NAME_COMMANDS = {"status", "wait", "logs", "rerun", "pause", "resume", "run-now", "promote", "release", "plan"}
_DIR_FLAGS = {"--output-dir"}
_FILE_FLAGS = {"--kubeconfig", "--filename", "--certificate-authority", "--client-certificate", "--client-key"}

Lookup = Callable[[str, argparse.Namespace], list[str]]  # (what, connection flags) -> names


def _connection_flags() -> argparse.Namespace:
    """kubectl's global flags that take a value, unset: the words typed so far fill them in."""
    from daemonjob.kubectl.cluster.connection import Connection

    skipped = ("impersonate_groups", "request_timeout")  # no lookup needs them
    return argparse.Namespace(**{f: None for f in vars(Connection()) if f not in skipped})


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _options(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return {opt: a for a in parser._actions for opt in a.option_strings}


def _choices(action: argparse.Action) -> list[str]:
    """A flag's values to offer: its choices, or the words of -o (`jsonpath=` and the like, which take more)."""
    return list(getattr(action, "completions", None) or action.choices or ())


def _takes_value(action: argparse.Action) -> bool:
    return action.nargs != 0 and (action.nargs != "?" or bool(action.choices))  # --dry-run [client]


def complete(words: Sequence[str], lookup: Lookup) -> tuple[list[str], int]:
    """Candidates for the last of `words` (the plugin's arguments), and cobra's directive."""
    from daemonjob.kubectl.cli import build_parser

    *done, current = words or [""]
    parser = build_parser()
    connection = argparse.Namespace(namespace=None, all_namespaces=False, **vars(_connection_flags()))
    command: list[str] = []
    positionals = 0
    expect: argparse.Action | None = None
    after_dashes = False
    for word in done:
        options = _options(parser)
        if expect is not None:
            if expect.dest in vars(connection):
                setattr(connection, expect.dest, word)
            expect = None
        elif after_dashes:
            continue
        elif word == "--":
            after_dashes = True
        elif word.startswith("-") and word != "-":
            flag = word.split("=", 1)[0]
            action = options.get(flag)
            if action is not None and action.dest == "all_namespaces":
                connection.all_namespaces = True
            if action is not None and "=" not in word and _takes_value(action):
                expect = action
        elif word in _subcommands(parser):
            parser = _subcommands(parser)[word]
            command.append(word)
        else:
            positionals += 1
    if after_dashes:
        return [], 0  # the container's command: the shell's default (files)
    if expect is not None:
        return _values(expect, current, lookup, connection)
    if current.startswith("-"):
        flag, eq, _ = current.partition("=")
        action = _options(parser).get(flag)
        if eq and action is not None and _choices(action):
            return [f"{flag}={c}" for c in _choices(action)], NO_FILE
        return sorted(o for o in _options(parser) if o.startswith(current)), NO_FILE
    subcommands = _subcommands(parser)
    if subcommands:
        return [_described(name, _summary(p)) for name, p in subcommands.items() if name.startswith(current)], NO_FILE
    if command and command[-1] in _NAME_COMMANDS and positionals == 0:
        return _names(lookup, "daemonjobs", connection, current), NO_FILE
    return [], NO_FILE


def _summary(parser: argparse.ArgumentParser) -> str:
    """A command's one-line summary: the first paragraph of its description."""
    return (parser.description or "").split("\n\n")[0]


def _described(name: str, description: str | None) -> str:
    """cobra's `candidate<TAB>description`: zsh and fish show the description."""
    return f"{name}\t{description.rstrip('.')}" if description else name


def _names(lookup: Lookup, what: str, connection: argparse.Namespace, prefix: str) -> list[str]:
    try:
        return sorted(n for n in lookup(what, connection) if n.startswith(prefix))
    except Exception:  # no cluster, no credentials: nothing to offer, never a traceback
        return []


def _values(
    action: argparse.Action, current: str, lookup: Lookup, connection: argparse.Namespace
) -> tuple[list[str], int]:
    if _choices(action):
        found = [c for c in _choices(action) if c.startswith(current)]
        more = bool(found) and all(c.endswith("=") for c in found)  # `jsonpath=`: the template follows
        return found, NO_FILE | (NO_SPACE if more else 0)
    flag = max(action.option_strings, key=len)
    if flag in _DIR_FLAGS:
        return [], FILTER_DIRS
    if flag in _FILE_FLAGS:
        return [], 0
    if flag == "--namespace":
        return _names(lookup, "namespaces", connection, current), NO_FILE
    if flag == "--context":
        return _names(lookup, "contexts", connection, current), NO_FILE
    return [], NO_FILE  # a value only the user knows (an image, a schedule...)


def cluster_lookup(what: str, connection: argparse.Namespace) -> list[str]:
    """Names from the kubeconfig (contexts) or one list call (namespaces, DaemonJobs)."""
    from kubernetes import config as k8s_config

    from daemonjob.domain.shared.apinames import API_VERSION
    from daemonjob.kubectl.cluster import client
    from daemonjob.kubectl.cluster.connection import Connection
    from daemonjob.machinery.client.kube import path_for

    if what == "contexts":
        contexts, _ = k8s_config.list_kube_config_contexts(config_file=connection.kubeconfig)
        return [c["name"] for c in contexts]
    target = client.connect(Connection.from_args(connection), connection.namespace, connection.all_namespaces)
    target.kube.timeout = 5.0  # a shell waiting on a tab press
    if what == "namespaces":
        path = path_for("v1", "namespaces")
    else:
        path = path_for(API_VERSION, client.PLURAL, None if target.all_namespaces else target.namespace)
    items = target.kube.get(path, resourceVersion="0")["items"]
    return sorted({i["metadata"]["name"] for i in items})


def main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    candidates, directive = complete(words, cluster_lookup)
    for c in candidates:
        print(c)
    print(f":{directive}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
