"""What a server reads of a request: nothing before the route, the method and the filter
agree; at most the route's own limit; never more at once than its budgets."""

from __future__ import annotations

import http.client
import socket
import threading
import time
from collections.abc import Iterator, Mapping

import pytest

from daemonjob.machinery.server.budget import Budget
from daemonjob.machinery.server.serving import Server, Upload, check_route

Answer = tuple[int, str, bytes]


def _echo(body: bytes) -> Answer:
    return 200, "application/octet-stream", body


def _head(path: str, length: int, method: str = "POST", extra: str = "") -> bytes:
    return f"{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Length: {length}\r\n{extra}\r\n".encode()


def _status(sock: socket.socket) -> bytes:
    """The status code of the answer on `sock` (it must come within the socket's timeout)."""
    data = sock.recv(4096)
    assert data.startswith(b"HTTP/1.1 "), data
    return data.split(b" ")[1]


def _get(port: int, path: str = "/healthz") -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


@pytest.fixture
def server() -> Iterator[Server]:
    def only_with_token(method: str, path: str, headers: Mapping[str, str]) -> Answer | None:
        if path == "/guarded" and headers.get("Authorization") != "Bearer yes":
            return 401, "text/plain", b"Unauthorized\n"
        return None

    s = Server(
        ("127.0.0.1", 0),
        {"/healthz": check_route(lambda: None)},
        "bodies",
        post_routes={
            "/small": Upload(_echo, 10),
            "/big": Upload(_echo, 1024),
            "/guarded": Upload(_echo, 1024),
        },
        filter=only_with_token,
        body_bytes=2048,
        handling_bytes=4096,
        read_timeout=10.0,
    ).start()
    yield s
    s.stop()


@pytest.mark.parametrize(
    "head, code",
    [
        (_head("/healthz", 10_000_000), b"405"),  # a POST to a GET route
        (_head("/nowhere", 10_000_000), b"404"),
        (_head("/healthz", 5, method="GET"), b"413"),  # a GET route reads no body
        (_head("/guarded", 1000), b"401"),  # the filter first
        (_head("/small", 11), b"413"),  # the route's own limit, not the largest one
    ],
)
def test_an_answer_that_needs_no_body_comes_before_any_body_is_sent(server: Server, head: bytes, code: bytes) -> None:
    with socket.create_connection(("127.0.0.1", server.port), timeout=3) as s:
        s.sendall(head)  # and never the body: the answer must not wait for it
        assert _status(s) == code
    assert _get(server.port) == (200, b"ok\n")


def test_each_route_takes_bodies_up_to_its_own_limit(server: Server) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    conn.request("POST", "/big", body=b"b" * 1024)
    resp = conn.getresponse()
    assert (resp.status, resp.read()) == (200, b"b" * 1024)
    conn.request("POST", "/small", body=b"s" * 10)  # the same connection: kept alive
    resp = conn.getresponse()
    assert (resp.status, resp.read()) == (200, b"s" * 10)
    conn.request("POST", "/guarded", body=b"g", headers={"Authorization": "Bearer yes"})
    assert conn.getresponse().status == 200
    conn.close()


def test_bodies_past_the_budget_are_refused_unread_and_others_are_answered(server: Server) -> None:
    slow = [socket.create_connection(("127.0.0.1", server.port), timeout=5) for _ in range(2)]
    try:
        for s in slow:  # two bodies of 1024 bytes started, not finished: the 2048 bytes are taken
            s.sendall(_head("/big", 1024) + b"x" * 100)
        deadline = time.monotonic() + 5
        while server.bodies.used() < 2048 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert server.bodies.used() == 2048
        with socket.create_connection(("127.0.0.1", server.port), timeout=3) as third:
            third.sendall(_head("/big", 1024))
            answer = third.recv(4096)
            assert answer.startswith(b"HTTP/1.1 429 ") and b"Retry-After: 1\r\n" in answer
        assert _get(server.port) == (200, b"ok\n")  # a request without a body is answered
        for s in slow:  # the bodies finish: answered, and their bytes given back
            s.sendall(b"x" * 924)
            assert _status(s) == b"200"
    finally:
        for s in slow:
            s.close()
    deadline = time.monotonic() + 5
    while server.bodies.used() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert server.bodies.used() == 0


def test_handling_waits_for_its_budget_and_gives_up_with_429() -> None:
    release = threading.Event()
    entered = threading.Event()

    def hold(body: bytes) -> Answer:
        entered.set()
        release.wait(10)
        return 200, "text/plain", b"done\n"

    s = Server(
        ("127.0.0.1", 0),
        {},
        "handling",
        post_routes={"/hold": Upload(hold, 100, memory_per_byte=10.0)},
        handling_bytes=1000,
        read_timeout=0.5,
    ).start()
    try:
        first = socket.create_connection(("127.0.0.1", s.port), timeout=5)
        first.sendall(_head("/hold", 100) + b"a" * 100)  # costs the whole handling budget
        assert entered.wait(5)
        with socket.create_connection(("127.0.0.1", s.port), timeout=5) as second:
            second.sendall(_head("/hold", 10) + b"b" * 10)
            assert _status(second) == b"429"  # waited read_timeout for room, then refused
        release.set()
        assert _status(first) == b"200"
        first.close()
        assert s.handling.used() == 0
    finally:
        release.set()
        s.stop()


def test_a_route_whose_largest_body_cannot_fit_the_budgets_is_refused_at_construction() -> None:
    with pytest.raises(ValueError, match="budgets"):
        Server(("127.0.0.1", 0), {}, "x", post_routes={"/p": Upload(_echo, 100, 10.0)}, handling_bytes=999)
    with pytest.raises(ValueError, match="budgets"):
        Server(("127.0.0.1", 0), {}, "x", post_routes={"/p": Upload(_echo, 100)}, body_bytes=99)


def test_budget_takes_gives_and_waits() -> None:
    budget = Budget(10)
    assert budget.try_take(6) and not budget.try_take(5) and budget.try_take(4)
    assert not budget.take(1, 0.05)  # full: waits, then gives up
    assert not budget.try_take(11) and not budget.take(11, 0.01)  # can never fit
    threading.Timer(0.1, budget.give, (6,)).start()
    assert budget.take(5, 5)  # woken when room is given back
    assert budget.used() == 9


def test_a_route_that_asks_is_given_the_clients_address() -> None:
    seen: list[str] = []

    def who(body: bytes, client: str) -> Answer:
        seen.append(client)
        return 200, "text/plain", client.encode()

    s = Server(("127.0.0.1", 0), {}, "clients", post_routes={"/who": Upload(who, 100, with_client=True)}).start()
    try:
        for source in ("127.0.0.1", "127.0.0.2"):
            with socket.create_connection(("127.0.0.1", s.port), timeout=10, source_address=(source, 0)) as sock:
                sock.sendall(_head("/who", 2) + b"{}")
                assert sock.recv(4096).endswith(source.encode())
    finally:
        s.stop()
    assert seen == ["127.0.0.1", "127.0.0.2"]
