"""The process's own series, and the garbage collector's pauses per generation."""

from __future__ import annotations

import gc

from prometheus_client import CollectorRegistry

from daemonjob.machinery.process.processmetrics import GcPauses, process_metrics


def test_a_full_collection_is_observed_in_its_generation() -> None:
    registry = CollectorRegistry()
    pauses = GcPauses(registry)
    pauses.install()
    pauses.install()  # once only
    try:
        gc.collect(2)
    finally:
        pauses.uninstall()
    count = registry.get_sample_value("python_gc_duration_seconds_count", {"generation": "2"})
    assert count == 1
    assert registry.get_sample_value("python_gc_duration_seconds_sum", {"generation": "2"}) > 0
    gc.collect(2)  # uninstalled: no longer observed
    assert registry.get_sample_value("python_gc_duration_seconds_count", {"generation": "2"}) == 1


def test_the_process_series_are_in_the_controllers_registry() -> None:
    registry = CollectorRegistry()
    pauses = process_metrics(registry)
    try:
        gc.collect(1)
    finally:
        pauses.uninstall()
    assert registry.get_sample_value("process_resident_memory_bytes") > 0
    assert registry.get_sample_value("python_gc_duration_seconds_count", {"generation": "1"}) >= 1
    assert registry.get_sample_value("python_gc_duration_seconds_count", {"generation": "0"}) is None
    assert registry.get_sample_value("python_gc_collections_total", {"generation": "0"}) is not None
