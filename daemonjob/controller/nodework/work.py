"""The act layer of node maintenance: finalizer, releases, keeps, cordons, drains, in that order.

Every Node write is decided on the Node as the API server has it now (a fresh read), and
sent with that read's resourceVersion, so a cordon never lands on a node someone cordoned a
moment ago without our record saying so, and a release never uncordons a node whose record
is no longer ours. A drain is one look per pass: evict what may be evicted, report what is
left (and why) for the next decision, look again shortly; pods are gone when the API server
says so, which the kubelet confirms. What is evicted, and what is left alone, follows
`kubectl drain`: DaemonSet pods, mirror pods, finished pods and this DaemonJob's own pods
stay; pods with emptyDir data and pods no controller would re-create wait for their opt-in.
So does this controller's own pod: evicting it would stop the drain it is doing, and with
one replica its PodDisruptionBudget would refuse the eviction until the drain times out.

As kubectl drain, a drain is for the pods on the node at its first look (their uids kept in
`KeptDrains`): a pod that arrives later, such as a replacement that tolerates the cordon, is not
evicted in a loop nor waited for. A drain resumed after a restart has no such memory; its
first look leaves out the pods created after the cordon (the record's `since`).

A release after a drain timed out writes the outcome (`DrainOutcome`) in the same patch, and a
later cordon by the same DaemonJob removes it in its own: the outcome costs no write of its own.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from daemonjob import defaults
from daemonjob.controller.nodework.keptdrains import KeptDrains
from daemonjob.controller.nodework.nodecontrol import NodeControl
from daemonjob.controller.nodework.recordwrites import keep_node
from daemonjob.controller.passes.observe import Observation
from daemonjob.controller.runtime.events import error_message, names_shown
from daemonjob.domain.nodework.drainpods import pods_to_evict
from daemonjob.domain.nodework.maintenance import FINALIZER, Cordon, DrainNode, DrainProgress, Keep, NodeWork, Release
from daemonjob.domain.shared.events import NORMAL, WARNING, EventSpec
from daemonjob.domain.shared.noderecord import (
    ANNOTATION_MAINTENANCE,
    DrainOutcome,
    NodeRecord,
    outcome_annotation,
    record_of,
)
from daemonjob.domain.shared.timestamps import parse_time
from daemonjob.domain.spec.maintenancespec import DrainOptions
from daemonjob.machinery.client.conflicts import retry_on_conflict
from daemonjob.machinery.client.kube import ApiError
from daemonjob.machinery.process.clock import Clock

__all__ = ["NodeActs", "NodeActed", "release_node", "released_event"]

WAITING_SHOWN = 5  # pods named per draining node


@dataclass(slots=True)
class NodeActed:
    events: list[EventSpec] = field(default_factory=list)
    errors: list[Exception] = field(default_factory=list)
    look_again: float | None = None
    cordoned: list[str] = field(default_factory=list)
    # cordons an earlier pass of this DaemonJob wrote, found in place (its cache had not caught
    # up): nothing written, but the cluster disruption budget's unit stays taken
    found_cordoned: list[str] = field(default_factory=list)
    released: list[str] = field(default_factory=list)
    drained: list[tuple[str, float | None]] = field(default_factory=list)  # (node, seconds since the cordon)
    refused_evictions: int = 0

    def soon(self, seconds: float) -> None:
        self.look_again = seconds if self.look_again is None else min(self.look_again, seconds)


def _refusal(exc: ApiError) -> str:
    """What a 429 says: the PodDisruptionBudget that refuses, as the API server names it."""
    causes = ((exc.body or {}).get("details") or {}).get("causes") or ()
    named = [c.get("message") for c in causes if c.get("reason") == "DisruptionBudget" and c.get("message")]
    return "; ".join(named) if named else error_message(exc)


def _created_after(pod: Mapping[str, Any], moment: datetime | None) -> bool:
    created = parse_time((pod.get("metadata") or {}).get("creationTimestamp"))
    return moment is not None and created is not None and created > moment


class NodeActs:
    """`own_pod`: this controller's pod (namespace, name), never evicted; None outside a cluster."""

    def __init__(
        self,
        control: NodeControl,
        drains: KeptDrains,
        clock: Clock,
        own_pod: tuple[str, str] | None = None,
        cordons_stopped: Callable[[], str | None] = lambda: None,
    ) -> None:
        """`cordons_stopped`: why no cordon may start now, read before each pass's cordons
        (cordonstop.py: node maintenance being taken out of the cluster)."""
        self.control = control
        self.drains = drains
        self.clock = clock
        self.own_pod = own_pod
        self.cordons_stopped = cordons_stopped

    def carry(self, observed: Observation, work: NodeWork, drain: DrainOptions | None) -> NodeActed:
        acted = NodeActed()
        if not work.writes:
            return acted
        # a stop (node maintenance being removed) holds back the finalizer as the cordons: the
        # release just took it off, and the powers to take it off again are about to go
        stopped = self._stopped(observed, acted) if work.cordons or work.add_finalizer else None
        finalized = stopped is None and (not work.add_finalizer or self._add_finalizer(observed, acted))
        for release in work.releases:
            self._release(observed, release, acted)
        for keep in work.keeps:
            self._keep(observed, keep, acted)
        cordoned: list[DrainNode] = []  # first looked at in this pass, right after their cordon
        if finalized:
            for cordon in work.cordons:
                record = self._cordon(observed, cordon, acted)
                if record is not None and drain is not None:
                    cordoned.append(DrainNode(cordon.node, record))
        if drain is not None:
            for item in work.drains:
                self._drain(observed, item, drain, acted)
            for item in cordoned:
                self._drain(observed, item, drain, acted, just_cordoned=True)
        if acted.cordoned:
            record = work.cordons[0].record
            what = f"run {record.run}" if record.run is not None else f"revision {record.revision}"
            acted.events.append(
                EventSpec(
                    NORMAL,
                    "Cordoned",
                    f"Cordoned {len(acted.cordoned)} node(s) for {what}: {names_shown(acted.cordoned)}",
                )
            )
        return acted

    def _stopped(self, observed: Observation, acted: NodeActed) -> str | None:
        try:
            why = self.cordons_stopped()
        except ApiError as exc:
            why = f"cannot tell whether cordons are stopped: {error_message(exc)}"
        if why is not None:
            observed.log.info("no cordon", why=why)
            acted.soon(defaults.CORDON_STOP_RECHECK_INTERVAL)
        return why

    # -- the finalizer -------------------------------------------------------------------------------
    def _add_finalizer(self, observed: Observation, acted: NodeActed) -> bool:
        """Before the first cordon: what this DaemonJob cordons is released before it is deleted."""
        meta = observed.cached["metadata"]
        finalizers = [*(meta.get("finalizers") or ()), FINALIZER]
        try:
            self.control.set_finalizers(
                observed.namespace, observed.name, finalizers, meta.get("resourceVersion") or ""
            )
        except ApiError as exc:
            acted.errors.append(exc)
            return False
        return True

    # -- releases ------------------------------------------------------------------------------------
    def _release(self, observed: Observation, release: Release, acted: NodeActed) -> None:
        try:
            done = release_node(self.control, release.node, release.record, release.outcome)
        except ApiError as exc:
            acted.errors.append(exc)
            observed.log.warning("releasing node failed", node=release.node, error=error_message(exc))
            return
        self.drains.forget_node(observed.uid, release.node)
        if done is None:
            return
        if release.outcome is not None:
            self.drains.wrote_outcome(release.node, release.outcome)
        acted.released.append(release.node)
        observed.log.info("node released", node=release.node, uncordoned=done, why=release.why)
        acted.events.append(released_event(release, done))

    def _keep(self, observed: Observation, keep: Keep, acted: NodeActed) -> None:
        try:
            marked = keep_node(self.control, keep.node, keep.record)
        except ApiError as exc:
            acted.errors.append(exc)
            observed.log.warning("keeping node cordoned failed", node=keep.node, error=error_message(exc))
            return
        if marked:
            observed.log.info("node kept cordoned until released", node=keep.node)

    # -- cordons -------------------------------------------------------------------------------------
    def _cordon(self, observed: Observation, cordon: Cordon, acted: NodeActed) -> NodeRecord | None:
        """Write the record and cordon in one patch; the record written, or None if the node is not ours to take."""

        def attempt() -> NodeRecord | None:  # only a conflict leaves it: decided again on a fresh read
            try:
                node = self.control.get_node(cordon.node)
            except ApiError as exc:
                if not exc.not_found:
                    acted.errors.append(exc)
                return None
            held = record_of(node)
            if held is not None:
                if held.uid == cordon.record.uid and held.of_rollout(cordon.record.revision, cordon.record.run):
                    acted.found_cordoned.append(cordon.node)
                    return held  # written by an earlier pass whose cache had not caught up
                observed.log.info("node held by another record, not cordoned", node=cordon.node, by=held.daemon_job)
                return None
            schedulable = not (node.get("spec") or {}).get("unschedulable")
            record = NodeRecord(
                cordon.record.daemon_job,
                cordon.record.uid,
                cordon.record.revision,
                cordon.record.run,
                schedulable,
                cordon.record.since,
            )
            annotations: dict[str, Any] = {ANNOTATION_MAINTENANCE: record.text()}
            stale = outcome_annotation(record.uid)  # an earlier rollout's drain outcome goes with the new cordon
            if stale in ((node.get("metadata") or {}).get("annotations") or {}):
                annotations[stale] = None
            patch: dict[str, Any] = {"metadata": {"annotations": annotations}}
            if schedulable:
                patch["spec"] = {"unschedulable": True}
            try:
                self.control.patch_node(cordon.node, patch, (node.get("metadata") or {}).get("resourceVersion") or "")
            except ApiError as exc:
                if exc.conflict:
                    raise
                acted.errors.append(exc)
                return None
            observed.log.info("node cordoned", node=cordon.node, cordoned=schedulable)
            acted.cordoned.append(cordon.node)
            return record

        try:
            return retry_on_conflict(attempt)
        except ApiError:  # the node kept changing: looked at again in the next pass, at once
            acted.soon(0.0)
            return None

    # -- drains --------------------------------------------------------------------------------------
    def _drain_pods(self, observed: Observation, item: DrainNode, just_cordoned: bool) -> list[Mapping[str, Any]]:
        """The node's pods this drain is for: those of its first look, by uid (see the module's doc)."""
        pods = self.control.pods_on_node(item.node)
        cordon = (item.record.revision, item.record.run, item.record.since)  # a later cordon is a new drain
        known = self.drains.pods_of(observed.uid, item.node, cordon)
        if known is None:
            if not just_cordoned:  # resumed without memory: what came after the cordon is not ours
                since = parse_time(item.record.since)
                pods = [p for p in pods if not _created_after(p, since)]
            self.drains.keep_pods(
                observed.uid, item.node, cordon, frozenset((p.get("metadata") or {}).get("uid") or "" for p in pods)
            )
            return pods
        return [p for p in pods if ((p.get("metadata") or {}).get("uid") or "") in known]

    def _drain(
        self, observed: Observation, item: DrainNode, drain: DrainOptions, acted: NodeActed, just_cordoned: bool = False
    ) -> None:
        try:
            pods = self._drain_pods(observed, item, just_cordoned)
        except ApiError as exc:
            acted.errors.append(exc)
            acted.soon(defaults.DRAIN_POLL_INTERVAL)
            return
        verdicts = pods_to_evict(pods, drain, observed.namespace, observed.name, self.own_pod)
        blocked = list(verdicts.blocked)
        for pod in verdicts.evict:
            meta = pod.get("metadata") or {}
            try:
                self.control.evict(
                    meta.get("namespace") or "", meta.get("name") or "", meta.get("uid"), drain.grace_period_seconds
                )
            except ApiError as exc:
                if exc.not_found or exc.conflict:
                    continue  # gone already, or replaced by a namesake: not ours to wait for
                if exc.status == 429:
                    acted.refused_evictions += 1
                    blocked.append(
                        f"eviction of pod {meta.get('namespace')}/{meta.get('name')} refused: {_refusal(exc)}"
                    )
                else:
                    blocked.append(
                        f"eviction of pod {meta.get('namespace')}/{meta.get('name')} failed: {error_message(exc)}"
                    )
        progress = DrainProgress(
            drained=not verdicts.waiting,
            waiting=tuple(verdicts.waiting[:WAITING_SHOWN]),
            blocked="; ".join(blocked[:3]) or None,
        )
        if self.drains.note(observed.uid, item.node, progress) and progress.blocked:
            acted.events.append(
                EventSpec(
                    WARNING,
                    "EvictionRefused" if acted.refused_evictions else "DrainBlocked",
                    f"drain of node {item.node}: {progress.blocked}",
                )
            )
        if progress.drained:
            since = parse_time(item.record.since)
            seconds = (self.clock.wall() - since).total_seconds() if since is not None else None
            acted.drained.append((item.node, seconds))
            acted.events.append(EventSpec(NORMAL, "Drained", f"Drained node {item.node}"))
            acted.soon(0.0)  # its Job is created by the next decision
        else:
            acted.soon(defaults.DRAIN_POLL_INTERVAL)


