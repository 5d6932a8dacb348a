"""Reading a Prometheus /metrics page in tests, with the client library's own parser."""

from __future__ import annotations

from collections.abc import Mapping

from prometheus_client.parser import text_string_to_metric_families


def metric_value(text: str, name: str, labels: Mapping[str, str] | None = None) -> float | None:
    """Sum of the samples of `name` whose labels include `labels`; None when there is none."""
    total: float | None = None
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in (labels or {}).items()):
                total = (total or 0.0) + sample.value
    return total
