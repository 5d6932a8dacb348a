"""The observe step of a pass: what a decision reads of the caches, gathered before deciding.

The DaemonJob from its cache, the ConfigMaps it references, and whether the cache shows
the controller's own last writes (expectations, checked against the API server once
overdue). Nothing to decide now (gone, being deleted, a watch not listed yet, waiting for
the cache) is None; whatever ends such a wait enqueues the DaemonJob again, or the pass
looks again when the wait's deadline comes. Adoption is the pass's next step (adoption.py);
the kept plan is read after it (keptplans.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import structlog

from daemonjob import defaults
from daemonjob.controller.metrics.metrics import Metrics
from daemonjob.controller.runtime.configmaps import ConfigMapTracker
from daemonjob.controller.runtime.expectations import Expectations, Waiting
from daemonjob.controller.runtime.informers import OWNER_INDEX, Informers
from daemonjob.controller.runtime.jobcontrol import JobControl
from daemonjob.controller.runtime.specs import SpecCache
from daemonjob.domain.jobs.owners import owner_id, owner_reference
from daemonjob.domain.rollout.inputs import ConfigMapsRead
from daemonjob.domain.rollout.keptplan import KeptPlan
from daemonjob.domain.rollout.plan import JobView
from daemonjob.domain.shared.memo import Memo
from daemonjob.domain.spec.configrefs import referenced_configmaps
from daemonjob.domain.spec.spec import DaemonJobSpec
from daemonjob.machinery.cache.frozen import thaw
from daemonjob.machinery.client.kube import ApiError
from daemonjob.machinery.process.clock import Clock

__all__ = ["Observation", "Observer"]

log = structlog.get_logger("daemonjob.controller")

Obj = Mapping[str, Any]


@dataclass(slots=True)
class Observation:
    """What the observe step read of one DaemonJob: the decision's input is made from it."""

    key: str
    cached: Obj  # the cached DaemonJob (frozen): its status is what the status write compares with
    dj: dict[str, Any]  # a plain copy: decide builds Job bodies from its template
    owner: Obj  # the controller reference its Jobs carry
    configmaps: ConfigMapsRead
    wait: Waiting | None  # what the cache still does not show, past the deadline (None: nothing)
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
    def __init__(
        self,
        informers: Informers,
        *,
        control: JobControl,
        expectations: Expectations,
        configmaps: ConfigMapTracker | None,
        metrics: Metrics,
        clock: Clock,
        memo: Memo,
        specs: SpecCache | None = None,
    ) -> None:
        self.daemonjobs, self.jobs, self.nodes = informers.daemonjobs, informers.jobs, informers.nodes
        self.control = control
        self.expectations = expectations
        self.configmaps = configmaps
        self.metrics = metrics
        self.clock = clock
        self.memo = memo
        self.specs = specs if specs is not None else SpecCache()
        # each node's newest recorded success, with spec.results.deleteSucceededJobs (resultstatus.py)
        self.recorded: Callable[[Observation], Mapping[str, JobView] | None] = lambda _observed: None

    def observe(self, key: str) -> tuple[Observation | None, float | None]:
        """The observation (None: nothing to decide now), and in how many seconds to look
        again for what it waits on (None: an event brings the DaemonJob back)."""
        namespace, _, name = key.rpartition("/")
        rlog = log.bind(namespace=namespace, name=name)
        cached = self.daemonjobs.store.get(key)
        if cached is None or cached["metadata"].get("deletionTimestamp"):
            if self.configmaps is not None:
                self.configmaps.forget(key)
            return None, None  # deleted, or on its way: the garbage collector removes its Jobs
        dj = thaw(cached)
        configmaps = self._configmaps(key, dj, self.specs.get(key, cached).spec)
        if configmaps.pending:
            rlog.debug("waiting for the referenced ConfigMaps to be listed")
            return None, None
        wait, look_again = self._cache_wait(dj["metadata"].get("uid") or "", namespace, rlog)
        if wait is not None and not wait:
            return None, look_again  # nothing overdue yet: look again at the deadline
        return Observation(key, cached, dj, owner_reference(dj), configmaps, wait, rlog), look_again

    def full_plan(self, observed: Observation) -> KeptPlan:
        """A plan from scratch, from the caches: what the kept one is compared with."""
        recorded = self.recorded(observed)
        jobs = self.jobs.store.by_index(OWNER_INDEX, owner_id(observed.namespace, observed.uid))
        nodes = self.nodes.store.list()
        return KeptPlan.of(jobs, nodes, self.memo, dict(recorded) if recorded is not None else None)

    # -- the referenced ConfigMaps ---------------------------------------------------------------
    def _configmaps(self, key: str, dj: Obj, spec: DaemonJobSpec) -> ConfigMapsRead:
        """The referenced ConfigMaps, when opted in. Keeps the tracker's watches to exactly
        what `dj` references. A watch whose list fails (a 403, say) makes them unreadable, for
        a Stalled condition; the watch retries with its own backoff and its sync listener
        wakes the DaemonJob when that changes, so nothing here polls."""
        if self.configmaps is None:
            return ConfigMapsRead()
        namespace = dj["metadata"].get("namespace") or ""
        if not spec.rerun_on_config_change:
            self.configmaps.forget(key)
            return ConfigMapsRead()
        refs = referenced_configmaps(spec.pod_template)
        self.configmaps.track(key, namespace, [r.name for r in refs])
        if (refusal := self.configmaps.refusal(key)) is not None:  # past a cap on watches: Stalled
            return ConfigMapsRead(None, False, {r.name: refusal for r in refs})
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
    def _cache_wait(self, uid: str, namespace: str, rlog: Any) -> tuple[Waiting | None, float | None]:
        """None when the cache shows every write of this DaemonJob's; else what it still waits
        for past the deadline after a check against the API server (empty: nothing overdue
        yet). Either way, with the seconds until the next deadline: no silent wait for the TTL."""
        if self.expectations.satisfied(uid):
            return None, None
        overdue = self.expectations.waiting(uid, overdue_only=True)
        if overdue:
            self._check_against_api(uid, namespace, overdue, rlog)
            if self.expectations.satisfied(uid):
                return None, None
            overdue = self.expectations.waiting(uid, overdue_only=True)
        if overdue:
            rlog.warning(
                "the cache does not show this controller's writes past the deadline",
                creates=list(overdue.creates[:5]),
                deletes=list(overdue.deletes[:5]),
                pending_seconds=round(self.clock.now() - overdue.since, 1),
            )
            return overdue, defaults.EXPECTATIONS_RECHECK
        creates, deletes = self.expectations.pending(uid)
        rlog.debug("waiting for the cache", pending_creates=creates, pending_deletes=deletes)
        due = self.expectations.next_deadline(uid)
        return overdue, defaults.EXPECTATIONS_RECHECK if due is None else max(0.0, due - self.clock.now())

    def _check_against_api(self, uid: str, namespace: str, overdue: Waiting, rlog: Any) -> None:
        """Clear the overdue names on which the cache already agrees with the API server:
        deciding on that cache then acts on the truth, never twice. Where they disagree the
        cache is behind, and the wait goes on: for the names not read yet too, since one
        watch brings them all (a watch behind a burst of thousands of creates had each read
        again at every recheck, 3 reads per Job over a rollout at 20,000 nodes)."""
        behind = False
        for name, created in [(n, True) for n in overdue.creates] + [(n, False) for n in overdue.deletes]:
            cached = self.jobs.store.get(f"{namespace}/{name}")
            going = cached is None or bool(cached["metadata"].get("deletionTimestamp"))
            shown = cached is not None if created else going
            if shown:  # the cache shows it: only the event was missed (a relist merged it, say)
                agree = True
            elif behind:
                continue  # read at a later check, once the cache has caught up with the first
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
                    agree = (
                        fresh is not None
                        and cached is not None
                        and not fresh["metadata"].get("deletionTimestamp")
                        and fresh["metadata"].get("uid") == cached["metadata"].get("uid")
                    )
            if agree and created:  # shown by the cache (a relist), or absent from both
                (self.expectations.creation_observed if shown else self.expectations.creation_cancelled)(uid, name)
            elif agree:
                self.expectations.deletion_observed(uid, name)
            behind = behind or not agree
            self.metrics.expectation_checks.labels("cleared" if agree else "waiting").inc()
