"""daemonjob_rollout_gate_wait_seconds_total: how long each DaemonJob's rollout waited at each gate.

The gate in force is read from each status the controller writes (its Reconciling reason,
as daemonjob_rollout_gate); the counter runs while that gate holds and is read at scrape
time, so it keeps rising through a long wait in which nothing is written. A rate of it is
the share of time a rollout spends waiting at a gate.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector

from daemonjob.domain.gates import GATES

NAME = "daemonjob_rollout_gate_wait_seconds"
HELP = "Seconds a DaemonJob's rollout waited at each rollout gate (spec.rollout) while this process ran."


@dataclass(slots=True)
class _Waits:
    totals: dict[str, float] = field(default_factory=dict)
    gate: str | None = None  # the gate holding it since `since`
    since: float = 0.0


class GateWaits(Collector):
    def __init__(self, registry: CollectorRegistry, timer: Callable[[], float] = time.monotonic):
        self._timer = timer
        self._lock = threading.Lock()
        self._waits: dict[tuple[str, str], _Waits] = {}
        registry.register(self)

    def observe(self, namespace: str, name: str, gate: str | None) -> None:
        """The gate in force (None: none) as of the status just written."""
        now = self._timer()
        with self._lock:
            waits = self._waits.setdefault((namespace, name), _Waits())
            if waits.gate is not None:
                waits.totals[waits.gate] = waits.totals.get(waits.gate, 0.0) + max(0.0, now - waits.since)
            waits.gate, waits.since = gate, now

    def forget(self, namespace: str, name: str) -> None:
        with self._lock:
            self._waits.pop((namespace, name), None)

    def describe(self) -> Iterator[CounterMetricFamily]:
        yield CounterMetricFamily(NAME, HELP, labels=["namespace", "name", "gate"])

    def collect(self) -> Iterator[CounterMetricFamily]:
        family = CounterMetricFamily(NAME, HELP, labels=["namespace", "name", "gate"])
        now = self._timer()
        with self._lock:
            for (namespace, name), waits in sorted(self._waits.items()):
                for gate in GATES:
                    value = waits.totals.get(gate, 0.0)
                    if waits.gate == gate:
                        value += max(0.0, now - waits.since)
                    family.add_metric([namespace, name, gate], value)
        yield family
