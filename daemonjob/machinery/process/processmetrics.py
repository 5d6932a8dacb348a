"""The process's own metrics, and the pauses of Python's cyclic garbage collector per generation.

A full collection walks every tracked object, and a controller's caches are millions of
them: such a pause holds the interpreter, every worker and watch included, for a good
fraction of a second. prometheus_client counts collections (`python_gc_collections_total`)
but not their length; this is the Python side of Go's `go_gc_duration_seconds`.
"""

from __future__ import annotations

import gc
import time
from typing import Any

from prometheus_client import CollectorRegistry, GCCollector, Histogram, PlatformCollector, ProcessCollector

__all__ = ["GcPauses", "process_metrics"]

PAUSE_BUCKETS = (0.0005, 0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5)


class GcPauses:
    """Installed once per process (`install`); the histogram lives in the given registry."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.histogram = Histogram(
            "python_gc_duration_seconds",
            "Pauses of the cyclic garbage collector, by generation collected (1 and 2; "
            "the youngest, collected most often and in microseconds, is not timed).",
            ["generation"],
            registry=registry,
            buckets=PAUSE_BUCKETS,
        )
        self._children = {g: self.histogram.labels(str(g)) for g in (1, 2)}
        self._started = 0.0

    def install(self) -> None:
        if self._callback not in gc.callbacks:
            gc.callbacks.append(self._callback)

    def uninstall(self) -> None:
        if self._callback in gc.callbacks:
            gc.callbacks.remove(self._callback)

    def _callback(self, phase: str, info: dict[str, Any]) -> None:
        # Collections never overlap (one runs at a time, under the GIL): one start time is enough.
        # The youngest generation is collected every few hundred allocations and in microseconds:
        # not timed, so that the callback costs next to nothing where it runs most.
        generation = info["generation"]
        if not generation:
            return
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self._children[generation].observe(time.perf_counter() - self._started)


def process_metrics(registry: CollectorRegistry) -> GcPauses:
    """The process's own series, as controller-runtime's registry has them: `process_*`
    (CPU, resident memory, open files), `python_info`, `python_gc_*` with the pauses."""
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    GCCollector(registry=registry)
    pauses = GcPauses(registry)
    pauses.install()
    return pauses
