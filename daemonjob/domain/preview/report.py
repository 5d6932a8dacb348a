"""What a plan says (`kubectl daemonjob plan`): each node's line, the gates, the window, and
the document `-o json` prints. Made by preview.py."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["Preview", "NodeLine", "GateLine", "WindowLine", "NODE_NAME"]

NODE_NAME = "nodeName"  # the word for a node the template's nodeName leaves out

# A node's state in the plan
RUNS = "runs"  # it takes a turn in this rollout
DONE = "done"  # its Job of this rollout succeeded
RUNNING = "running"
FAILED_STATE = "failed"
HELD = "held"  # a gate keeps its turn back
IN_MAINTENANCE = "maintenance"  # cordoned for this rollout: draining, or its Job about to start
LEFT_OUT = "left out"  # out of this rollout: its drain timed out (onTimeout Skip), or kept cordoned
DRAIN_TIMED_OUT = "drain timed out"
KEPT_CORDONED = "kept cordoned"
WAITS = "waits"  # eligible, its turn comes once a Job there is gone
KEEPS = "keeps"  # running a Job though no longer eligible: it runs to completion
SKIPPED = "-"  # not eligible


@dataclass(slots=True)
class NodeLine:
    name: str
    state: str
    why: str = ""  # not eligible: NOT_SELECTED, NODE_NAME, TAINTED, CORDONED, NOT_READY; held: the gate
    message: str = ""
    wave: int | None = None  # 1 = the first wave
    canary: bool = False
    evict: list[str] = field(default_factory=list)  # namespace/name of the pods a drain evicts
    blocked: list[str] = field(default_factory=list)  # pods a drain cannot evict, and why
    refused: dict[str, str] = field(default_factory=dict)  # pod -> the PodDisruptionBudget refusing it now


@dataclass(frozen=True, slots=True)
class GateLine:
    gate: str
    reason: str
    message: str
    nodes: tuple[str, ...] = ()  # the nodes it holds back (every one when it holds all)
    until: str | None = None  # when it lets them through by the clock (a window opening)


@dataclass(frozen=True, slots=True)
class WindowLine:
    open: bool
    expression: str  # spec.rollout.window.schedule
    zone: str
    opens_at: str | None = None  # closed: when it next opens
    closes_at: str | None = None  # open: when it closes

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"open": self.open, "schedule": self.expression, "timeZone": self.zone}
        return out | {k: v for k, v in (("opensAt", self.opens_at), ("closesAt", self.closes_at)) if v is not None}


@dataclass(slots=True)
class Preview:
    name: str
    namespace: str
    revision: str
    previous: str | None
    template_hash: str
    reruns: list[str]  # nodes with a Job of an earlier revision or run that run again
    nodes: list[NodeLine]
    order: list[str]
    waves: list[list[str]]
    slots: int | None
    canary: list[str]
    canary_count: int
    promote_before: int | None  # the first wave that waits for a promote (spec.rollout.canary)
    window: WindowLine | None
    gates: list[GateLine]
    conditions: list[dict[str, Any]]
    passes: int  # passes the controller makes before the first wave starts
    starting: list[str]  # the nodes the controller would start now (none while a gate holds every node)

    @property
    def new_revision(self) -> bool:
        return self.previous != self.revision

    @property
    def stalled(self) -> dict[str, Any] | None:
        return next((c for c in self.conditions if c.get("type") == "Stalled" and c.get("status") == "True"), None)

    def as_dict(self) -> dict[str, Any]:
        """The document of `-o json`/`yaml`."""
        return {
            "name": self.name,
            "namespace": self.namespace,
            "revision": {
                "name": self.revision,
                "previous": self.previous,
                "templateHash": self.template_hash,
                "new": self.new_revision,
                "rerunsNodes": self.reruns,
            },
            "eligibleNodes": [n.name for n in self.nodes if n.state != SKIPPED],
            "nodes": [
                {k: v for k, v in _line(n).items() if v not in (None, "", [], {}, False)} | {"state": n.state}
                for n in self.nodes
            ],
            "order": self.order,
            "maxParallel": self.slots,
            "waves": self.waves,
            "startingNow": self.starting,
            "canary": (
                {"count": self.canary_count, "nodes": self.canary, "promoteBeforeWave": self.promote_before}
                if self.canary_count
                else None
            ),
            "window": self.window.as_dict() if self.window is not None else None,
            "gates": [{k: v for k, v in _gate(g).items() if v not in (None, ())} for g in self.gates],
            "conditions": self.conditions,
            "stalled": self.stalled is not None,
        }


def _line(n: NodeLine) -> dict[str, Any]:
    return {
        "name": n.name,
        "why": n.why,
        "message": n.message,
        "wave": n.wave,
        "canary": n.canary,
        "evict": n.evict,
        "evictionBlocked": n.blocked,
        "evictionRefused": n.refused,
    }


def _gate(g: GateLine) -> dict[str, Any]:
    return {"gate": g.gate, "reason": g.reason, "message": g.message, "nodes": list(g.nodes) or (), "until": g.until}
