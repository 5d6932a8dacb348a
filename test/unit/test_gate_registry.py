"""Every gate of daemonjob/domain/gates/ runs: each module of the package is either part of
the step's framework (or the order's reading of the gates) or a gate listed in its precedence."""

from __future__ import annotations

import importlib
import pkgutil
from datetime import datetime, timezone

from daemonjob.domain import gates
from daemonjob.domain.gates.hold import Gate
from daemonjob.domain.gates.step import GATES, PRECEDENCE
from daemonjob.domain.rollout.inputs import FiringAlerts
from daemonjob.testing.doubles.builders import daemonjob, nodes
from daemonjob.testing.doubles.decisions import Given, decide_over

NOW = datetime(2024, 3, 6, 12, 0, 0, tzinfo=timezone.utc)  # outside a window opening at 22:00

# the protocol, the step that runs the gates, and what another DaemonJob's gate in force means to the order
FRAMEWORK = {"hold", "step", "orderview"}


def test_every_gate_module_is_in_the_precedence_list() -> None:
    modules = sorted(m.name for m in pkgutil.iter_modules(gates.__path__) if m.name not in FRAMEWORK)
    assert modules, "no gate module found"
    for name in modules:
        module = importlib.import_module(f"{gates.__name__}.{name}")
        gate = getattr(module, "GATE", None)
        assert isinstance(gate, Gate), f"gates/{name}.py defines no GATE"
        assert gate in PRECEDENCE, f"gates/{name}.py is not in step.PRECEDENCE"
    assert len(PRECEDENCE) == len(modules)


def test_each_reason_names_one_gate_and_every_gate_is_reported() -> None:
    reasons = [reason for gate in PRECEDENCE for reason in gate.reasons]
    assert len(reasons) == len(set(reasons))
    assert set(GATES) == {
        "window",
        "canary",
        "pauseBetweenNodes",
        "alerts",
        "exclusionGroup",
        "after",
        "clusterDisruptionBudget",
        "healthCheck",
    }


def test_a_halt_is_named_before_a_closed_window_and_the_window_before_the_canary() -> None:
    window = {"schedule": "0 22 * * *", "duration": "4h", "timeZone": "Europe/Berlin"}
    dj = daemonjob(resource_version=None, status={}, rollout={"haltOnAlerts": [{"alertname": "X"}], "window": window})
    halted = decide_over(Given(dj, [], nodes("n1", "n2"), NOW, alerts=FiringAlerts(firing=((("alertname", "X"),),))))
    assert halted.creates == [] and halted.gate == "alerts" and halted.requeue_at is None
    dj = daemonjob(resource_version=None, status={}, rollout={"window": window, "canary": 1})
    closed = decide_over(Given(dj, [], nodes("n1", "n2"), NOW))
    assert closed.creates == [] and closed.gate == "window" and closed.requeue_at is not None
