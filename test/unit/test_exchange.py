"""A request read whole on a pooled connection: answers, reuse, and failures in urllib3's types."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator

import pytest
import urllib3
from urllib3.exceptions import ProtocolError, ReadTimeoutError

from daemonjob.machinery.exchange import exchange

Serve = Callable[[socket.socket], None]


def ok(body: bytes = b'{"kind":"Job"}') -> bytes:
    return b"HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)


def receive(conn: socket.socket) -> bytes:
    data = conn.recv(65536)
    if not data:
        raise OSError("the client closed the connection")
    return data


def read_request(conn: socket.socket) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        data += receive(conn)
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        (int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")), 0
    )
    while len(body) < length:
        body += receive(conn)
    return head + b"\r\n\r\n" + body


@pytest.fixture
def server() -> Iterator[Callable[[Serve], tuple[urllib3.HTTPConnectionPool, list[bytes], list[int]]]]:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    listener.settimeout(0.05)  # accept wakes up to see the test is over
    stop = threading.Event()
    threads: list[threading.Thread] = []
    pools: list[urllib3.HTTPConnectionPool] = []

    def start(serve: Serve) -> tuple[urllib3.HTTPConnectionPool, list[bytes], list[int]]:
        seen: list[bytes] = []
        accepted = [0]

        def run() -> None:
            while not stop.is_set():
                try:
                    conn, _ = listener.accept()
                except TimeoutError:
                    continue
                except OSError:
                    return
                conn.settimeout(None)
                accepted[0] += 1
                with conn:
                    serve_one(conn)

        def serve_one(conn: socket.socket) -> None:
            try:
                while True:
                    seen.append(read_request(conn))
                    serve(conn)
            except OSError:
                return

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        threads.append(thread)
        pool = urllib3.HTTPConnectionPool("127.0.0.1", listener.getsockname()[1], maxsize=2)
        pools.append(pool)
        return pool, seen, accepted

    yield start
    stop.set()
    for pool in pools:
        pool.close()
    listener.close()
    for thread in threads:
        thread.join(5)


def test_an_answer_is_read_whole_and_the_connection_reused(server):
    pool, seen, accepted = server(lambda conn: conn.sendall(ok()))
    for _ in range(3):
        assert exchange(pool, "POST", "/apis/batch/v1/jobs", b'{"a":1}', {"Content-Type": "application/json"}, 5) == (
            201,
            b'{"kind":"Job"}',
        )
    assert (accepted[0], len(seen)) == (1, 3)
    assert seen[0].endswith(b'\r\n\r\n{"a":1}') and b"Content-Length: 7" in seen[0]


def test_a_server_that_closes_mid_answer_is_a_protocol_error_and_the_next_request_reconnects(server):
    answers = iter([b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npartial", ok()])

    def serve(conn: socket.socket) -> None:
        conn.sendall(next(answers))
        conn.shutdown(socket.SHUT_RDWR)
        raise OSError("closed")

    pool, _, accepted = server(serve)
    with pytest.raises(ProtocolError):
        exchange(pool, "GET", "/", None, {}, 5)
    assert exchange(pool, "GET", "/", None, {}, 5)[0] == 201
    assert accepted[0] == 2


def stop_after(seconds: float) -> None:
    threading.Event().wait(seconds)


def test_a_server_that_never_answers_is_a_read_timeout(server):
    pool, _, _ = server(lambda conn: stop_after(1.0))
    with pytest.raises(ReadTimeoutError):
        exchange(pool, "GET", "/", None, {}, 0.3)


def test_an_error_answer_is_returned_not_raised(server):
    body = b'{"kind":"Status","code":409}'
    pool, _, _ = server(
        lambda conn: conn.sendall(b"HTTP/1.1 409 Conflict\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
    )
    assert exchange(pool, "PUT", "/x", b"{}", {}, 5) == (409, body)
