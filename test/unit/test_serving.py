"""The HTTP servers stay bounded whatever clients do, bind both address families, reload TLS."""

from __future__ import annotations

import http.client
import socket
import ssl
import threading
from pathlib import Path

import pytest

from daemonjob.machinery.server import certs
from daemonjob.machinery.server.listen import parse_bind_address
from daemonjob.machinery.server.serving import Server, check_route


def _probe(port: int, host: str = "127.0.0.1", path: str = "/healthz") -> tuple[int, bytes]:
    conn = http.client.HTTPConnection(host, port, timeout=30)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


@pytest.fixture
def probes():
    server = Server(
        ("127.0.0.1", 0),
        {"/healthz": check_route(lambda: None)},
        "probes",
        post_routes={"/echo": lambda body: (200, "application/octet-stream", body)},
        max_body=1024,
        workers=4,
        max_connections=64,
    ).start()
    yield server
    server.stop()


def test_thousand_idle_connections_leave_probes_answering_and_threads_bounded(probes):
    before = threading.active_count()
    idle = []
    try:
        for _ in range(1000):
            idle.append(socket.create_connection(("127.0.0.1", probes.port), timeout=30))
        half = [s for s in idle[::2]]
        for s in half:  # half of them start a request and never finish it
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        for _ in range(20):
            assert _probe(probes.port) == (200, b"ok\n")
        # the loop's thread was there already; at most the 4 workers come on top, whatever the clients do
        assert threading.active_count() <= before + 4
        assert probes.open_connections() <= 64
    finally:
        for s in idle:
            s.close()
    assert _probe(probes.port) == (200, b"ok\n")


def test_keep_alive_and_post(probes):
    conn = http.client.HTTPConnection("127.0.0.1", probes.port, timeout=30)
    for n in range(3):
        conn.request("POST", "/echo", body=b"x" * (n + 1))
        resp = conn.getresponse()
        assert (resp.status, resp.read()) == (200, b"x" * (n + 1))
    conn.close()


@pytest.mark.parametrize(
    "request_bytes, code",
    [
        (b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 1025\r\n\r\n", b"413"),
        (b"POST /echo HTTP/1.1\r\nHost: x\r\n\r\n", b"411"),
        (b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n", b"413"),
        (b"GET /healthz HTTP/1.1\r\nHost: x\r\n" + b"X-Long: " + b"a" * 70000 + b"\r\n\r\n", b"431"),
        (b"BREW /healthz HTTP/1.1\r\n\r\n", b"405"),
        (b"GET /healthz HTTP/9.9\r\n\r\n", b"505"),
        (b"nonsense\r\n\r\n", b"400"),
        (b"GET /nowhere HTTP/1.1\r\nHost: x\r\n\r\n", b"404"),
    ],
)
def test_malformed_or_oversized_requests_get_4xx_and_the_server_goes_on(probes, request_bytes, code):
    with socket.create_connection(("127.0.0.1", probes.port), timeout=30) as s:
        s.sendall(request_bytes)
        assert s.recv(100).split(b" ")[1] == code
    assert _probe(probes.port) == (200, b"ok\n")


def test_binds_ipv6_loopback():
    server = Server(parse_bind_address("[::1]:0"), {"/healthz": check_route(lambda: None)}, "v6").start()
    try:
        assert _probe(server.port, host="::1") == (200, b"ok\n")
    finally:
        server.stop()


def test_all_interfaces_binds_both_families_where_the_host_has_them():
    server = Server(parse_bind_address(":0"), {"/healthz": check_route(lambda: None)}, "any").start()
    try:
        assert _probe(server.port, host="127.0.0.1") == (200, b"ok\n")
        if socket.has_dualstack_ipv6():
            assert _probe(server.port, host="::1") == (200, b"ok\n")
    finally:
        server.stop()


@pytest.mark.parametrize(
    "address, parsed",
    [
        (":8080", ("", 8080)),
        ("[::]:8080", ("::", 8080)),
        ("0.0.0.0:8080", ("0.0.0.0", 8080)),
        ("[::1]:9", ("::1", 9)),
        ("127.0.0.1:1", ("127.0.0.1", 1)),
        ("0", None),
        ("", None),
    ],
)
def test_parse_bind_address(address, parsed):
    assert parse_bind_address(address) == parsed


@pytest.mark.parametrize("address", ["::1:8080", "host:port", "8080:"])
def test_parse_bind_address_refuses(address):
    with pytest.raises(ValueError):
        parse_bind_address(address)


def test_tls_from_a_cert_dir_is_reloaded_without_restart(tmp_path: Path):
    server = Server(("127.0.0.1", 0), {"/healthz": check_route(lambda: None)}, "tls", cert_dir=tmp_path).start()
    try:
        assert "no certificate" in (server.tls_problem() or "")
        served = []
        for n in range(2):
            ca = certs.new_ca(f"ca-{n}", 3600)
            pair = certs.issue(ca, ["127.0.0.1"], 3600)
            (tmp_path / "tls.key").write_bytes(pair.key_pem)
            (tmp_path / "tls.crt").write_bytes(pair.cert_pem)
            assert server.tls_problem() is None
            ctx = ssl.create_default_context(cadata=ca.cert_pem.decode())
            conn = http.client.HTTPSConnection("127.0.0.1", server.port, context=ctx, timeout=30)
            conn.request("GET", "/healthz")
            assert conn.getresponse().status == 200
            served.append(ssl.DER_cert_to_PEM_cert(conn.sock.getpeercert(binary_form=True)).encode())
            conn.close()
        assert certs.issued_by(served[1], certs.split_pem(served[1])[0]) is False  # not self-signed
        assert served[0] != served[1]
    finally:
        server.stop()


def test_stop_with_open_connections_ends_every_thread_quietly(capfd):
    before = threading.active_count()
    server = Server(("127.0.0.1", 0), {"/healthz": check_route(lambda: None)}, "quiet").start()
    socks = [socket.create_connection(("127.0.0.1", server.port), timeout=30) for _ in range(5)]
    socks[0].sendall(b"GET /healthz HTTP/1.1\r\n")  # a request half sent
    assert _probe(server.port) == (200, b"ok\n")
    server.stop()
    for s in socks:
        s.close()
    assert threading.active_count() == before
    assert capfd.readouterr().err == ""
