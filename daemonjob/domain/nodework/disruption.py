"""The cluster's nodes out of service, and the limit on them that node maintenance obeys.

A cordon takes a node out of service; so do kured, another DaemonJob, a person's `kubectl
cordon` and a node that fails. The limit (--max-unavailable-nodes, a count or a percentage of
all nodes, rounded up as Kubernetes scales a maxUnavailable) counts them all, whoever did it:
no node is cordoned while that many are unschedulable or NotReady. And the last node in
service of the protected set (--protected-node-selector, the control-plane nodes by default)
is never cordoned.

Pure: the gate (gates/disruption.py) reads a `Disruption` in its decision's input, and the
act layer (controller/nodework/disruption.py) applies `admit` again to the cordons it is about to
write, under one lock for the whole process, so two DaemonJobs deciding at the same moment
from the same caches never both take the last unit.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from daemonjob.domain.spec.eligibility import NOT_READY_TAINT_KEYS
from daemonjob.domain.spec.selectors import LabelMatcher, compile_label_selector
from daemonjob.domain.spec.selectortext import parse_selector_text
from daemonjob.domain.spec.validate import scaled

__all__ = ["Disruption", "Admission", "admit", "out_of_service", "is_protected", "protected_matcher", "disruption_of"]

_BLOCKING = ("NoSchedule", "NoExecute")


def out_of_service(node: Mapping[str, Any]) -> bool:
    """Unschedulable, or NotReady: its Ready condition is not True, or the node lifecycle
    controller's not-ready or unreachable taint is on it (a node that never reported yet)."""
    spec = node.get("spec") or {}
    if spec.get("unschedulable"):
        return True
    for taint in spec.get("taints") or ():
        if taint.get("key") in NOT_READY_TAINT_KEYS and taint.get("effect") in _BLOCKING:
            return True
    for cond in (node.get("status") or {}).get("conditions") or ():
        if cond.get("type") == "Ready":
            return cond.get("status") != "True"
    return False


def protected_matcher(text: str) -> LabelMatcher | None:
    """--protected-node-selector compiled (kubectl's `-l` syntax); empty: no protected set.
    Raises InvalidSelector."""
    if not text.strip():
        return None
    return compile_label_selector(parse_selector_text(text), "--protected-node-selector")


def is_protected(matcher: LabelMatcher | None, node: Mapping[str, Any]) -> bool:
    return matcher is not None and matcher((node.get("metadata") or {}).get("labels") or {})


@dataclass(frozen=True, slots=True)
class Disruption:
    """The nodes out of service as the controller sees them: its Node cache, plus the cordons
    it is writing that the cache does not show yet (`reserved`). The default sets no limit."""

    max_unavailable: int | str | None = None  # --max-unavailable-nodes; None: no limit
    nodes: int = 0
    unavailable: int = 0  # out of service as cached, and reserved ones the cache shows in service
    reserved: frozenset[str] = frozenset()
    protected: LabelMatcher | None = field(default=None, compare=False)  # --protected-node-selector
    protected_selector: str = ""
    protected_up: int = 0  # protected nodes in service, reserved ones not counted

    @property
    def limit(self) -> int | None:
        """--max-unavailable-nodes as a number of nodes (a percentage of all nodes, rounded up)."""
        if self.max_unavailable is None:
            return None
        return scaled(self.max_unavailable, self.nodes, round_up=True)

    @property
    def room(self) -> int | None:
        """How many more nodes may be taken out of service now (None: no limit)."""
        limit = self.limit
        return None if limit is None else max(0, limit - self.unavailable)

    def count_text(self) -> str:
        spec = f" (--max-unavailable-nodes={self.max_unavailable})" if isinstance(self.max_unavailable, str) else ""
        return f"{self.unavailable} of {self.nodes} nodes unavailable, limit {self.limit}{spec}"

    def costs(self, name: str, node: Mapping[str, Any] | None) -> bool:
        """Whether cordoning `name` takes one more node out of service (not if it is out already)."""
        return node is not None and name not in self.reserved and not out_of_service(node)


@dataclass(frozen=True, slots=True)
class Admission:
    """The cordons that may go ahead, and those held: over the limit, or the last protected node."""

    admitted: tuple[str, ...] = ()
    over_limit: tuple[str, ...] = ()
    protected: tuple[str, ...] = ()

    @property
    def held(self) -> tuple[str, ...]:
        return self.over_limit + self.protected


def admit(d: Disruption, candidates: Iterable[tuple[str, Mapping[str, Any] | None]]) -> Admission:
    """Which of the candidate cordons (node name, cached Node), in order, keep the cluster within
    the limit and leave a protected node in service. A node already out of service costs nothing."""
    room = d.room
    if room is None:
        return Admission(tuple(name for name, _ in candidates))
    up = d.protected_up
    admitted: list[str] = []
    over: list[str] = []
    protected: list[str] = []
    for name, node in candidates:
        if node is None or not d.costs(name, node):
            admitted.append(name)
            continue
        if room <= 0:
            over.append(name)
            continue
        if is_protected(d.protected, node):
            if up <= 1:
                protected.append(name)
                continue
            up -= 1
        room -= 1
        admitted.append(name)
    return Admission(tuple(admitted), tuple(over), tuple(protected))


def disruption_of(nodes: Iterable[Mapping[str, Any]], max_unavailable: int | str | None, selector: str) -> Disruption:
    """What a whole list of Nodes shows (no cordon reserved): the count the controller keeps
    from its Node events, made at once (`kubectl daemonjob plan`). Raises InvalidSelector."""
    protected = protected_matcher(selector)
    listed = list(nodes)
    down = [out_of_service(n) for n in listed]
    up = sum(1 for n, d in zip(listed, down, strict=True) if not d and is_protected(protected, n))
    return Disruption(max_unavailable, len(listed), sum(down), frozenset(), protected, selector, up)
