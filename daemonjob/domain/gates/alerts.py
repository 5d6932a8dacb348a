"""spec.rollout.haltOnAlerts: no new node starts while a matching alert fires.

A pure function of the matchers and the firing alerts as the controller last read them from
Prometheus (a field of the decision's input). Alerts that cannot be read count as a halt: a
health gate that opens whenever its source is down would let a rollout through exactly when
nobody can see the cluster's health. A running Job is never stopped.

Prometheus' alerts are the whole cluster's, other tenants' among them: a status names a
matching alert by the labels its matchers name and nothing more, so what another tenant's
alert carries (its other labels, their values of any length) never lands in this status.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from daemonjob.domain.gates.hold import Gate, GateContext
from daemonjob.domain.rollout.gating import Hold
from daemonjob.domain.rollout.inputs import FiringAlerts
from daemonjob.domain.spec.validate import AlertMatcher

__all__ = [
    "GATE",
    "GATE_ALERTS",
    "HALTED_BY_ALERTS",
    "ALERTS_UNKNOWN",
    "AlertHalt",
    "alert_halt",
    "matches",
    "alert_text",
    "matched_labels",
]

GATE_ALERTS = "alerts"
HALTED_BY_ALERTS = "HaltedByAlerts"  # a matching alert fires
ALERTS_UNKNOWN = "AlertsUnknown"  # the firing alerts are unknown

ALERTS_SHOWN = 10
Labels = tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class AlertHalt:
    """Whether haltOnAlerts holds new nodes back now, and what the status says of it."""

    halted: bool = False
    reason: str = ""
    message: str = ""


def matches(matcher: AlertMatcher, labels: Labels) -> bool:
    """Equality matchers: every label of the matcher has that value on the alert."""
    have = dict(labels)
    return all(have.get(name) == value for name, value in matcher)


def matched_labels(matchers: tuple[AlertMatcher, ...], labels: Labels) -> Labels:
    """The labels of an alert that its matching matchers name (the values they asked for)."""
    names = {name for m in matchers if matches(m, labels) for name, _ in m}
    return tuple((k, v) for k, v in labels if k in names)


def alert_text(labels: Labels) -> str:
    """An alert as Prometheus writes a series: alertname{label="value",...}."""
    have = dict(labels)
    name = have.pop("alertname", "")
    rest = ",".join(f'{k}="{v}"' for k, v in sorted(have.items()))
    return f"{name}{{{rest}}}" if rest else name


def _shown(items: Iterable[str]) -> str:
    items = list(items)
    more = f" (+{len(items) - ALERTS_SHOWN} more)" if len(items) > ALERTS_SHOWN else ""
    return ", ".join(items[:ALERTS_SHOWN]) + more


def alert_halt(matchers: tuple[AlertMatcher, ...], alerts: FiringAlerts) -> AlertHalt:
    """Halted while any firing alert matches any matcher, or while the alerts are unknown."""
    if not matchers:
        return AlertHalt()
    if alerts.unknown is not None:
        return AlertHalt(
            True,
            ALERTS_UNKNOWN,
            f"haltOnAlerts: the firing alerts are unknown ({alerts.unknown}), which halts the rollout "
            "as a firing alert does: no new node is started, running Jobs finish",
        )
    matching = [a for a in alerts.firing if any(matches(m, a) for m in matchers)]
    if not matching:
        return AlertHalt()
    firing = sorted({alert_text(matched_labels(matchers, a)) for a in matching})
    return AlertHalt(
        True,
        HALTED_BY_ALERTS,
        f"haltOnAlerts: {len(matching)} matching alert(s) firing: {_shown(firing)}; no new node is "
        "started until they resolve, running Jobs finish",
    )


def hold(at: GateContext) -> Hold:
    """A halt holds every new node back (as a closed window does, and named before it); no
    wake-up by the clock: the alert poller enqueues on a change."""
    halt = alert_halt(at.reading.checked.rollout.halt_on_alerts, at.reading.input.alerts)
    if not halt.halted:
        return Hold(GATE_ALERTS)
    return Hold(GATE_ALERTS, blocks=True, reason=halt.reason, message=halt.message)


GATE = Gate(hold, {HALTED_BY_ALERTS: GATE_ALERTS, ALERTS_UNKNOWN: GATE_ALERTS})
