"""Node maintenance's part of a pass, around the decision: what it reads (the nodes carrying
a DaemonJob's record, its drains' progress), what it writes (nodework.py), what it counts,
and the finalizer that releases every node when a DaemonJob goes or stops asking for it.
"""

from __future__ import annotations

from dataclasses import replace

import structlog

from daemonjob import defaults
from daemonjob.controller.metrics.metrics import DRAIN_DRAINED, DRAIN_TIMED_OUT, Metrics
from daemonjob.controller.nodework.disruption import ClusterDisruption
from daemonjob.controller.nodework.heldnodes import job_runs_on
from daemonjob.controller.nodework.keptdrains import KeptDrains
from daemonjob.controller.nodework.nodecontrol import NodeControl
from daemonjob.controller.nodework.options import NodeMaintenanceOptions
from daemonjob.controller.nodework.recordwrites import forget_outcome
from daemonjob.controller.nodework.work import NodeActed, NodeActs, release_node, released_event
from daemonjob.controller.passes.observe import Observation
from daemonjob.controller.passes.report import Reporter
from daemonjob.controller.runtime.errors import ReconcileError
from daemonjob.controller.runtime.informers import MAINTENANCE_INDEX, OUTCOME_INDEX
from daemonjob.controller.runtime.specs import SpecCache
from daemonjob.domain.decision.decide import Decision
from daemonjob.domain.nodework.maintenance import FINALIZER, MaintenanceInput, has_finalizer, releases_on_delete
from daemonjob.domain.rollout.inputs import DecisionInput
from daemonjob.domain.shared.noderecord import DrainOutcome, NodeRecord, outcomes_of, record_of
from daemonjob.domain.shared.timestamps import parse_time
from daemonjob.machinery.cache.informer import SharedInformer
from daemonjob.machinery.client.kube import ApiError
from daemonjob.machinery.process.clock import Clock
from daemonjob.machinery.process.podidentity import own_pod

__all__ = ["NodeMaintenance"]

log = structlog.get_logger("daemonjob.controller")


