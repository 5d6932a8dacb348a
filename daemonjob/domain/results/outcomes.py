"""Results grouped by outcome: which nodes differ, at a glance.

An `Outcomes` counts nodes per distinct outcome (exit code and message, or a JSON field of
the message) and keeps a few names of each; it is fed one result at a time, so the
controller keeps it per rollout without keeping the messages (a digest stands for each
distinct one), and the plugin builds it from a list. `summary` is status.results.
"""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from daemonjob import defaults
from daemonjob.domain.jobs.contract import FAILED
from daemonjob.domain.results.noderesult import outcome_of

__all__ = ["Group", "Outcomes", "summary"]

SHARED_RECORDS = 4096  # distinct (attempt, finish second, outcome) records an Outcomes shares at most


@dataclass(slots=True)
class Group:
    exit_code: int | None
    message: str  # cut to `sample` characters
    digest: bytes = b""  # its key among the groups: exit code and whole message
    count: int = 0
    failed: int = 0
    nodes: list[str] = field(default_factory=list)  # the first `names` of them

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"count": self.count, "message": self.message, "nodes": list(self.nodes)}
        if self.exit_code is not None:
            out["exitCode"] = self.exit_code
        if self.failed:
            out["failed"] = self.failed
        return out


Latest = tuple[int, str, Group, bool]  # a node's latest result: attempt, finishTime, its group, failed


class Outcomes:
    """Node counts per outcome. `names`: node names kept per group (None: all); `sample`:
    characters of the message kept (None: all). Not thread-safe: its owner locks."""

    def __init__(
        self, group_by: str | None = None, names: int | None = defaults.RESULT_GROUP_NODES, sample: int | None = None
    ) -> None:
        self.group_by = group_by
        self.names = names
        self.sample = sample
        self._groups: dict[bytes, Group] = {}
        self._latest: dict[str, Latest] = {}  # node: (attempt, finishTime, group, failed)
        self._shared: dict[tuple[int, str, bytes, bool], Latest] = {}  # one record per distinct value
        self.total = 0
        self.failed = 0

    def add(self, result: Mapping[str, Any]) -> None:
        """A node counts once, by its latest result (a retry's attempt replaces the one before)."""
        node = str(result.get("node") or "")
        attempt, finished = int(result.get("attempt") or 0), str(result.get("finishTime") or "")
        failed = result.get("state") == FAILED
        before = self._latest.get(node)
        if before is not None:
            if (before[0], before[1]) > (attempt, finished):
                return
            self._drop(node, before[2], before[3])
        code, message = outcome_of(result, self.group_by)
        digest = hashlib.blake2b(f"{code}\0{message}".encode(), digest_size=12).digest()
        group = self._groups.get(digest)
        if group is None:
            text = message if self.sample is None else message[: self.sample]
            group = self._groups[digest] = Group(code, text, digest)
        self._latest[node] = self._record(attempt, finished, group, failed)
        group.count += 1
        self.total += 1
        if failed:
            group.failed += 1
            self.failed += 1
        if self.names is None or len(group.nodes) < self.names:
            group.nodes.append(node)

    def _record(self, attempt: int, finished: str, group: Group, failed: bool) -> Latest:
        """One flat tuple, shared by the nodes whose Jobs ended in the same second with the same
        outcome (a rollout of N nodes keeps N records for as long as it is kept; shared, each
        costs its entry, not 72 bytes more). Bounded: past SHARED_RECORDS it starts over."""
        key = (attempt, finished, group.digest, failed)
        record = self._shared.get(key)
        if record is None or record[2] is not group:  # a group emptied and made again is a new one
            if len(self._shared) >= SHARED_RECORDS:
                self._shared.clear()
            record = self._shared[key] = (attempt, sys.intern(finished), group, failed)
        return record

    def _drop(self, node: str, group: Group, failed: bool) -> None:
        group.count -= 1
        self.total -= 1
        if failed:
            group.failed -= 1
            self.failed -= 1
        if node in group.nodes:
            group.nodes.remove(node)
        if group.count == 0:
            del self._groups[group.digest]

    def extend(self, results: Iterable[Mapping[str, Any]]) -> Outcomes:
        for r in results:
            self.add(r)
        return self

    def groups(self) -> list[Group]:
        """Most common first; ties by exit code, then message, so the order is stable."""
        return sorted(
            self._groups.values(),
            key=lambda g: (-g.count, g.exit_code if g.exit_code is not None else -1, g.message),
        )

    def __len__(self) -> int:
        return len(self._groups)


def _odd_ones(groups: list[Group], limit: int = 3) -> str:
    """The nodes outside the most common outcome, a few by name, the rest counted."""
    rest = groups[1:]
    names = [n for g in reversed(rest) for n in g.nodes][:limit]
    others = sum(g.count for g in rest) - len(names)
    return ", ".join(names) + (f" (+{others})" if others > 0 else "")


def summary(outcomes: Outcomes, revision: str, run: str | None, limit: int = defaults.RESULT_GROUPS) -> dict[str, Any]:
    """status.results: the rollout's outcomes, most common first, at most `limit` groups.

    `summary` is one line for a printer column: the count of outcomes and, when there is
    more than one, the odd ones out by name."""
    groups = outcomes.groups()
    shown = groups[:limit]
    out: dict[str, Any] = {"revision": revision, "recorded": outcomes.total, "failed": outcomes.failed}
    if run:
        out["run"] = run
    out["outcomes"] = len(groups)
    out["groups"] = [g.to_dict() for g in shown]
    hidden = groups[limit:]
    if hidden:
        out["otherGroups"] = len(hidden)
        out["otherNodes"] = sum(g.count for g in hidden)
    if not groups:
        out["summary"] = "no results yet"
    elif len(groups) == 1:
        out["summary"] = f"1 outcome on {outcomes.total} nodes"
    else:
        out["summary"] = f"{len(groups)} outcomes; odd ones: {_odd_ones(groups)}"
    return out
