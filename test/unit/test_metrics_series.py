"""Metric label values stay bounded and a DaemonJob's series go with it."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import pytest

from daemonjob.controller.metrics.metrics import Metrics
from daemonjob.controller.runtime.configmaps import kube_configmap_informer
from daemonjob.controller.wiring.controller import Controller
from daemonjob.machinery.cache.informer import InformerHooks
from daemonjob.machinery.process.clock import FakeClock
from daemonjob.testing.doubles.builders import daemonjob, job_template
from daemonjob.testing.doubles.fakes import FakeJobControl, fake_informers

NOW = datetime(2026, 11, 23, 12, 0, tzinfo=timezone.utc)
STATUS = {"desiredNodes": 2, "activeNodes": 1, "succeededNodes": 1, "failedNodes": 0, "pendingNodes": 0}


def series(metrics: Metrics, name: str = "audit") -> list[tuple[str, dict[str, str]]]:
    return [
        (s.name, s.labels)
        for family in metrics.registry.collect()
        for s in family.samples
        if s.labels.get("name") == name
    ]


def test_a_status_written_after_the_delete_brings_no_series_back() -> None:
    m = Metrics()
    m.set_status("ops", "audit", "uid-1", STATUS)
    m.count_runs("ops", "audit", "uid-1", True, [("ConcurrencyForbid", 1)], "succeeded")
    assert series(m)
    m.forget("ops", "audit", "uid-1")
    assert series(m) == []
    m.set_status("ops", "audit", "uid-1", STATUS)  # the reconcile that was in flight
    m.count_runs("ops", "audit", "uid-1", True, [], None)
    m.observe_health(
        {"metadata": {"namespace": "ops", "name": "audit", "uid": "uid-1"}, "spec": {"schedule": "* * * * *"}},
        {**STATUS, "conditions": [{"type": "Complete", "status": "True"}]},
        NOW,
    )
    assert series(m) == []
    m.set_status("ops", "audit", "uid-2", STATUS)  # re-created under the same name
    assert series(m)


def test_a_daemonjob_deleted_during_its_reconcile_leaves_no_series() -> None:
    informers = fake_informers()
    control = FakeJobControl(jobs=informers.jobs)
    ctl = Controller(informers, control, clock=FakeClock(), resync_interval=0)
    try:
        informers.nodes.add({"metadata": {"name": "n1", "labels": {}}, "spec": {}})
        dj = daemonjob(uid="uid-1", resource_version=None, template=job_template(backoff_limit=None))
        informers.daemonjobs.add(dj)
        control.daemonjobs["ops/audit"] = dj
        patch_status = control.patch_status

        def deleted_meanwhile(*args: Any, **kw: Any) -> None:
            patch_status(*args, **kw)
            informers.daemonjobs.delete(dj)  # the delete handler runs while the pass goes on

        control.patch_status = deleted_meanwhile
        ctl.reconcile("ops/audit")
        assert series(ctl.metrics) == []
    finally:
        ctl.stop(timeout=1)


def test_every_configmap_watch_reports_under_one_label_value() -> None:
    m = Metrics()
    hooks = InformerHooks(on_list=m.on_list, on_relist=m.on_relist, on_watch_restart=m.on_watch_restart)
    make = kube_configmap_informer(kube=None, hooks=hooks)
    for name in ("script-5f9c2a", "script-7d1e0b", "other"):
        informer = make("ops", name)
        informer.hooks.on_list(informer.name)
        informer.hooks.on_relist(informer.name)
        informer.hooks.on_watch_restart(informer.name, "api-403")
    values = {s.labels["informer"] for family in m.registry.collect() for s in family.samples if "informer" in s.labels}
    assert values == {"configmaps"}


def _reconciling(reason: str) -> dict[str, Any]:
    return {**STATUS, "conditions": [{"type": "Reconciling", "status": "True", "reason": reason}]}


def test_the_rollout_gate_in_force_is_1_and_goes_with_the_daemonjob() -> None:
    m = Metrics()

    def gates() -> dict[str, float]:
        return {
            s.labels["gate"]: s.value
            for family in m.registry.collect()
            for s in family.samples
            if s.name == "daemonjob_rollout_gate" and s.labels["name"] == "audit"
        }

    m.set_status("ops", "audit", "uid-1", _reconciling("WaitingForWindow"))
    assert gates() == {
        "window": 1.0,
        "canary": 0.0,
        "pauseBetweenNodes": 0.0,
        "alerts": 0.0,
        "exclusionGroup": 0.0,
        "after": 0.0,
        "clusterDisruptionBudget": 0.0,
        "healthCheck": 0.0,
    }
    m.set_status("ops", "audit", "uid-1", _reconciling("CanaryPaused"))
    assert gates() == {
        "window": 0.0,
        "canary": 1.0,
        "pauseBetweenNodes": 0.0,
        "alerts": 0.0,
        "exclusionGroup": 0.0,
        "after": 0.0,
        "clusterDisruptionBudget": 0.0,
        "healthCheck": 0.0,
    }
    m.set_status("ops", "audit", "uid-1", _reconciling("HaltedByAlerts"))
    assert gates() == {
        "window": 0.0,
        "canary": 0.0,
        "pauseBetweenNodes": 0.0,
        "alerts": 1.0,
        "exclusionGroup": 0.0,
        "after": 0.0,
        "clusterDisruptionBudget": 0.0,
        "healthCheck": 0.0,
    }
    m.set_status("ops", "audit", "uid-1", _reconciling("AlertsUnknown"))
    assert gates()["alerts"] == 1.0
    m.set_status("ops", "audit", "uid-1", _reconciling("WaitingForExclusionGroup"))
    assert gates()["exclusionGroup"] == 1.0 and sum(gates().values()) == 1.0
    m.set_status("ops", "audit", "uid-1", _reconciling("RollingOut"))
    assert set(gates().values()) == {0.0}
    m.forget("ops", "audit", "uid-1")
    assert gates() == {}


def test_time_waiting_at_a_gate_is_counted_per_gate_and_rises_between_writes() -> None:
    now = [100.0]
    m = Metrics(timer=lambda: now[0])

    def waited(gate: str) -> float | None:
        return m.registry.get_sample_value(
            "daemonjob_rollout_gate_wait_seconds_total", {"namespace": "ops", "name": "audit", "gate": gate}
        )

    m.set_status("ops", "audit", "uid-1", _reconciling("RollingOut"))
    assert waited("alerts") == 0.0 and waited("window") == 0.0  # every gate's series from the start
    now[0] = 110.0
    m.set_status("ops", "audit", "uid-1", _reconciling("HaltedByAlerts"))
    now[0] = 140.0
    assert waited("alerts") == 30.0  # rising while nothing is written
    m.set_status("ops", "audit", "uid-1", _reconciling("WaitingForWindow"))
    now[0] = 145.0
    assert (waited("alerts"), waited("window")) == (30.0, 5.0)
    m.set_status("ops", "audit", "uid-1", _reconciling("RollingOut"))
    now[0] = 200.0
    assert (waited("alerts"), waited("window")) == (30.0, 5.0)
    m.forget("ops", "audit", "uid-1")
    assert waited("alerts") is None


def test_node_maintenance_series_follow_what_the_core_reports_and_go_with_the_daemonjob() -> None:
    m = Metrics()
    labels = {"namespace": "ops", "name": "audit"}

    def value(metric: str, **extra: str) -> float | None:
        return m.registry.get_sample_value(metric, {**labels, **extra})

    m.maintenance_observed("ops", "audit", "uid-1", 0, None)
    assert value("daemonjob_nodes_cordoned") == 0.0
    assert value("daemonjob_node_cordoned_oldest_timestamp_seconds") == 0.0
    # counters and histograms start at zero, so a rate counts the first drain and refusal
    assert value("daemonjob_evictions_refused_total") == 0.0
    assert value("daemonjob_drain_duration_seconds_count", result="drained") == 0.0
    assert value("daemonjob_drain_duration_seconds_count", result="timed_out") == 0.0

    m.maintenance_observed("ops", "audit", "uid-1", 2, 1_700_000_000.0)
    assert value("daemonjob_nodes_cordoned") == 2.0
    assert value("daemonjob_node_cordoned_oldest_timestamp_seconds") == 1_700_000_000.0
    m.eviction_refused("ops", "audit", "uid-1")
    m.eviction_refused("ops", "audit", "uid-1", 3)
    assert value("daemonjob_evictions_refused_total") == 4.0
    m.drain_finished("ops", "audit", "uid-1", "drained", 42.0)
    m.drain_finished("ops", "audit", "uid-1", "timed_out", 600.0)
    assert value("daemonjob_drain_duration_seconds_sum", result="drained") == 42.0
    assert value("daemonjob_drain_duration_seconds_bucket", result="drained", le="60.0") == 1.0
    assert value("daemonjob_drain_duration_seconds_bucket", result="drained", le="30.0") == 0.0
    assert value("daemonjob_drain_duration_seconds_count", result="timed_out") == 1.0
    with pytest.raises(ValueError):
        m.drain_finished("ops", "audit", "uid-1", "failed", 1.0)

    m.maintenance_observed("ops", "audit", "uid-1", 0, 1_700_000_000.0)  # all released: 0, which the alert ignores
    assert value("daemonjob_node_cordoned_oldest_timestamp_seconds") == 0.0

    m.forget("ops", "audit", "uid-1")
    assert series(m) == []
    m.maintenance_observed("ops", "audit", "uid-1", 1, 1_700_000_000.0)  # the reconcile that was in flight
    m.drain_finished("ops", "audit", "uid-1", "drained", 1.0)
    m.eviction_refused("ops", "audit", "uid-1")
    assert series(m) == []
    m.maintenance_observed("ops", "audit", "uid-2", 1, 1_700_000_000.0)  # re-created under the same name
    assert value("daemonjob_nodes_cordoned") == 1.0


def test_a_drain_reported_alone_is_forgotten_too() -> None:
    # No maintenance_observed before: the DaemonJob is still known, and its series go with it.
    m = Metrics()
    m.drain_finished("ops", "audit", "uid-1", "drained", 3.0)
    m.eviction_refused("ops", "audit", "uid-1")
    assert series(m)
    m.forget("ops", "audit", "uid-1")
    assert series(m) == []
