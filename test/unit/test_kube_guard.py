"""Per-call options of the API client that callers with a deadline or a fence rely on."""

from __future__ import annotations

import socket
import threading

import pytest
from kubernetes.client import Configuration

from daemonjob.machinery.client.kube import Kube


class Fenced(Exception):
    pass


class Limiter:
    def __init__(self, order: list[str]) -> None:
        self.order = order

    def accept(self) -> None:
        self.order.append("token")


def kube(order: list[str], sent: list[tuple[str, str, int]]) -> Kube:
    cfg = Configuration(host="http://127.0.0.1:9")  # nothing listens: a sent request fails
    return Kube(cfg, limiter=Limiter(order), on_request=lambda *info: sent.append(info))


def test_guard_runs_after_the_rate_limit_and_cancels_before_sending() -> None:
    order: list[str] = []
    sent: list[tuple[str, str, int]] = []

    def guard() -> None:
        order.append("guard")
        raise Fenced()

    client = kube(order, sent)
    for call in (
        lambda: client.create("/api/v1/namespaces/ns/events", {}, guard=guard),
        lambda: client.delete("/apis/batch/v1/namespaces/ns/jobs/j", guard=guard),
        lambda: client.patch("/apis/daemonjob.io/v1/namespaces/ns/daemonjobs/d/status", {}, guard=guard),
        lambda: client.put("/apis/coordination.k8s.io/v1/namespaces/ns/leases/l", {}, guard=guard),
    ):
        with pytest.raises(Fenced):
            call()
    assert order == ["token", "guard"] * 4
    assert sent == []  # nothing reached the wire


def test_creates_sent_together_take_a_token_each_then_the_guard_cancels_them_all() -> None:
    order: list[str] = []
    sent: list[tuple[str, str, int]] = []

    def guard() -> None:
        order.append("guard")
        raise Fenced()

    errors = kube(order, sent).create_pipelined("/apis/batch/v1/namespaces/ns/jobs", [{}, {}, {}], guard=guard)
    assert [type(e) for e in errors] == [Fenced] * 3
    assert order == ["token"] * 3 + ["guard"]
    assert sent == []


class Sink:
    """A TCP server that records the bytes of one connection (nothing is answered)."""

    def __init__(self) -> None:
        self.server = socket.socket()
        self.server.bind(("127.0.0.1", 0))
        self.server.listen(1)
        self.server.settimeout(1.5)  # a request cancelled before connecting never comes
        self.received: list[bytes] = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.getsockname()[1]}"

    def _serve(self) -> None:
        try:
            conn, _ = self.server.accept()
        except OSError:
            return
        conn.settimeout(1)
        try:
            while data := conn.recv(4096):
                self.received.append(data)
        except OSError:
            pass
        conn.close()

    def close(self) -> bytes:
        self.thread.join(5)
        self.server.close()
        return b"".join(self.received)


def test_a_passing_guard_lets_the_request_go() -> None:
    sink = Sink()
    checks: list[str] = []
    with pytest.raises(Exception):  # noqa: B017 - timeout or reset, as the socket closes; no answer: the sink closes after a second
        Kube(Configuration(host=sink.url)).create(
            "/api/v1/namespaces/ns/events", {}, request_timeout=3, guard=lambda: checks.append("check")
        )
    assert sink.close().startswith(b"POST /api/v1/namespaces/ns/events ")
    assert checks == ["check", "check"]  # after the rate limit, then at the first byte


def test_guard_is_checked_again_when_the_first_byte_is_written() -> None:
    """A fence that lapses between the first check and the send (a stopped process) stops the send."""
    sink = Sink()
    checks: list[str] = []

    def guard() -> None:  # holds at the first check, has lapsed at the second
        checks.append("check")
        if len(checks) > 1:
            raise Fenced()

    with pytest.raises(Fenced):
        Kube(Configuration(host=sink.url)).create(
            "/api/v1/namespaces/ns/events", {"a": 1}, guard=guard, request_timeout=2
        )
    assert sink.close() == b""  # not one byte of the request was written
    assert checks == ["check", "check"]


def test_creates_sent_together_are_checked_again_at_their_one_write() -> None:
    sink = Sink()
    checks: list[str] = []

    def guard() -> None:
        checks.append("check")
        if len(checks) > 1:
            raise Fenced()

    errors = Kube(Configuration(host=sink.url)).create_pipelined(
        "/apis/batch/v1/namespaces/ns/jobs", [{"a": 1}, {"a": 2}], guard=guard, request_timeout=2
    )
    assert [type(e) for e in errors] == [Fenced, Fenced]
    assert sink.close() == b""  # neither was written
    assert checks == ["check", "check"]


def test_creates_sent_together_leave_in_one_write_after_one_check_each_stage() -> None:
    sink = Sink()
    checks: list[str] = []
    errors = Kube(Configuration(host=sink.url)).create_pipelined(
        "/apis/batch/v1/namespaces/ns/jobs",
        [{"a": 1}, {"a": 2}],
        guard=lambda: checks.append("check"),
        request_timeout=3,
    )
    assert len(errors) == 2 and all(isinstance(e, Exception) for e in errors)  # no answer: the sink closes
    wire = sink.close()
    assert wire.count(b"POST /apis/batch/v1/namespaces/ns/jobs HTTP/1.1") == 2
    assert wire.endswith(b'{"a":2}') and b'{"a":1}POST ' in wire
    assert checks == ["check", "check"]