def released_event(release: Release, uncordoned: bool) -> EventSpec:
    """What a release says, from a pass or from the finalizer: Uncordoned, or Released when
    the node was cordoned by someone else before (only the record went)."""
    what = "Uncordoned" if uncordoned else "Released"
    return EventSpec(NORMAL, what, f"{what} node {release.node}: {release.why}")


def release_node(
    control: NodeControl, name: str, record: NodeRecord, outcome: DrainOutcome | None = None
) -> bool | None:
    """Remove `record` from node `name` and uncordon it if the record says we cordoned it,
    writing `outcome` with it: True when uncordoned, False when only the record went, None
    when the node no longer carries that record (someone else's now, or gone): nothing written."""

    def attempt() -> bool | None:  # a conflict (the Node changed since read) is decided again on a fresh read
        try:
            node = control.get_node(name)
        except ApiError as exc:
            if exc.not_found:
                return None
            raise
        held = record_of(node)
        if held is None or held.uid != record.uid or held.revision != record.revision or held.run != record.run:
            return None
        uncordon = held.cordoned and bool((node.get("spec") or {}).get("unschedulable"))
        annotations: dict[str, Any] = {ANNOTATION_MAINTENANCE: None}
        if outcome is not None:
            annotations[outcome.annotation] = outcome.text()
        patch: dict[str, Any] = {"metadata": {"annotations": annotations}}
        if uncordon:
            patch["spec"] = {"unschedulable": None}
        control.patch_node(name, patch, (node.get("metadata") or {}).get("resourceVersion") or "")
        return uncordon

    return retry_on_conflict(attempt, gave_up=f"node {name} kept changing; its release is retried")
