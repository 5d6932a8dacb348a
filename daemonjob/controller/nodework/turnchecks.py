"""The health check's and the reboot's part of a pass (domain/gates/health.py): the verdicts
written on the Jobs, and the named DaemonSets' pods read on the nodes being checked.

No pod watch: a cluster-wide one would cost memory and events in proportion to every pod of
the cluster for the few nodes checked at a time. Each checked node's pods are listed instead
(from the API server's watch cache, by its spec.nodeName index), kept for the next decision
and read again every HEALTH_POLL_INTERVAL while the node waits for them: a list per held
node, maxParallel lists per interval at most.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from daemonjob import defaults
from daemonjob.controller.nodework.nodecontrol import NodeControl
from daemonjob.controller.passes.observe import Observation
from daemonjob.controller.runtime.events import error_message
from daemonjob.controller.runtime.jobcontrol import JobControl
from daemonjob.controller.runtime.turnseal import TurnSeal
from daemonjob.domain.decision.decide import Decision
from daemonjob.domain.jobs.owners import controller_ref
from daemonjob.domain.nodework.nodecheck import DaemonSetPod, HealthInput
from daemonjob.domain.shared.events import EventSpec
from daemonjob.domain.shared.timestamps import parse_time
from daemonjob.machinery.client.kube import ApiError

__all__ = ["TurnChecks", "ChecksActed", "daemon_set_pods"]


@dataclass(slots=True)
class ChecksActed:
    events: list[EventSpec] = field(default_factory=list)
    errors: list[Exception] = field(default_factory=list)
    look_again: float | None = None

    def into(self, events: list[EventSpec], look_again: list[float | None], errors: list[Exception]) -> None:
        """Added to what the pass says, when it looks again and what failed."""
        events.extend(self.events)
        look_again.append(self.look_again)
        errors.extend(self.errors)


def daemon_set_pods(
    pods: list[Mapping[str, Any]], daemon_sets: tuple[tuple[str, str], ...]
) -> tuple[DaemonSetPod, ...]:
    """The pods of the named DaemonSets among a node's pods (controller reference, namespace)."""
    wanted = {f"{ns}/{name}" for ns, name in daemon_sets}
    out = []
    for pod in pods:
        meta = pod.get("metadata") or {}
        ref = controller_ref(pod)
        if ref is None or ref.get("kind") != "DaemonSet" or meta.get("deletionTimestamp"):
            continue
        owner = f"{meta.get('namespace')}/{ref.get('name')}"
        if owner not in wanted:
            continue
        ready = next((c for c in (pod.get("status") or {}).get("conditions") or () if c.get("type") == "Ready"), None)
        out.append(
            DaemonSetPod(
                owner,
                f"{meta.get('namespace')}/{meta.get('name')}",
                ready is not None and ready.get("status") == "True",
                parse_time(ready.get("lastTransitionTime")) if ready is not None else None,
            )
        )
    return tuple(sorted(out, key=lambda p: p.pod))


class TurnChecks:
    """`nodes`: what the pods are read through (None: never read, a check waits for them);
    `seal`: what a verdict is sealed with (turnseal.py), the Job cache's."""

    def __init__(self, control: JobControl, nodes: NodeControl | None, seal: TurnSeal | None = None) -> None:
        self.control = control
        self.seal = seal or TurnSeal.random()
        self.nodes = nodes
        self._pods: dict[str, dict[str, tuple[DaemonSetPod, ...]]] = {}  # DaemonJob uid -> node -> pods
        self._lock = threading.Lock()

    def input(self, uid: str) -> HealthInput:
        with self._lock:
            return HealthInput(dict(self._pods.get(uid) or {}))

    def forget(self, uid: str) -> None:
        with self._lock:
            self._pods.pop(uid, None)

    def carry(self, observed: Observation, decision: Decision) -> ChecksActed:
        acted = ChecksActed()
        for mark in decision.marks:
            try:
                sealed = self.seal.verdict_annotations(mark.uid or "", mark.node, mark.verdict.text())
                self.control.relabel_job(observed.namespace, mark.name, mark.uid or "", {}, sealed)
            except ApiError as exc:
                if not (exc.not_found or exc.conflict):
                    acted.errors.append(exc)
                    observed.log.warning("writing a node's verdict failed", node=mark.node, error=error_message(exc))
                continue
            observed.log.info(
                "node turn over", node=mark.node, verdict=mark.verdict.verdict, reason=mark.verdict.reason or None
            )
            if mark.event is not None:
                acted.events.append(mark.event)
        checks = decision.reading.checked.spec.checks if decision.reading is not None else None
        health = checks.health if checks is not None else None
        with self._lock:
            kept = self._pods.setdefault(observed.uid, {})
            for node in [n for n in kept if n not in decision.health_reads]:
                del kept[node]  # no longer checked
        if not decision.health_reads or health is None or self.nodes is None:
            return acted
        first = False
        for node in decision.health_reads:
            try:
                pods = daemon_set_pods(self.nodes.pods_on_node(node), health.daemon_sets)
            except ApiError as exc:
                acted.errors.append(exc)
                continue
            with self._lock:
                first = first or node not in self._pods.setdefault(observed.uid, {})
                self._pods[observed.uid][node] = pods
        acted.look_again = 0.0 if first else defaults.HEALTH_POLL_INTERVAL
        return acted
