"""The drains that timed out in a revision or run (spec.nodeMaintenance.drain.onTimeout).

Recorded on the Node, or found now.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from daemonjob.domain.nodework.maintenance import DrainProgress, MaintenanceInput
from daemonjob.domain.shared.timestamps import parse_time
from daemonjob.domain.spec.maintenancespec import ON_TIMEOUT_FAIL, Maintenance

__all__ = ["DrainTimeouts", "drain_timeouts", "rollout_key"]


@dataclass(frozen=True, slots=True)
class DrainTimeouts:
    """Nodes whose drain timed out in this revision or run: recorded on the Node (or, by an
    earlier version, in the status) (`recorded`) or found now (`new`), by onTimeout policy;
    both are released, a new one with its outcome. `kept`: nodes kept cordoned from an
    earlier revision or run, out of this one's rollout as a skipped node is."""

    rollout: str
    failed: frozenset[str] = frozenset()
    skipped: frozenset[str] = frozenset()
    recorded: frozenset[str] = frozenset()
    new: tuple[str, ...] = ()
    kept: frozenset[str] = frozenset()

    @property
    def done(self) -> frozenset[str]:
        return self.failed | self.skipped


def rollout_key(revision: str, run: str | None) -> str:
    return run if run is not None else revision


def drain_timeouts(
    spec: Maintenance | None,
    mi: MaintenanceInput,
    status: Mapping[str, Any],
    revision: str,
    run: str | None,
    now: datetime,
    started: Mapping[str, bool],
) -> DrainTimeouts:
    """The drains that timed out in this revision or run. `started`: nodes with a current
    record whose Job exists (their drain is over)."""
    key = rollout_key(revision, run)
    previous = status.get("nodeMaintenance")
    previous = previous if isinstance(previous, Mapping) and previous.get("rollout") == key else {}
    failed = set(_names(previous.get("drainFailedNodes")))
    skipped = set(_names(previous.get("skippedNodes")))
    for node, outcome in mi.outcomes.items():
        if outcome.of_rollout(revision, run):
            (failed if outcome.on_timeout == ON_TIMEOUT_FAIL else skipped).add(node)
    recorded = frozenset(failed | skipped)
    new: list[str] = []
    drain = spec.drain if spec is not None else None
    if drain is not None:
        for node, record in sorted(mi.records.items()):
            if (
                node in recorded
                or not record.of_rollout(revision, run)
                or started.get(node)
                or mi.drains.get(node, DrainProgress()).drained
            ):
                continue
            since = parse_time(record.since)
            if since is not None and now >= since + drain.timeout:
                new.append(node)
                (failed if drain.on_timeout == ON_TIMEOUT_FAIL else skipped).add(node)
    kept = frozenset(n for n, r in mi.records.items() if r.kept and not r.of_rollout(revision, run))
    return DrainTimeouts(key, frozenset(failed), frozenset(skipped), recorded, tuple(new), kept)


def _names(value: Any) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []
