"""Small HTTP endpoints: /metrics and the health probes."""

from __future__ import annotations

import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

Route = Callable[[], tuple[int, str, bytes]]  # -> (HTTP code, content type, body)


def parse_bind_address(address: str) -> tuple[str, int] | None:
    """controller-runtime's convention: ":8080" = all interfaces, "0" = disabled."""
    if address in ("0", ""):
        return None
    host, _, port = address.rpartition(":")
    if not port.isdigit():
        raise ValueError(f"bind address {address!r} is not [host]:port or 0")
    return (host.strip("[]") or "0.0.0.0", int(port))


class Server:
    def __init__(self, address: tuple[str, int], routes: dict[str, Route], name: str):
        routes = dict(routes)

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
                route = routes.get(self.path.split("?")[0])
                code, ctype, body = route() if route else (404, "text/plain", b"not found\n")
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(address, Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self._thread = threading.Thread(target=self.httpd.serve_forever, name=name, daemon=True)

    def start(self) -> "Server":
        self._thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def metrics_route(registry: CollectorRegistry) -> Route:
    return lambda: (200, CONTENT_TYPE_LATEST, generate_latest(registry))


def check_route(check: Callable[[], str | None]) -> Route:
    """A probe: `check` returns None when healthy, else the reason."""
    def route() -> tuple[int, str, bytes]:
        problem = check()
        return (200, "text/plain", b"ok\n") if problem is None else (500, "text/plain", f"{problem}\n".encode())
    return route
