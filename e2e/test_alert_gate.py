"""The rollout gate spec.rollout.haltOnAlerts against the API server and a real Prometheus.

Prometheus scrapes a tiny target this test serves, whose one sample the test switches
between 0 and 1; an alerting rule on it fires and resolves. While it fires no new node
starts (a running Job finishes), across a restart of the controller; once it resolves the
rollout completes. "No new node while it fired" is read from the Jobs' creationTimestamps
against the instant the sample was switched off, never from how long the test took. A
Prometheus that does not answer halts as well, until it answers.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from harness import (
    Cluster,
    ControllerProcess,
    JobWatcher,
    Nodes,
    condition,
    daemonjob,
    holds,
    job_finished,
    job_node,
    metric_value,
    sleep,
    wait_for,
)

from daemonjob.testing.cluster import free_port
from daemonjob.testing.prometheus import LocalPrometheus

ALERT = "DaemonJobE2EHalt"
RULES = [
    {
        "name": "e2e-halt",
        "rules": [
            {"alert": ALERT, "expr": "e2e_halt_flag == 1", "for": "0s", "labels": {"severity": "critical"}},
            {"alert": "DaemonJobE2EOther", "expr": "vector(1)", "for": "0s", "labels": {"severity": "critical"}},
        ],
    }
]


class FlagTarget:
    """A scrape target with one gauge, e2e_halt_flag, that the test switches."""

    def __init__(self) -> None:
        self.value = 0
        target = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = f"# TYPE e2e_halt_flag gauge\ne2e_halt_flag {target.value}\n".encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> FlagTarget:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)


@pytest.fixture
def flag() -> Iterator[FlagTarget]:
    with FlagTarget() as target:
        yield target


@pytest.fixture
def prometheus(tmp_path: Path, flag: FlagTarget) -> Iterator[LocalPrometheus]:
    prom = LocalPrometheus(
        tmp_path / "prometheus",
        extra_rule_groups=RULES,
        extra_scrape_configs=[{"job_name": "flag", "static_configs": [{"targets": [flag.address]}]}],
    )
    with prom:
        yield prom


def _firing(prom: LocalPrometheus, name: str) -> bool:
    return any(a["state"] == "firing" for a in prom.alerts(name))


def _created(job: dict[str, Any]) -> datetime:
    return datetime.strptime(job["metadata"]["creationTimestamp"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)


def test_no_new_node_starts_while_a_matching_alert_fires_across_a_restart(
    api: Cluster,
    nodes: Nodes,
    group: str,
    flag: FlagTarget,
    prometheus: LocalPrometheus,
    spawn_controller: Callable[..., ControllerProcess],
) -> None:
    names = nodes(3)
    controller = spawn_controller(extra_args=["--prometheus-url", prometheus.url, "--prometheus-poll-interval", "1"])
    wait_for(lambda: _firing(prometheus, "DaemonJobE2EOther"), 60, "the other alert to fire", interval=0.5)
    halt = [{"alertname": ALERT, "severity": "critical"}]

    with JobWatcher(api.kube, api.namespace, "guarded") as watcher:
        api.apply(daemonjob("guarded", group, sleep(15), maxParallel=1, rollout={"haltOnAlerts": halt}))
        wait_for(
            lambda: api.job_nodes("guarded") == [names[0]],
            60,
            "the first node to start (the other alert does not match)",
            describe=lambda: api.job_nodes("guarded"),
        )

        flag.value = 1  # the alert fires while the first node's Job runs
        wait_for(lambda: _firing(prometheus, ALERT), 60, f"{ALERT} to fire", interval=0.5)
        dj = api.wait_status(
            "guarded",
            lambda d: condition(d, "Reconciling").get("reason") == "HaltedByAlerts",
            "Reconciling HaltedByAlerts",
        )
        message = condition(dj, "Reconciling")["message"]
        assert f"{ALERT}{{" in message and "DaemonJobE2EOther" not in message, message
        # the running Job is not stopped: it finishes, and nothing starts after it
        wait_for(lambda: job_finished(api.jobs("guarded")[0]) == "Complete", 60, "the first node's Job to finish")

        controller.restart()  # while halted: the new process reads the alerts afresh, nothing starts meanwhile
        wait_for(
            lambda: (
                metric_value(controller.metrics(), "daemonjob_rollout_gate", {"name": "guarded", "gate": "alerts"})
                == 1.0
            ),
            60,
            "the restarted controller to hold the alerts gate",
            interval=0.5,
        )
        dj = api.wait_status(
            "guarded",
            lambda d: condition(d, "Reconciling").get("reason") == "HaltedByAlerts",
            "Reconciling HaltedByAlerts after the restart",
        )
        holds(
            lambda: api.job_nodes("guarded") == [names[0]],
            3,
            "no new node while the alert fires",
            describe=lambda: api.job_nodes("guarded"),
        )

        switched_off = datetime.now(timezone.utc).replace(microsecond=0)  # creationTimestamp has whole seconds
        flag.value = 0
        api.wait_complete("guarded", 3, timeout=120)

    by_node = {job_node(j): j for j in api.jobs("guarded")}
    for node in names[1:]:
        assert _created(by_node[node]) >= switched_off, f"{node} started while {ALERT} fired"
    assert all(n == 1 for n in Counter(c.node for c in watcher.created).values()), watcher.summary()
    assert not watcher.deleted, watcher.summary()


def test_an_unreachable_prometheus_halts_until_it_answers(
    api: Cluster, nodes: Nodes, group: str, tmp_path: Path, spawn_controller: Callable[..., ControllerProcess]
) -> None:
    names = nodes(2)
    port = free_port()  # nothing listens there yet
    spawn_controller(extra_args=["--prometheus-url", f"http://127.0.0.1:{port}", "--prometheus-poll-interval", "1"])
    api.apply(daemonjob("blind", group, rollout={"haltOnAlerts": [{"alertname": ALERT}]}))
    dj = api.wait_status(
        "blind",
        lambda d: "did not answer" in (condition(d, "Reconciling").get("message") or ""),
        "Reconciling AlertsUnknown, Prometheus not answering",
    )
    assert condition(dj, "Reconciling")["reason"] == "AlertsUnknown"
    assert f"127.0.0.1:{port}" in condition(dj, "Reconciling")["message"]
    holds(
        lambda: api.job_nodes("blind") == [],
        3,
        "no node while the alerts are unknown",
        describe=lambda: api.job_nodes("blind"),
    )

    answering = datetime.now(timezone.utc).replace(microsecond=0)
    with LocalPrometheus(tmp_path / "prometheus", port=port):
        api.wait_complete("blind", 2)
    assert all(_created(j) >= answering for j in api.jobs("blind")), "a node started before Prometheus answered"
    assert sorted(api.job_nodes("blind")) == names
