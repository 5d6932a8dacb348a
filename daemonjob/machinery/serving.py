"""Small HTTP endpoints: /metrics and the health probes; over TLS, the admission webhook."""

from __future__ import annotations

import os
import socket
import ssl
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

Route = Callable[[], tuple[int, str, bytes]]  # -> (HTTP code, content type, body)
PostRoute = Callable[[bytes], tuple[int, str, bytes]]  # request body -> (HTTP code, content type, body)
READ_TIMEOUT = 10.0  # seconds a connection may take to send a request (TLS handshake included)
MAX_BODY = 7 * 1024 * 1024  # bytes of a POSTed body


class ReloadingTLS:
    """The server side of TLS from `tls.crt`/`tls.key` in a directory, reloaded when they change.

    Each new connection looks at the files' change times (two stat calls) and loads them again
    when they changed; a pair that does not load (a key replaced before its certificate) keeps
    the previous context until the next look.
    """

    def __init__(self, cert_dir: str | Path) -> None:
        self.cert_dir = Path(cert_dir)
        self._lock = threading.Lock()
        self._stamp: tuple[float, float] | None = None
        self._context: ssl.SSLContext | None = None
        self.problem: str | None = f"no certificate loaded from {self.cert_dir} yet"
        self.context()

    def context(self) -> ssl.SSLContext | None:
        crt, key = self.cert_dir / "tls.crt", self.cert_dir / "tls.key"
        try:
            stamp = (os.stat(crt).st_mtime, os.stat(key).st_mtime)
        except OSError as exc:
            if self._context is None:
                self.problem = f"no certificate in {self.cert_dir}: {exc.strerror}"
            return self._context
        with self._lock:
            if stamp != self._stamp:
                ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
                ctx.minimum_version = ssl.TLSVersion.TLSv1_2
                try:
                    ctx.load_cert_chain(crt, key)
                    self._context, self._stamp, self.problem = ctx, stamp, None
                except (ssl.SSLError, OSError) as exc:
                    if self._context is None:
                        self.problem = f"the certificate in {self.cert_dir} does not load: {exc}"
            return self._context


def parse_bind_address(address: str) -> tuple[str, int] | None:
    """controller-runtime's convention: ":8080" = all interfaces, "0" = disabled."""
    if address in ("0", ""):
        return None
    host, _, port = address.rpartition(":")
    if not port.isdigit():
        raise ValueError(f"bind address {address!r} is not [host]:port or 0")
    return (host.strip("[]") or "0.0.0.0", int(port))


class Server:
    """GET `routes` and POST `post_routes`; over TLS from `cert_dir` when given."""

    def __init__(self, address: tuple[str, int], routes: dict[str, Route], name: str,
                 post_routes: dict[str, PostRoute] | None = None, cert_dir: str | Path | None = None,
                 max_body: int = MAX_BODY):
        routes = dict(routes)
        posts = dict(post_routes or {})
        self.tls = ReloadingTLS(cert_dir) if cert_dir is not None else None

        class Handler(BaseHTTPRequestHandler):
            timeout = READ_TIMEOUT
            protocol_version = "HTTP/1.1" if posts else "HTTP/1.0"  # the API server keeps webhook connections

            def _answer(self, code: int, ctype: str, body: bytes) -> None:
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
                route = routes.get(self.path.split("?")[0])
                self._answer(*(route() if route else (404, "text/plain", b"not found\n")))

            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                route = posts.get(self.path.split("?")[0])
                try:
                    length = int(self.headers.get("Content-Length") or "")
                except ValueError:
                    self.close_connection = True
                    return self._answer(411, "text/plain", b"Content-Length required\n")
                if length > max_body or length < 0:
                    self.close_connection = True
                    return self._answer(413, "text/plain", f"request body over {max_body} bytes\n".encode())
                body = self.rfile.read(length)
                self._answer(*(route(body) if route else (404, "text/plain", b"not found\n")))

            def log_message(self, *args: object) -> None:
                pass

        tls = self.tls

        class HTTPServer(ThreadingHTTPServer):
            def get_request(self) -> tuple[socket.socket, object]:
                conn, addr = super().get_request()
                if tls is None:
                    return conn, addr
                ctx = tls.context()
                if ctx is None:
                    conn.close()
                    raise OSError("no certificate to serve with")  # the connection is dropped, the server goes on
                # The handshake happens in the connection's thread, bounded by READ_TIMEOUT.
                return ctx.wrap_socket(conn, server_side=True, do_handshake_on_connect=False), addr

            def handle_error(self, request: object, client_address: object) -> None:
                pass  # a client that drops or fails its handshake is its own problem, not a log line

        self.httpd = HTTPServer(address, Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self._thread = threading.Thread(target=self.httpd.serve_forever, name=name, daemon=True)

    def start(self) -> "Server":
        self._thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def tls_problem(self) -> str | None:
        """Why this TLS server cannot serve (no loadable certificate yet), or None."""
        if self.tls is None:
            return None
        self.tls.context()
        return self.tls.problem


def metrics_route(registry: CollectorRegistry) -> Route:
    return lambda: (200, CONTENT_TYPE_LATEST, generate_latest(registry))


def check_route(check: Callable[[], str | None]) -> Route:
    """A probe: `check` returns None when healthy, else the reason."""
    def route() -> tuple[int, str, bytes]:
        problem = check()
        return (200, "text/plain", b"ok\n") if problem is None else (500, "text/plain", f"{problem}\n".encode())
    return route
