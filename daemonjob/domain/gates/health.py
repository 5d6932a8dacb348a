"""The node's turn after its Job (domain/nodework/nodecheck.py): its reboot and its health check, the
gate that keeps the next node waiting until the last one is back and healthy.

A node whose turn awaits its verdict holds its maxParallel slot (the plan counts it active)
and, with nodeMaintenance, its cordon. Each decision looks at it with `now`: a reboot is
over once the node's boot ID differs from the one recorded on the Job and the node is Ready;
the health check passes once the node is Ready, carries no not-ready or unreachable taint,
and the named DaemonSets' pods on it are Ready, all of them for `settle` (counted from the
latest of their Ready transitions and the turn's end, so a restart counts the same). The
verdict is written on the Job (`MarkJob`); the turn is over once the cache sees it. Not
back within rebootTimeout, or not healthy within the check's timeout: the verdict is Failed,
naming the node and what was wrong, and the failure budget spends it.

Woken by the node's events (its Ready condition and boot ID are cached), by the act layer's
reads of the DaemonSet pods (every HEALTH_POLL_INTERVAL while a node waits for them) and by
the clock at the settle's end and at the timeouts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from daemonjob.domain.gates.hold import Gate, GateContext, duration_text
from daemonjob.domain.jobs.changes import CreateJob
from daemonjob.domain.jobs.turnverdict import FAILED_CHECK, JOB_FAILED, PASSED, Awaiting, Verdict
from daemonjob.domain.nodework.nodecheck import DaemonSetPod, boot_id, node_ready, ready_since, unhealthy_taints
from daemonjob.domain.rollout.gating import Hold
from daemonjob.domain.rollout.reading import Reading
from daemonjob.domain.shared.events import WARNING, EventSpec
from daemonjob.domain.shared.timestamps import format_time
from daemonjob.domain.spec.nodecheckspec import NodeChecks

__all__ = [
    "GATE",
    "GATE_HEALTH",
    "WAITING_FOR_NODE_HEALTH",
    "NODE_UNHEALTHY",
    "NODE_NOT_BACK",
    "JOB_FAILED_BEFORE_REBOOT",
    "JOB_FAILED",
    "MarkJob",
    "Look",
    "look",
    "with_boot_ids",
]

GATE_HEALTH = "healthCheck"
WAITING_FOR_NODE_HEALTH = "WaitingForNodeHealth"
NODE_UNHEALTHY = "NodeUnhealthyAfterJob"
NODE_NOT_BACK = "NodeNotBackAfterReboot"
JOB_FAILED_BEFORE_REBOOT = "JobFailedBeforeReboot"
NODES_NAMED = 3  # nodes named in Reconciling's message


@dataclass(frozen=True, slots=True)
class MarkJob:
    """Write `verdict` on the node's Job (uid-guarded): the end of the node's turn."""

    node: str
    name: str
    uid: str | None
    verdict: Verdict

    @property
    def event(self) -> EventSpec | None:
        if self.verdict.verdict != FAILED_CHECK:
            return None
        return EventSpec(WARNING, self.verdict.reason, self.verdict.message)


@dataclass(frozen=True, slots=True)
class Look:
    """One look at an awaiting node: its verdict now, or what it waits for and until when."""

    verdict: Verdict | None = None
    waiting: str = ""
    wake: datetime | None = None
    read_pods: bool = False  # the check needs its DaemonSet pods read (again)


def look(
    a: Awaiting, node: Mapping[str, Any] | None, checks: NodeChecks, pods: Sequence[DaemonSetPod] | None, now: datetime
) -> Look:
    """The verdict of node `a.node`'s turn at `now`, or what it waits for."""
    name, boot, ready = a.node, boot_id(node), node_ready(node)
    start = a.finished or a.created
    if a.job_failed and not checks.reboot:
        return Look(Verdict(FAILED_CHECK, JOB_FAILED, f"the Job {a.job} on node {name} failed"))
    if checks.reboot:
        if not (boot and a.boot_id and boot != a.boot_id and ready == "True"):
            since = ready_since(node)
            if a.job_failed and boot == a.boot_id and ready == "True" and (since is None or since <= start):
                message = f"the Job {a.job} on node {name} failed before the node rebooted"
                return Look(Verdict(FAILED_CHECK, JOB_FAILED_BEFORE_REBOOT, message))
            deadline = a.created + checks.reboot_timeout
            seen = ("unchanged" if boot == a.boot_id else "new") if a.boot_id else "unknown at the Job's start"
            state = f"Ready {ready}, boot ID {seen}"
            if now >= deadline:
                message = (
                    f"node {name} did not come back from its reboot within "
                    f"{duration_text(checks.reboot_timeout)} of its Job's start ({state})"
                )
                return Look(Verdict(FAILED_CHECK, NODE_NOT_BACK, message))
            return Look(waiting=f"node {name} to reboot and come back Ready ({state})", wake=deadline)
        start = max(start, ready_since(node) or start)
    health = checks.health
    if health is None:
        return Look(Verdict(PASSED))
    wrong = [f"Ready is {ready}"] if ready != "True" else []
    wrong += [f"tainted {key}" for key in unhealthy_taints(node)]
    healthy_since = max(start, ready_since(node) or start)
    if health.daemon_sets:
        if pods is None:
            wrong.append("its DaemonSet pods not read yet")
        for ns, ds in health.daemon_sets if pods is not None else ():
            mine = [p for p in pods or () if p.daemon_set == f"{ns}/{ds}"]
            if not mine:
                wrong.append(f"no pod of DaemonSet {ns}/{ds} on it")
            for p in mine:
                if not p.ready:
                    wrong.append(f"pod {p.pod} of DaemonSet {ns}/{ds} not Ready")
                elif p.since is not None:
                    healthy_since = max(healthy_since, p.since)
    reads = bool(health.daemon_sets)
    if not wrong:
        settled = healthy_since + health.settle
        if now >= settled:
            return Look(Verdict(PASSED))
        waiting = f"node {name} to stay healthy for {duration_text(health.settle)} (until {format_time(settled)})"
        return Look(waiting=waiting, wake=settled, read_pods=reads)
    deadline = start + health.timeout
    if now >= deadline:
        message = f"node {name} not healthy {duration_text(health.timeout)} after its Job: {'; '.join(wrong)}"
        return Look(Verdict(FAILED_CHECK, NODE_UNHEALTHY, message))
    return Look(waiting=f"node {name} to be healthy ({'; '.join(wrong)})", wake=deadline, read_pods=reads)