class NodeMaintenance:
    def __init__(
        self,
        daemonjobs: SharedInformer,
        nodes: SharedInformer,
        jobs: SharedInformer,
        node_control: NodeControl | None,
        options: NodeMaintenanceOptions,
        *,
        reporter: Reporter,
        metrics: Metrics,
        clock: Clock,
        specs: SpecCache | None = None,
        disruption: ClusterDisruption | None = None,
    ) -> None:
        """`node_control`: what it writes through (Nodes, evictions, the finalizer; None: no
        Node writes); `options`: where a DaemonJob may use it (elsewhere it is Stalled), what
        stops cordons; `disruption`: the cluster's disruption budget every cordon takes its unit from."""
        self.daemonjobs, self.nodes, self.jobs = daemonjobs, nodes, jobs
        self.specs = specs if specs is not None else SpecCache()  # the DaemonJobs' specs as read
        self.node_control = node_control
        self.namespaces = frozenset(options.namespaces)
        self.reporter = reporter
        self.metrics = metrics
        self.disruption = disruption
        self.drains = KeptDrains()
        self._read: dict[str, dict[str, NodeRecord]] = {}  # deleted DaemonJobs' records as last listed
        self.node_acts = (
            NodeActs(node_control, self.drains, clock, own_pod(), options.cordons_stopped)
            if node_control is not None
            else None
        )

    def forget(self, uid: str) -> None:
        self.drains.forget(uid)
        self._read.pop(uid, None)

    def input(self, uid: str) -> MaintenanceInput:
        """What the decision reads of this DaemonJob's node maintenance."""
        outcomes = self.drains.outcomes(uid, self.outcomes(uid))
        return MaintenanceInput(self.records(uid), self.drains.of(uid), self.namespaces, outcomes)

    def records(self, uid: str) -> dict[str, NodeRecord]:
        """The nodes carrying this DaemonJob's maintenance record, as cached."""
        out = {}
        for node in self.nodes.store.by_index(MAINTENANCE_INDEX, uid):
            record = record_of(node)
            if record is not None:
                out[node["metadata"]["name"]] = record
        return out

    def outcomes(self, uid: str) -> dict[str, DrainOutcome]:
        """The nodes carrying this DaemonJob's drain outcome, as cached."""
        out = {}
        for node in self.nodes.store.by_index(OUTCOME_INDEX, uid):
            for outcome in outcomes_of(node):
                if outcome.uid == uid:
                    out[node["metadata"]["name"]] = outcome
        return out

    def carry(self, observed: Observation, decision: Decision) -> NodeActed | None:
        work = decision.node_work
        if work is None or not work.writes:
            return None
        if self.node_acts is None:
            observed.log.warning("node maintenance asked for, but this controller writes no Nodes")
            return None
        maintenance = decision.reading.checked.maintenance if decision.reading is not None else None
        drain = maintenance.drain if maintenance is not None else None
        if self.disruption is None or not work.cordons:
            return self.node_acts.carry(observed, work, drain)
        taken, admission = self.disruption.take(observed.key, work.cordons)
        acted: NodeActed | None = None
        try:
            acted = self.node_acts.carry(observed, replace(work, cordons=taken), drain)
        finally:
            in_place = [*acted.cordoned, *acted.found_cordoned] if acted is not None else []
            self.disruption.settle(taken, in_place, key=observed.key)
        if admission.held:
            acted.soon(defaults.DISRUPTION_RECHECK)  # the next pass names the gate, and waits for a node
        return acted

    def count(self, observed: Observation, inp: DecisionInput, decision: Decision, acted: NodeActed | None) -> None:
        """Nodes held cordoned (as this pass found them), drains ended, evictions refused."""
        if decision.node_work is None:
            return
        ns, name, uid = observed.namespace, observed.name, observed.uid
        records = inp.maintenance.records
        held = [t for r in records.values() if r.cordoned and (t := parse_time(r.since)) is not None]
        self.metrics.maintenance_observed(
            ns, name, uid, sum(1 for r in records.values() if r.cordoned), min(held).timestamp() if held else None
        )
        timeouts = decision.reading.drain_timeouts if decision.reading is not None else None
        for node in timeouts.new if timeouts is not None else ():
            since = parse_time(records[node].since) if node in records else None
            if since is not None:
                self.metrics.drain_finished(ns, name, uid, DRAIN_TIMED_OUT, (inp.now - since).total_seconds())
        if acted is None:
            return
        for _, seconds in acted.drained:
            if seconds is not None:
                self.metrics.drain_finished(ns, name, uid, DRAIN_DRAINED, seconds)
        if acted.refused_evictions:
            self.metrics.eviction_refused(ns, name, uid, acted.refused_evictions)

    def finalize(self, key: str) -> tuple[bool, float | None]:
        """A DaemonJob with node maintenance's finalizer that is being deleted, or that no longer
        asks for maintenance: every node carrying its record is released, then the finalizer
        goes. Returns (True when the pass is this and nothing else, when to look again).

        The records are read from the API server before the finalizer goes (a cordon whose
        watch event has not arrived is not in the cache). A node where a Job of this DaemonJob
        still runs (the Jobs orphaned by `--cascade=orphan`, or left running by a background
        delete) is kept until that Job ends, and the finalizer with it."""
        cached = self.daemonjobs.store.get(key)
        if cached is None or not has_finalizer(cached):
            return False, None
        meta = cached["metadata"]
        deleting = bool(meta.get("deletionTimestamp"))
        uid = meta.get("uid") or ""
        if not deleting and (self.specs.get(key, cached).spec.asks_maintenance or self.records(uid)):
            return False, None  # the decision releases what it holds, as the spec says
        if self.node_control is None:
            return False, None
        records = self._read_records(uid, keep=deleting)
        if not deleting and records:
            return False, defaults.FINALIZER_RECHECK_INTERVAL  # the cache catches up, the decision releases them
        namespace, name = meta.get("namespace") or "", meta.get("name") or ""
        running = {n for n in records if job_runs_on(self.jobs, n, namespace, name)}
        rlog = log.bind(namespace=namespace, name=name)
        errors: list[Exception] = []
        for release in releases_on_delete({n: r for n, r in records.items() if n not in running}):
            try:
                done = release_node(self.node_control, release.node, release.record)
            except ApiError as exc:
                errors.append(exc)
                continue
            self._read.get(uid, {}).pop(release.node, None)
            if done is not None:
                rlog.info("node released", node=release.node, uncordoned=done, why=release.why)
                self.reporter.post_about(cached, [released_event(release, done)])
        for node, outcome in sorted(self.outcomes(uid).items()):
            try:
                forget_outcome(self.node_control, node, outcome)
            except ApiError as exc:
                errors.append(exc)
        if errors:
            raise ReconcileError(errors)
        if running:
            rlog.info("nodes kept until their Job ends", nodes=sorted(running))
            return True, defaults.FINALIZER_RECHECK_INTERVAL
        finalizers = [f for f in meta.get("finalizers") or () if f != FINALIZER]
        self.node_control.set_finalizers(namespace, name, finalizers, meta.get("resourceVersion") or "")
        rlog.info("node maintenance finalizer removed", released=len(records))
        return deleting, None

    def _read_records(self, uid: str, keep: bool) -> dict[str, NodeRecord]:
        """This DaemonJob's records as the API server has them: a quorum list of the Nodes,
        once per deleted DaemonJob (`keep`: remembered, with what the cache shows since,
        until it is forgotten), fresh each time otherwise."""
        if uid not in self._read or not keep:
            assert self.node_control is not None
            listed = {}
            for node in self.node_control.list_nodes():
                record = record_of(node)
                if record is not None and record.uid == uid:
                    listed[(node.get("metadata") or {}).get("name") or ""] = record
            if not keep:
                return {**listed, **self.records(uid)}
            self._read[uid] = listed
        return {**self._read[uid], **self.records(uid)}
