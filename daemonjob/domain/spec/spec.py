"""A DaemonJob's spec, typed: one frozen value that every reader downstream takes.

The rule book (validate.py) is its one parse: it reads the raw object once and produces
this value together with the problems; an invalid knob keeps its safe default (and adds a
problem), so a decision is always possible. The decision, the controller, the webhook and
the plugin read this value, never `dj["spec"]` (test/unit/test_spec_readers.py holds them
to it); the controller keeps it per DaemonJob generation (controller/runtime/specs.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from daemonjob import defaults
from daemonjob.domain.schedule.runsettings import Runs
from daemonjob.domain.spec.eligibility import Eligibility
from daemonjob.domain.spec.maintenancespec import Maintenance
from daemonjob.domain.spec.nodecheckspec import NodeChecks
from daemonjob.domain.spec.nodeparams import NodeParameter, hashed
from daemonjob.domain.spec.retryspec import Retry
from daemonjob.domain.spec.rolloutspec import Rollout

__all__ = ["DaemonJobSpec", "Settings", "RERUN_ON_TEMPLATE_CHANGE", "RERUN_NEVER", "RERUN_POLICIES"]

RERUN_ON_TEMPLATE_CHANGE = "OnTemplateChange"
RERUN_NEVER = "Never"
RERUN_POLICIES = (RERUN_ON_TEMPLATE_CHANGE, RERUN_NEVER)


@dataclass(frozen=True, slots=True)
class Settings:
    """The rollout knobs, defaulted."""

    rerun_policy: str = RERUN_ON_TEMPLATE_CHANGE
    max_parallel: int | str | None = None
    max_failed: int | str | None = None
    suspend: bool = False
    history_limit: int = defaults.HISTORY_LIMIT

    @property
    def never(self) -> bool:
        return self.rerun_policy == RERUN_NEVER


@dataclass(frozen=True, slots=True)
class DaemonJobSpec:
    """Everything a DaemonJob's spec says, as read by the rule book (defaults where it is invalid)."""

    settings: Settings = Settings()
    runs: Runs = Runs()  # schedule, timeZone, concurrencyPolicy, startingDeadlineSeconds
    rollout: Rollout = Rollout()
    maintenance: Maintenance | None = None  # spec.nodeMaintenance, None: nodes are never written
    asks_maintenance: bool = False  # it sets cordon or drain, valid or not (the namespace allowance applies)
    asks_drain: bool = False  # it asks for maintenance with a drain, valid or not
    checks: NodeChecks = NodeChecks()  # what a node's turn waits for after its Job: a reboot, a health check
    eligibility: Eligibility | None = None  # the node rules, None if they do not compile
    job_template: Mapping[str, Any] = field(default_factory=dict)  # spec.jobTemplate as written: hashed, copied
    template_has_ttl: bool = False
    rerun_on_config_change: bool = False
    exclusion_group: str | None = None  # as written when a non-empty string (checked apart)
    after: tuple[str, ...] = ()  # the non-empty names of spec.after, each once (checked apart)
    retry: Retry | None = None  # spec.retry, None: a failed node waits for a rerun
    start_timeout: timedelta = defaults.START_TIMEOUT  # spec.startTimeout
    results_group_by: str | None = None  # spec.results.groupBy: status.results groups by this JSON field
    delete_succeeded_jobs: bool = False  # spec.results.deleteSucceededJobs: the recorded result stands for the Job
    node_parameters: tuple[NodeParameter, ...] = ()  # spec.nodeParameters, the valid entries

    @property
    def revision_source(self) -> Mapping[str, Any]:
        """What the revision hashes: the template, and the node parameters when there are."""
        return hashed(self.job_template, self.node_parameters)

    @property
    def pod_template(self) -> Mapping[str, Any] | None:
        """spec.jobTemplate.spec.template, if it is an object."""
        job_spec = self.job_template.get("spec") or {}
        pod = job_spec.get("template") if isinstance(job_spec, Mapping) else None
        return pod if isinstance(pod, Mapping) else None
