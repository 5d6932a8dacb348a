"""The alert poller (Prometheus' /api/v1/alerts) on a fake HTTP GET and a fake clock, and the
controller it wakes: a change of the firing alerts passes over the DaemonJobs that halt on
alerts (and only those), at once, not at a resync."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from daemonjob.controller.passes.alertpoller import AlertPoller, AnswerTooLarge, parse_alerts, urllib3_get
from daemonjob.machinery.process.clock import FakeClock
from daemonjob.testing.doubles.actbed import ActBed
from daemonjob.testing.doubles.builders import daemonjob

URL = "http://prometheus.test:9090"


def answer(*alerts: tuple[str, dict[str, str]]) -> tuple[int, bytes]:
    body = {
        "status": "success",
        "data": {
            "alerts": [
                {"labels": labels, "state": state, "activeAt": "2024-03-06T12:00:00Z", "value": "1e+00"}
                for state, labels in alerts
            ]
        },
    }
    return 200, json.dumps(body).encode()


class FakePrometheus:
    """What the GET answers next: a (status, body), or an exception to raise."""

    def __init__(self) -> None:
        self.next: Any = answer()
        self.urls: list[str] = []

    def get(self, url: str, timeout: float) -> tuple[int, bytes]:
        self.urls.append(url)
        if isinstance(self.next, Exception):
            raise self.next
        return self.next


@pytest.fixture
def prom() -> FakePrometheus:
    return FakePrometheus()


def poller(prom: FakePrometheus, clock: FakeClock | None = None) -> tuple[AlertPoller, list[int]]:
    changes: list[int] = []
    p = AlertPoller(URL + "/", lambda: changes.append(1), interval=15, get=prom.get, clock=clock or FakeClock())
    return p, changes


def test_only_firing_alerts_are_read_as_sorted_labels(prom: FakePrometheus) -> None:
    p, changes = poller(prom)
    assert p.current().unknown is not None and "not read" in p.current().unknown
    prom.next = answer(
        ("firing", {"severity": "critical", "alertname": "NodeNotReady"}), ("pending", {"alertname": "EtcdDown"})
    )
    assert p.poll_once() and changes == [1]
    assert prom.urls == [URL + "/api/v1/alerts"]
    assert p.current().unknown is None
    assert p.current().firing == ((("alertname", "NodeNotReady"), ("severity", "critical")),)


def test_a_change_is_reported_once_and_only_a_change(prom: FakePrometheus) -> None:
    p, changes = poller(prom)
    prom.next = answer(("firing", {"alertname": "A"}))
    assert p.poll_once()
    assert not p.poll_once()  # the same alerts: nothing to wake
    prom.next = answer(("firing", {"alertname": "A"}), ("firing", {"alertname": "B"}))
    assert p.poll_once()
    prom.next = answer()
    assert p.poll_once() and p.current().firing == ()
    assert len(changes) == 3


def test_unreachable_is_unknown_and_keeps_the_first_failure(prom: FakePrometheus) -> None:
    clock = FakeClock()
    p, changes = poller(prom, clock)
    prom.next = answer()
    p.poll_once()
    prom.next = ConnectionRefusedError("connection refused")
    assert p.poll_once()
    first = p.current().unknown
    assert first is not None and "connection refused" in first and URL in first and "since" in first
    clock.step(60)
    prom.next = TimeoutError("read timed out")
    assert not p.poll_once() and p.current().unknown == first  # still down: no wake-up, the same words
    prom.next = answer()
    assert p.poll_once() and p.current().unknown is None
    assert len(changes) == 3


@pytest.mark.parametrize(
    "status, body, words",
    [
        (503, b'{"status":"error","error":"rule manager not ready"}', "HTTP 503: rule manager not ready"),
        (200, b"<html>not prometheus</html>", "not a JSON answer"),
        (200, b'{"status":"success","data":{}}', "no data.alerts"),
    ],
)
def test_an_answer_that_is_not_the_alerts_is_unknown(status: int, body: bytes, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        parse_alerts(status, body)


def test_the_thread_polls_every_interval_and_stops(prom: FakePrometheus) -> None:
    clock = FakeClock()
    p, _ = poller(prom, clock)
    thread = threading.Thread(target=p.run, daemon=True)
    thread.start()
    clock.block_until_waiters(1)
    assert len(prom.urls) == 1  # the first read at once
    clock.step(15)
    deadline = time.monotonic() + 5
    while len(prom.urls) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(prom.urls) == 2
    p.stop()
    thread.join(5)
    assert not thread.is_alive()


# -- the controller it wakes ---------------------------------------------------------------


@pytest.fixture
def alerted_bed(prom: FakePrometheus) -> Iterator[ActBed]:
    bed = ActBed.start(prometheus_url=URL, prometheus_get=prom.get)
    yield bed
    bed.stop()


def reconciling(bed: ActBed) -> dict[str, Any]:
    return [c for c in bed.dj()["status"]["conditions"] if c["type"] == "Reconciling"][0]


def test_a_resolved_alert_wakes_the_halted_daemonjob_at_once(alerted_bed: ActBed, prom: FakePrometheus) -> None:
    bed = alerted_bed
    bed.add_nodes(2)
    bed.add_dj(daemonjob(name="other"))  # no haltOnAlerts: not woken by alerts
    bed.add_dj(daemonjob(rollout={"haltOnAlerts": [{"alertname": "NodeNotReady"}]}))
    bed.drain()
    bed.ctl.reconcile(bed.key)  # before the first read: unknown, which halts
    bed.sync()
    assert bed.created() == [] and reconciling(bed)["reason"] == "AlertsUnknown"

    prom.next = answer(("firing", {"alertname": "NodeNotReady", "node": "n7"}))
    assert bed.ctl.alerts is not None and bed.ctl.alerts.poll_once()
    assert bed.ctl.queue.get() == (bed.key, False) and len(bed.ctl.queue) == 0  # only the one with haltOnAlerts
    bed.ctl.queue.done(bed.key)
    bed.ctl.reconcile(bed.key)
    bed.sync()
    assert bed.created() == []
    message = reconciling(bed)["message"]
    assert reconciling(bed)["reason"] == "HaltedByAlerts" and "firing: NodeNotReady;" in message
    assert "n7" not in message  # a label the matcher does not name stays out of the status
    assert bed.counter("daemonjob_rollout_gate", gate="alerts") == 1

    prom.next = answer(("firing", {"alertname": "Watchdog"}))
    assert bed.ctl.alerts.poll_once()
    assert len(bed.ctl.queue) == 1
    bed.drain()
    bed.ctl.reconcile(bed.key)
    assert len(bed.created()) == 2
    assert bed.counter("daemonjob_rollout_gate", gate="alerts") == 0


def test_without_a_prometheus_url_halt_on_alerts_halts_and_says_so(bed: ActBed) -> None:
    bed.add_nodes(1)
    bed.add_dj(daemonjob(rollout={"haltOnAlerts": [{"alertname": "NodeNotReady"}]}))
    bed.ctl.reconcile(bed.key)
    bed.sync()
    assert bed.created() == []
    cond = reconciling(bed)
    assert cond["reason"] == "AlertsUnknown" and "--prometheus-url" in cond["message"]


def test_the_prometheus_flags() -> None:
    from daemonjob import cli, defaults

    args = cli.parser().parse_args([])
    assert args.prometheus_url is None and args.prometheus_poll_interval == defaults.PROMETHEUS_POLL_INTERVAL
    args = cli.parser().parse_args(["--prometheus-url", URL, "--prometheus-poll-interval", "5"])
    assert (args.prometheus_url, args.prometheus_poll_interval) == (URL, 5.0)
    with pytest.raises(SystemExit):
        cli.parser().parse_args(["--prometheus-poll-interval", "0"])


def test_the_controller_polls_only_with_a_prometheus_url(bed: ActBed) -> None:
    assert bed.ctl.alerts is None and bed.ctl.firing_alerts().unknown is not None


# -- the answer read is bounded --------------------------------------------------------------------
class _Answering:
    """A local HTTP server answering every GET with `body`, with or without a Content-Length."""

    def __init__(self, body: bytes, declare_length: bool) -> None:
        import http.server

        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                if declare_length:
                    self.send_header("Content-Length", str(len(body)))
                else:
                    self.send_header("Connection", "close")
                self.end_headers()
                try:
                    self.wfile.write(body)
                except OSError:
                    pass  # the client stopped reading: as it should past its limit
                outer.served += 1

            def log_message(self, *args: Any) -> None:
                pass

        self.served = 0
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(10)


@pytest.mark.parametrize("declare_length", [True, False])
def test_an_answer_over_the_bytes_read_is_unknown_and_not_read_whole(declare_length: bool) -> None:
    alerts = [{"labels": {"alertname": f"A{i}", "pad": "p" * 200}, "state": "firing"} for i in range(20_000)]
    big = json.dumps({"status": "success", "data": {"alerts": alerts}}).encode()
    server = _Answering(big, declare_length)
    try:
        get = urllib3_get(max_bytes=64 * 1024)
        with pytest.raises(AnswerTooLarge):
            get(server.url + "/api/v1/alerts", 10)
        p = AlertPoller(server.url, lambda: None, get=get, clock=FakeClock())
        p.poll_once()
        assert p.current().unknown is not None and "over the 65536" in p.current().unknown
        small = urllib3_get(max_bytes=len(big))  # at the limit, read and parsed
        status, body = small(server.url + "/api/v1/alerts", 10)
        assert status == 200 and len(parse_alerts(status, body)) == 20_000
    finally:
        server.close()
