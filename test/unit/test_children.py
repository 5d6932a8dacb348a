"""The test bed's loopback ports: out of the kernel's ephemeral range, apart per worker, and
never one something already listens on."""

from __future__ import annotations

import socket

import pytest

from daemonjob.testing import children


@pytest.fixture
def fresh_ports(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(children, "_ports", None)


def test_ports_are_below_the_ephemeral_range_and_distinct(fresh_ports: None) -> None:
    ports = [children.free_port() for _ in range(50)]
    assert len(set(ports)) == 50
    assert max(ports) < children._ephemeral_start()


def test_each_worker_has_a_slice_of_its_own(fresh_ports: None, monkeypatch: pytest.MonkeyPatch) -> None:
    slices = []
    for worker in ("", "gw0", "gw1", "gw5"):
        monkeypatch.setenv("PYTEST_XDIST_WORKER", worker)
        monkeypatch.setattr(children, "_ports", None)
        port = children.free_port()
        slices.append(
            (port - (children._ephemeral_start() - children.PORT_SLICES * children.PORT_SLICE)) // children.PORT_SLICE
        )
    assert slices == [0, 1, 2, 6]


def test_a_port_in_use_is_passed_over(fresh_ports: None, monkeypatch: pytest.MonkeyPatch) -> None:
    free = children.free_port()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        monkeypatch.setattr(children, "_ports", iter([busy, free]))
        assert children.free_port() == free
