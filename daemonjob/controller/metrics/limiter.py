"""Time spent waiting for the client-side rate limiter (client-go's
`rest_client_rate_limiter_duration_seconds`): the throttling that `--kube-api-qps` causes
is otherwise invisible, since the API server never sees the requests that wait."""

from __future__ import annotations

import time
from typing import Any

from prometheus_client import CollectorRegistry, Histogram

WAIT_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)


def limiter_wait_histogram(registry: CollectorRegistry) -> Histogram:
    return Histogram(
        "daemonjob_api_rate_limiter_wait_seconds",
        "Time an API request waited for the client-side rate limiter (--kube-api-qps).",
        registry=registry,
        buckets=WAIT_BUCKETS,
    )


class MeasuredLimiter:
    """Wraps anything with `accept()` (a TokenBucket) and observes how long each call blocked."""

    def __init__(self, limiter: Any, histogram: Histogram):
        self._limiter = limiter
        self._histogram = histogram

    def accept(self) -> None:
        started = time.monotonic()
        try:
            self._limiter.accept()
        finally:
            self._histogram.observe(time.monotonic() - started)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._limiter, name)
