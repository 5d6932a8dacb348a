"""Reads the firing alerts from Prometheus' HTTP API for spec.rollout.haltOnAlerts.

One thread polls `/api/v1/alerts` every interval and keeps what it read as a `FiringAlerts`
value, which each pass hands to the decision. When the firing alerts change (or become
unknown, or known again), it calls `on_change`, which enqueues the DaemonJobs that have
haltOnAlerts: a halt lifts when the alert resolves, not at the next resync. Only alerts in
state `firing` count (a pending alert has not met its rule's `for:` yet, as Alertmanager
sees it). The HTTP GET and the clock are injected, so the poller runs in unit tests.

The answer is read up to `max_bytes`: a larger one is not
read further and counts as unknown, which halts, so the controller's memory never depends
on how many alerts a cluster fires.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

import structlog
import urllib3

from daemonjob import defaults
from daemonjob.domain.rollout.inputs import FiringAlerts
from daemonjob.domain.shared.timestamps import format_time
from daemonjob.machinery.process.clock import Clock, RealClock

__all__ = ["AlertPoller", "AnswerTooLarge", "HttpGet", "urllib3_get", "parse_alerts", "NOT_READ_YET"]

log = structlog.get_logger("daemonjob.alerts")

HttpGet = Callable[[str, float], tuple[int, bytes]]  # (url, timeout) -> (status, body); raises when unreachable
ALERTS_PATH = "/api/v1/alerts"
NOT_READ_YET = "not read from Prometheus yet"


class AnswerTooLarge(ValueError):
    """An answer over the bytes the poller reads."""


def urllib3_get(
    pool: urllib3.PoolManager | None = None, max_bytes: int = defaults.PROMETHEUS_MAX_ANSWER_BYTES
) -> HttpGet:
    """A GET that reads at most `max_bytes` of the (decoded) answer; AnswerTooLarge beyond."""
    http = pool or urllib3.PoolManager()

    def get(url: str, timeout: float) -> tuple[int, bytes]:
        r = http.request("GET", url, timeout=timeout, retries=False, preload_content=False)
        whole = False
        try:
            declared = r.headers.get("Content-Length") or ""
            if declared.isdigit() and int(declared) > max_bytes:
                raise AnswerTooLarge(f"the answer is {declared} bytes, over the {max_bytes} read")
            body = r.read(max_bytes + 1)
            if len(body) > max_bytes:
                raise AnswerTooLarge(f"the answer is over the {max_bytes} bytes read")
            whole = True
            return r.status, body
        finally:
            r.release_conn() if whole else r.close()  # a connection with an answer left unread is not reused

    return get


def parse_alerts(status: int, body: bytes) -> tuple[tuple[tuple[str, str], ...], ...]:
    """The labels of the firing alerts in an /api/v1/alerts answer; ValueError if it is not one."""
    try:
        doc: Any = json.loads(body)
    except ValueError:
        raise ValueError(f"HTTP {status}, not a JSON answer") from None
    if status != 200 or not isinstance(doc, dict) or doc.get("status") != "success":
        error = doc.get("error") if isinstance(doc, dict) else None
        raise ValueError(f"HTTP {status}" + (f": {error}" if error else ""))
    alerts = (doc.get("data") or {}).get("alerts")
    if not isinstance(alerts, list):
        raise ValueError("the answer has no data.alerts list")
    firing = {
        tuple(sorted((str(k), str(v)) for k, v in (a.get("labels") or {}).items()))
        for a in alerts
        if isinstance(a, dict) and a.get("state") == "firing"
    }
    return tuple(sorted(firing))


class AlertPoller:
    def __init__(
        self,
        url: str,
        on_change: Callable[[], None],
        *,
        interval: float = defaults.PROMETHEUS_POLL_INTERVAL,
        timeout: float = defaults.PROMETHEUS_REQUEST_TIMEOUT,
        get: HttpGet | None = None,
        clock: Clock | None = None,
        max_bytes: int = defaults.PROMETHEUS_MAX_ANSWER_BYTES,
    ):
        self.url = url.rstrip("/")
        self.on_change = on_change
        self.interval = interval
        self.timeout = timeout
        self.get = get or urllib3_get(max_bytes=max_bytes)
        self.clock = clock or RealClock()
        self._lock = threading.Lock()
        self._current = FiringAlerts(unknown=f"{NOT_READ_YET} at {self.url}")
        self._stop = threading.Condition()
        self._stopping = False

    def current(self) -> FiringAlerts:
        with self._lock:
            return self._current

    def poll_once(self) -> bool:
        """Read the alerts once; True if what the decisions read changed (and on_change was called)."""
        try:
            status, body = self.get(self.url + ALERTS_PATH, self.timeout)
            read = FiringAlerts(firing=parse_alerts(status, body), unknown=None)
        except Exception as exc:  # unreachable, refused, not Prometheus: all halt alike
            read = FiringAlerts(
                unknown=f"Prometheus at {self.url} did not answer {ALERTS_PATH} since "
                f"{format_time(self.clock.wall())}: {_short(exc)}"
            )
        with self._lock:
            before = self._current
            if read.unknown is not None and before.unknown is not None and not before.unknown.startswith(NOT_READ_YET):
                read = before  # still unreachable: keep the first failure's time and words
            changed = read != before
            self._current = read
        if changed:
            log.info("firing alerts changed", firing=len(read.firing), unknown=read.unknown)
            self.on_change()
        return changed

    def run(self) -> None:
        """The thread's loop: poll, then wait an interval, until stop()."""
        with self._stop:
            while not self._stopping:
                self._stop.release()
                try:
                    self.poll_once()
                except Exception:  # on_change failing must not end the thread
                    log.exception("alert poll failed")
                finally:
                    self._stop.acquire()
                if self._stopping:
                    return
                self.clock.wait(self._stop, self.interval)

    def stop(self) -> None:
        with self._stop:
            self._stopping = True
            self._stop.notify_all()


def _short(exc: Exception) -> str:
    """The error's words without urllib3's object addresses (they differ on every try)."""
    reason = getattr(exc, "reason", None)
    text = str(reason if reason is not None else exc) or type(exc).__name__
    return text.split(">: ", 1)[-1][:300]