def hold(at: GateContext) -> Hold:
    """Verdicts for the turns that have one now; the others named, waking at their next moment."""
    reading = at.reading
    checks, awaiting = reading.checked.spec.checks, reading.plan.awaiting
    if not checks.any or not awaiting:
        return Hold(GATE_HEALTH)
    inp = reading.input
    marks: list[MarkJob] = []
    waiting: list[str] = []
    wakes: list[datetime] = []
    reads: list[str] = []
    for a in awaiting:
        known = inp.kept_plan.node(a.node)
        node = known[0] if known is not None else None
        if node is None:
            continue  # the node is gone: its Jobs go with it
        seen = look(a, node, checks, inp.health.pods.get(a.node), inp.now)
        if seen.verdict is not None:
            marks.append(MarkJob(a.node, a.job, a.uid, seen.verdict))
            continue
        waiting.append(seen.waiting)
        if seen.wake is not None:
            wakes.append(seen.wake)
        if seen.read_pods:
            reads.append(a.node)
    if not waiting:
        return Hold(GATE_HEALTH, marks=tuple(marks))
    more = f" and {len(waiting) - NODES_NAMED} more node(s)" if len(waiting) > NODES_NAMED else ""
    return Hold(
        GATE_HEALTH,
        turns=at.turns,
        reason=WAITING_FOR_NODE_HEALTH,
        message=f"waiting for {'; '.join(waiting[:NODES_NAMED])}{more}",
        wake=min(wakes, default=None),
        marks=tuple(marks),
        reads=tuple(reads),
    )


def with_boot_ids(reading: Reading, creates: list[CreateJob]) -> list[CreateJob]:
    """A checked turn's Job records its node's boot ID now: the turn's start."""
    checks = reading.checked.spec.checks
    if not checks.any or not creates:
        return creates
    out = []
    for c in creates:
        known = reading.input.kept_plan.node(c.node)
        out.append(replace(c, boot_id=boot_id(known[0] if known is not None else None), reboot=checks.reboot))
    return out


GATE = Gate(hold, reasons={WAITING_FOR_NODE_HEALTH: GATE_HEALTH})
