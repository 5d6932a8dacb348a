"""The observe step of a pass: everything a decision reads, gathered before deciding.

The DaemonJob from its cache, the ConfigMaps it references, whether the cache shows the
controller's own last writes (expectations, checked against the API server once overdue),
orphans to adopt, Job names another owner still holds, and the DaemonJob's kept plan told
of every node that changed since the last pass. Returns None when there is nothing to
decide now (gone, being deleted, a watch not listed yet, waiting for the cache); whatever
ends such a wait enqueues the DaemonJob again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import structlog

from daemonjob import defaults
from daemonjob.controller.act import Act, Conflict
from daemonjob.controller.configmaps import ConfigMapTracker
from daemonjob.controller.expectations import Expectations, Waiting
from daemonjob.controller.informers import ORPHAN_INDEX, OWNER_INDEX, Informers
from daemonjob.controller.jobcontrol import JobControl
from daemonjob.controller.metrics import Metrics
from daemonjob.controller.keptplans import KeptPlans
from daemonjob.controller.troubles import Troubles
from daemonjob.domain.configrefs import pod_template_of, referenced_configmaps, rerun_on_config_change
from daemonjob.domain.decide import CreateJob
from daemonjob.domain.jobs import owner_reference
from daemonjob.domain.memo import Memo
from daemonjob.domain.keptplan import KeptPlan
from daemonjob.machinery.clock import Clock
from daemonjob.machinery.kube import ApiError
from daemonjob.machinery.frozen import thaw
from daemonjob.machinery.workqueue import RateLimitingQueue

__all__ = ["Observation", "Observer", "ConfigMapsRead"]

log = structlog.get_logger("daemonjob.controller")

Obj = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class ConfigMapsRead:
    """The referenced ConfigMaps as far as their watches know them."""

    objects: dict[str, Obj | None] | None = None  # by name (None: missing); None: not opted in
    pending: bool = False  # a watch has not listed yet: its sync listener wakes the DaemonJob
    unreadable: dict[str, str] = field(default_factory=dict)  # name -> why its list fails


@dataclass(slots=True)
class Observation:
    """What one pass of one DaemonJob decides on."""

    key: str
    cached: Obj  # the cached DaemonJob (frozen): its status is what the status write compares with
    dj: dict[str, Any]  # a plain copy: decide builds Job bodies from its template
    owner: Obj  # the controller reference its Jobs carry
    configmaps: ConfigMapsRead
    wait: Waiting | None  # what the cache still does not show, past the deadline (None: nothing)
    conflicts: tuple[Conflict, ...]
    state: KeptPlan
    log: Any

    @property
    def namespace(self) -> str:
        return self.dj["metadata"]["namespace"]

    @property
    def name(self) -> str:
        return self.dj["metadata"]["name"]

    @property
    def uid(self) -> str:
        return self.dj["metadata"].get("uid") or ""

    @property
    def generation(self) -> int:
        return int(self.dj["metadata"].get("generation") or 0)


class Observer:
    def __init__(self, informers: Informers, *, act: Act, control: JobControl, expectations: Expectations,
                 configmaps: ConfigMapTracker | None, plans: KeptPlans, troubles: Troubles, queue: RateLimitingQueue,
                 metrics: Metrics, clock: Clock, memo: Memo) -> None:
        self.daemonjobs, self.jobs, self.nodes = informers.daemonjobs, informers.jobs, informers.nodes
        self.act = act
        self.control = control
        self.expectations = expectations
        self.configmaps = configmaps
        self.plans = plans
        self.troubles = troubles
        self.queue = queue
        self.metrics = metrics
        self.clock = clock
        self.memo = memo

    def observe(self, key: str) -> Observation | None:
        namespace, _, name = key.rpartition("/")
        rlog = log.bind(namespace=namespace, name=name)
        cached = self.daemonjobs.store.get(key)
        if cached is None or cached["metadata"].get("deletionTimestamp"):
            if self.configmaps is not None:
                self.configmaps.forget(key)
            return None  # deleted, or on its way: the garbage collector removes its Jobs
        dj = thaw(cached)
        configmaps = self._configmaps(key, dj)
        if configmaps.pending:
            rlog.debug("waiting for the referenced ConfigMaps to be listed")
            return None
        uid = dj["metadata"].get("uid") or ""
        wait = self._cache_wait(key, uid, namespace, rlog)
        if wait is not None and not wait:
            return None  # requeued for the deadline of what it waits for
        owner = owner_reference(dj)
        adopted = self.act.adopt(dj, self.jobs.store.by_index(ORPHAN_INDEX, key), owner) if wait is None else []
        conflicts = self._recheck_conflicts(dj, owner) if wait is None else self.troubles.conflicts(uid)
        state = self.plans.state_for(uid, adopted)
        return Observation(key, cached, dj, owner, configmaps, wait, conflicts, state, rlog)

    def full_state(self, seen: Observation) -> KeptPlan:
        """A plan from scratch, from the caches: what the kept one is compared with."""
        return KeptPlan.of(self.jobs.store.by_index(OWNER_INDEX, seen.uid), self.nodes.store.list(), self.memo)

    # -- the referenced ConfigMaps ---------------------------------------------------------------
    def _configmaps(self, key: str, dj: Obj) -> ConfigMapsRead:
        """The referenced ConfigMaps, when opted in. Keeps the tracker's watches to exactly
        what `dj` references. A watch whose list fails (a 403, say) makes them unreadable, for
        a Stalled condition; the watch retries with its own backoff and its sync listener
        wakes the DaemonJob when that changes, so nothing here polls."""
        if self.configmaps is None:
            return ConfigMapsRead()
        namespace = dj["metadata"].get("namespace") or ""
        if not rerun_on_config_change(dj):
            self.configmaps.forget(key)
            return ConfigMapsRead()
        refs = referenced_configmaps(pod_template_of(dj))
        self.configmaps.track(key, namespace, [r.name for r in refs])
        out: dict[str, Obj | None] = {}
        unreadable: dict[str, str] = {}
        pending = False
        for ref in refs:
            synced, obj = self.configmaps.get(namespace, ref.name)
            if synced:
                out[ref.name] = obj
                continue
            error = self.configmaps.error(namespace, ref.name)
            if error is not None:
                unreadable[ref.name] = error
            else:
                pending = True
        if unreadable:
            return ConfigMapsRead(None, False, unreadable)
        return ConfigMapsRead(None, True) if pending else ConfigMapsRead(out)

    # -- the controller's own writes, seen in the cache or not ------------------------------------
    def _cache_wait(self, key: str, uid: str, namespace: str, rlog: Any) -> Waiting | None:
        """None when the cache shows every write of this DaemonJob's; else what it still waits
        for past the deadline after a check against the API server (empty: nothing overdue
        yet). Either way the key is requeued for the next deadline: no silent wait for the TTL."""
        if self.expectations.satisfied(uid):
            return None
        overdue = self.expectations.waiting(uid, overdue_only=True)
        if overdue:
            self._check_against_api(uid, namespace, overdue, rlog)
            if self.expectations.satisfied(uid):
                return None
            overdue = self.expectations.waiting(uid, overdue_only=True)
        if overdue:
            rlog.warning("the cache does not show this controller's writes past the deadline",
                         creates=list(overdue.creates[:5]), deletes=list(overdue.deletes[:5]),
                         pending_seconds=round(self.clock.now() - overdue.since, 1))
            self.queue.add_after(key, defaults.EXPECTATIONS_RECHECK)
            return overdue
        creates, deletes = self.expectations.pending(uid)
        rlog.debug("waiting for the cache", pending_creates=creates, pending_deletes=deletes)
        due = self.expectations.next_deadline(uid)
        self.queue.add_after(key, defaults.EXPECTATIONS_RECHECK if due is None else max(0.0, due - self.clock.now()))
        return overdue

    def _check_against_api(self, uid: str, namespace: str, overdue: Waiting, rlog: Any) -> None:
        """Clear the overdue names on which the cache already agrees with the API server:
        deciding on that cache then acts on the truth, never twice. Where they disagree the
        cache is behind, and the wait goes on."""
        for name, created in [(n, True) for n in overdue.creates] + [(n, False) for n in overdue.deletes]:
            cached = self.jobs.store.get(f"{namespace}/{name}")
            going = cached is None or bool(cached["metadata"].get("deletionTimestamp"))
            shown = cached is not None if created else going
            if shown:  # the cache shows it: only the event was missed (a relist merged it, say)
                agree = True
            else:
                try:
                    fresh: Obj | None = self.control.get_job(namespace, name)
                except ApiError as exc:
                    if not exc.not_found:
                        rlog.debug("expectation check failed", job=name, error=exc.message)
                        continue
                    fresh = None
                if created:
                    agree = fresh is None  # absent for both: creating it again is right
                else:  # the delete did not take: the cache shows the truth, decide again
                    agree = (fresh is not None and cached is not None
                             and not fresh["metadata"].get("deletionTimestamp")
                             and fresh["metadata"].get("uid") == cached["metadata"].get("uid"))
            if agree:
                (self.expectations.creation_observed if created else self.expectations.deletion_observed)(uid, name)
            self.metrics.expectation_checks.labels("cleared" if agree else "waiting").inc()

    # -- Job names another owner holds ------------------------------------------------------
    def _recheck_conflicts(self, dj: Obj, owner: Obj) -> tuple[Conflict, ...]:
        """Conflicts still standing: a fresh read of each clashing Job (rare, and few)."""
        uid = dj["metadata"]["uid"]
        known = self.troubles.conflicts(uid)
        if not known:
            return ()
        still = tuple(self.act.resolve_existing(dj, [CreateJob(c.node, c.job, "", dj) for c in known], owner))
        self.troubles.set_conflicts(uid, still)
        return still
