"""Per-call options of the API client that callers with a deadline or a fence rely on."""

from __future__ import annotations

import pytest
from kubernetes.client import Configuration

from daemonjob.machinery.kube import Kube


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
    for call in (lambda: client.create("/api/v1/namespaces/ns/events", {}, guard=guard),
                 lambda: client.delete("/apis/batch/v1/namespaces/ns/jobs/j", guard=guard),
                 lambda: client.patch("/apis/daemonjob.io/v1/namespaces/ns/daemonjobs/d/status", {}, guard=guard),
                 lambda: client.put("/apis/coordination.k8s.io/v1/namespaces/ns/leases/l", {}, guard=guard)):
        with pytest.raises(Fenced):
            call()
    assert order == ["token", "guard"] * 4
    assert sent == []  # nothing reached the wire


def test_a_passing_guard_lets_the_request_go() -> None:
    order: list[str] = []
    sent: list[tuple[str, str, int]] = []
    client = kube(order, sent)
    with pytest.raises(Exception):  # connection refused: it was sent
        client.create("/api/v1/namespaces/ns/events", {}, guard=lambda: order.append("guard"), request_timeout=2)
    assert order == ["token", "guard"] and sent == [("create", "events", 0)]
