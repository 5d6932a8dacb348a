"""A request read whole on a pooled connection, or several sent together: answers, reuse, and
failures in urllib3's types."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator

import pytest
import urllib3
from urllib3.exceptions import ProtocolError, ReadTimeoutError

from daemonjob.machinery.client.exchange import exchange, exchange_pipelined

Serve = Callable[[socket.socket], None]


def ok(body: bytes = b'{"kind":"Job"}') -> bytes:
    return b"HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)


def receive(conn: socket.socket) -> bytes:
    data = conn.recv(65536)
    if not data:
        raise OSError("the client closed the connection")
    return data


def read_request(conn: socket.socket, pending: bytearray) -> bytes:
    """The next request on the connection; bytes read past it (pipelined requests) stay in `pending`."""
    while b"\r\n\r\n" not in pending:
        pending += receive(conn)
    head, _, rest = bytes(pending).partition(b"\r\n\r\n")
    length = next(
        (int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")), 0
    )
    while len(rest) < length:
        more = receive(conn)
        rest += more
        pending += more
    request = head + b"\r\n\r\n" + rest[:length]
    del pending[: len(request)]
    return request


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
            pending = bytearray()
            try:
                while True:
                    seen.append(read_request(conn, pending))
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


def test_a_chunked_answer_is_joined_and_the_connection_reused(server):
    chunked = b'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{"a":\r\n3\r\n1}\n\r\n0\r\n\r\n'
    pool, _, accepted = server(lambda conn: conn.sendall(chunked))
    for _ in range(2):
        assert exchange(pool, "GET", "/api/v1/pods", None, {}, 5) == (200, b'{"a":1}\n')
    assert accepted[0] == 1


def test_an_answer_without_length_ends_when_the_server_closes(server):
    def serve(conn: socket.socket) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\n\r\nall of it")
        conn.shutdown(socket.SHUT_RDWR)
        raise OSError("closed")

    pool, _, accepted = server(serve)
    assert exchange(pool, "GET", "/", None, {}, 5) == (200, b"all of it")
    assert exchange(pool, "GET", "/", None, {}, 5) == (200, b"all of it")
    assert accepted[0] == 2  # that connection could carry nothing more


def test_connection_close_is_honoured(server):
    pool, _, accepted = server(
        lambda conn: conn.sendall(b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{}")
    )
    assert exchange(pool, "GET", "/", None, {}, 5) == (200, b"{}")
    assert exchange(pool, "GET", "/", None, {}, 5) == (200, b"{}")
    assert accepted[0] == 2


def test_the_request_head_is_what_http_client_would_write(server):
    pool, seen, _ = server(lambda conn: conn.sendall(ok()))
    exchange(pool, "POST", "/apis/x?dryRun=All", None, {"Authorization": "Bearer t"}, 5)
    head = seen[0].split(b"\r\n")
    port = pool.port
    assert head[0] == b"POST /apis/x?dryRun=All HTTP/1.1"
    assert b"Host: 127.0.0.1:%d" % port in head and b"Accept-Encoding: identity" in head
    assert b"Authorization: Bearer t" in head and b"Content-Length: 0" in head  # a bodiless POST, as http.client
    exchange(pool, "GET", "/x", None, {}, 5)
    assert not any(line.lower().startswith(b"content-length") for line in seen[1].split(b"\r\n"))


def test_a_line_break_in_a_header_is_refused_before_anything_is_sent(server):
    pool, seen, _ = server(lambda conn: conn.sendall(ok()))
    with pytest.raises(ValueError, match="line break"):
        exchange(pool, "GET", "/", None, {"Authorization": "Bearer t\r\nX-Evil: 1"}, 5)
    assert seen == []


def test_a_malformed_answer_is_a_protocol_error(server):
    pool, _, _ = server(lambda conn: conn.sendall(b"HTTP/1.1 abc nonsense\r\n\r\n"))
    with pytest.raises(ProtocolError):
        exchange(pool, "GET", "/", None, {}, 5)


BODIES = [b'{"n":1}', b'{"n":22}', b'{"n":333}']


def test_pipelined_requests_go_in_one_write_and_their_answers_come_back_in_order(server):
    replies = iter([ok(b'{"n":1}'), b'HTTP/1.1 409 Conflict\r\nContent-Length: 9\r\n\r\n{"c":409}', ok(b'{"n":3}')] * 2)
    pool, seen, accepted = server(lambda conn: conn.sendall(next(replies)))
    for _ in range(2):
        answers = exchange_pipelined(pool, "POST", "/apis/batch/v1/jobs", BODIES, {"Accept": "application/json"}, 5)
        assert answers == [(201, b'{"n":1}'), (409, b'{"c":409}'), (201, b'{"n":3}')]
    assert accepted[0] == 1  # the connection carried both batches
    assert [r.rsplit(b"\r\n\r\n", 1)[1] for r in seen] == BODIES * 2
    assert all(b"Content-Length: %d" % len(b) in r for r, b in zip(seen, BODIES * 2, strict=True))


def test_requests_left_unanswered_when_the_server_closes_each_get_the_error(server):
    answered = [0]

    def serve(conn: socket.socket) -> None:
        answered[0] += 1
        if answered[0] == 2:
            conn.sendall(b"HTTP/1.1 201 Created\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{}")
            conn.shutdown(socket.SHUT_RDWR)
            raise OSError("closed")
        conn.sendall(ok())

    pool, _, accepted = server(serve)
    answers = exchange_pipelined(pool, "POST", "/x", BODIES, {}, 5)
    assert answers[:2] == [(201, b'{"kind":"Job"}'), (201, b"{}")]
    assert isinstance(answers[2], ProtocolError)
    assert exchange(pool, "GET", "/", None, {}, 5)[0] == 201  # a new connection
    assert accepted[0] == 2


def test_a_server_that_stops_answering_times_out_the_requests_left(server):
    answered = [0]

    def serve(conn: socket.socket) -> None:
        answered[0] += 1
        if answered[0] == 1:
            conn.sendall(ok())
        else:
            stop_after(1.0)

    pool, _, _ = server(serve)
    answers = exchange_pipelined(pool, "POST", "/x", BODIES, {}, 0.3)
    assert answers[0] == (201, b'{"kind":"Job"}')
    assert all(isinstance(a, ReadTimeoutError) for a in answers[1:])


def test_a_refused_header_sends_none_of_the_requests(server):
    pool, seen, _ = server(lambda conn: conn.sendall(ok()))
    with pytest.raises(ValueError, match="line break"):
        exchange_pipelined(pool, "POST", "/x", BODIES, {"Authorization": "t\r\nX-Evil: 1"}, 5)
    assert seen == []


def test_a_server_that_takes_one_request_a_connection_gets_creates_one_at_a_time_from_then_on(server):
    from kubernetes.client import Configuration

    from daemonjob.machinery.client.kube import Kube

    def serve(conn: socket.socket) -> None:  # a proxy that answers one request and closes
        conn.sendall(b"HTTP/1.1 201 Created\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{}")
        conn.shutdown(socket.SHUT_RDWR)
        raise OSError("closed")

    pool, seen, _ = server(serve)
    kube = Kube(Configuration(host=f"http://127.0.0.1:{pool.port}"))
    first = kube.create_pipelined("/apis/batch/v1/namespaces/ns/jobs", [{"n": 1}, {"n": 2}, {"n": 3}])
    assert first[0] is None and all(isinstance(e, ProtocolError) for e in first[1:])  # outcome unknown
    assert not kube.pipelining
    assert kube.create_pipelined("/apis/batch/v1/namespaces/ns/jobs", [{"n": 2}, {"n": 3}]) == [None, None]
    assert len(seen) == 3  # the first batch's first, then one at a time


def test_without_successes_a_2xx_answers_body_is_read_past_and_an_errors_kept(server):
    replies = iter([ok(b'{"big":"object"}'), b'HTTP/1.1 409 Conflict\r\nContent-Length: 9\r\n\r\n{"c":409}'])
    pool, _, accepted = server(lambda conn: conn.sendall(next(replies)))
    answers = exchange_pipelined(pool, "POST", "/x", BODIES[:2], {}, 5, successes=False)
    assert answers == [(201, b""), (409, b'{"c":409}')]
    assert accepted[0] == 1


def test_a_small_read_size_reads_a_large_answer_whole(server):
    pool, _, _ = server(lambda conn: conn.sendall(ok(b"x" * 100_000)))
    assert exchange(pool, "POST", "/x", b"{}", {}, 5, read_size=1024) == (201, b"x" * 100_000)
