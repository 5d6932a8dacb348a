"""A pass over one DaemonJob (`Controller.reconcile`), step by step, as the DaemonSet
controller's syncDaemonSet reads:

1. observe (observe.py): the cached DaemonJob, its referenced ConfigMaps, the cache's view
   of the controller's own writes;
2. adopt (adoption.py): orphans made for it are adopted, known name conflicts read afresh;
   this step writes to the API server, as the DaemonSet controller adopts while it gathers;
3. decide once (domain/decision/decide.py) over one `DecisionInput`: the DaemonJob, its kept plan
   told of every node that changed (keptplans.py), the API's troubles, the clock;
4. act (act.py, and maintenance.py for the Nodes): deletes, creates, history, cordons and
   drains; what the API server answered is kept (troubles.py) and the decision concluded
   again from the same reading with it;
5. report (report.py): the one place Events are posted, the status, the metrics;
6. look again (lookagain.py): the one place that schedules the DaemonJob's next pass.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping
from typing import Any

from daemonjob import defaults
from daemonjob.controller.nodework.disruption import ClusterDisruption
from daemonjob.controller.nodework.maintenance import NodeMaintenance
from daemonjob.controller.nodework.orphans import SWEEP_KEY, OrphanSweep
from daemonjob.controller.nodework.turnchecks import TurnChecks
from daemonjob.controller.order.reader import OrderReader
from daemonjob.controller.passes.act import Act
from daemonjob.controller.passes.adoption import Adoption
from daemonjob.controller.passes.alertpoller import AlertPoller
from daemonjob.controller.passes.deletedjobs import DeletedJobsSeen
from daemonjob.controller.passes.observe import Observation, Observer
from daemonjob.controller.passes.report import Reporter
from daemonjob.controller.passes.selfcheck import PlanSelfCheck
from daemonjob.controller.passes.troubles import Troubles
from daemonjob.controller.results.recorder import ResultRecorder
from daemonjob.controller.results.status import recorded_for, with_results
from daemonjob.controller.runtime.backpressure import CreateBackPressure, with_creates_held
from daemonjob.controller.runtime.errors import ReconcileError
from daemonjob.controller.runtime.informers import ORPHAN_INDEX
from daemonjob.controller.runtime.keptplans import KeptPlans
from daemonjob.controller.runtime.lookagain import next_tick, schedule_next
from daemonjob.controller.runtime.specs import SpecCache
from daemonjob.controller.wiring.routing import Router
from daemonjob.domain.decision.decide import Decision, EventSpec, decide
from daemonjob.domain.gates.disruption import GATE_DISRUPTION
from daemonjob.domain.rollout.inputs import DecisionInput, FiringAlerts
from daemonjob.domain.rollout.plan import JobView
from daemonjob.machinery.cache.informer import SharedInformer
from daemonjob.machinery.cache.memo import ObjectMemo
from daemonjob.machinery.process.clock import Clock
from daemonjob.machinery.queue.workqueue import RateLimitingQueue

__all__ = ["OnePass"]


class OnePass:
    """The pass; the Controller (controller.py) wires the parts it names."""

    clock: Clock
    queue: RateLimitingQueue
    jobs: SharedInformer
    memo: ObjectMemo
    observer: Observer
    adoption: Adoption
    troubles: Troubles
    specs: SpecCache
    plans: KeptPlans
    deleted_jobs: DeletedJobsSeen
    order_reader: OrderReader
    act: Act
    backpressure: CreateBackPressure
    reporter: Reporter
    self_check: PlanSelfCheck
    router: Router
    maintenance: NodeMaintenance
    disruption: ClusterDisruption
    turn_checks: TurnChecks
    orphans: OrphanSweep | None
    results: ResultRecorder | None
    alerts: AlertPoller | None

    def firing_alerts(self) -> FiringAlerts:
        """The alerts as last read from Prometheus; unknown without --prometheus-url."""
        return self.alerts.current() if self.alerts is not None else FiringAlerts()

    def reconcile(self, key: str) -> Decision | None:
        """One pass for one DaemonJob: observe, adopt, decide, act on all of it, report, look
        again; then raise what failed (retried with the key's backoff)."""
        look_again: list[float | None] = []
        events: list[EventSpec] = []  # posted by the report step, or below if the pass ends early
        reported = False
        try:
            if key == SWEEP_KEY:
                look_again.append(self.orphans.sweep() if self.orphans is not None else None)
                return None
            finalized, wake = self.maintenance.finalize(key)
            look_again.append(wake)
            if finalized:
                return None
            observed, wake = self.observer.observe(key)
            look_again.append(wake)
            if observed is None:
                return None
            orphans = self.jobs.store.by_index(ORPHAN_INDEX, observed.key)
            adopted = self.adoption.gather(observed, orphans, self.troubles)
            events.extend(adopted.events)
            budget_seen = self.disruption.version  # before the input: room made after it wakes the key
            ready, recorded = recorded_for(self.results, observed, self.specs, self.reporter)  # says why it waits
            if not ready:
                return None  # the reports' read wakes it
            inp = self._input(observed, adopted.jobs, recorded)
            decision = self._decide(observed.key, inp)
            if decision.gate == GATE_DISRUPTION:
                self.disruption.wait(observed.key, budget_seen)
            if observed.wait is not None:
                self.reporter.report(observed, decision, inp.now, wait=observed.wait)
                return None
            acted = self.act.carry(observed, decision)
            events.extend(acted.events)
            node_acted = self.maintenance.carry(observed, decision)
            if node_acted is not None:
                events.extend(node_acted.events)
                look_again.append(node_acted.look_again)
                acted.errors.extend(node_acted.errors)
            self.maintenance.count(observed, inp, decision, node_acted)
            self.turn_checks.carry(observed, decision).into(events, look_again, acted.errors)
            decision = decision.after_act(self.troubles.of(observed.uid, observed.generation))
            if (
                not decision.creates
                and not decision.deletes
                and not self.queue.urgent_pending()  # nodes wait for their first Jobs: checked at a later pass
                and self.plans.check_due(observed.uid, self.clock.now())
            ):
                decision, repaired = self.self_check.check(observed, decision)
                look_again.append(0.0 if repaired else None)
            decision = with_results(self.results, observed, decision, inp.now)
            if acted.held:  # the rollout says why it does not go faster
                decision = dataclasses.replace(decision, status=with_creates_held(decision.status))
            self.reporter.report(
                observed,
                decision,
                inp.now,
                events,
                created=acted.created > 0 and not acted.errors and len(decision.creates) == acted.created,
            )
            reported = True
            self.router.order_wakes.pass_done(observed.key, decision)
            look_again.append(next_tick(decision, self.clock.wall()))
            if self.troubles.conflicts(observed.uid):  # a foreign Job's removal sends no event here
                look_again.append(defaults.CONFLICT_RECHECK_INTERVAL)
            if acted.errors:
                raise ReconcileError(acted.errors)  # retried with per-key backoff: quotas free up, webhooks come back
            return decision
        finally:
            if events and not reported and observed is not None:
                self.reporter.post(observed, events)
            schedule_next(self.queue, key, look_again)

    def _input(
        self, observed: Observation, adopted: list[Mapping[str, Any]], recorded: Mapping[str, JobView] | None
    ) -> DecisionInput:
        """The one value the decision reads; `now`: one instant for the whole pass."""
        return DecisionInput(
            dj=observed.dj,
            kept_plan=self.plans.kept_plan(observed.uid, adopted, recorded, namespace=observed.namespace),
            now=self.clock.wall(),
            troubles=self.troubles.of(observed.uid, observed.generation),
            configmaps=observed.configmaps,
            checked=self.specs.get(observed.key, observed.cached),
            deleted=self.deleted_jobs.of(observed.uid),
            memo=self.memo,
            alerts=self.firing_alerts(),
            order=self.order_reader.read(observed.key, observed.cached),
            maintenance=self.maintenance.input(observed.uid),
            disruption=self.disruption.snapshot(),
            health=self.turn_checks.input(observed.uid),
            create_room=self.backpressure.room(),
        )

    def _decide(self, key: str, inp: DecisionInput) -> Decision:
        """The pass's one decision, its CPU time kept for the node-join figures."""
        started = time.thread_time()  # CPU, not wall: other threads hold the GIL at times
        decision = decide(inp)
        self.router.decided(key, time.thread_time() - started)
        return decision
