"""Small HTTP endpoints: /metrics and the health probes; over TLS, the admission webhook.

Bounded so that no client can starve the probes or exhaust memory: an asyncio loop in one
thread holds every connection, a fixed pool of workers runs the routes; the first request
must arrive within `read_timeout` (TLS handshake included), a keep-alive connection may wait
`idle_timeout` for the next, bodies are limited to `max_body`, and beyond `max_connections`
the connection that has waited longest for a request is closed to make room. Threads: the
pool plus one, whatever the clients do.
"""

from __future__ import annotations

import asyncio
import http.client
import io
import socket
import ssl
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import structlog
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from daemonjob.machinery.tls import ReloadingTLS, TLSProvider

__all__ = [
    "Route",
    "PostRoute",
    "Filter",
    "ReloadingTLS",
    "TLSProvider",
    "Server",
    "parse_bind_address",
    "bind_socket",
    "metrics_route",
    "check_route",
    "READ_TIMEOUT",
    "IDLE_TIMEOUT",
    "MAX_BODY",
    "WORKERS",
    "MAX_CONNECTIONS",
]

log = structlog.get_logger("daemonjob.machinery.serving")

Route = Callable[[], tuple[int, str, bytes]]  # -> (HTTP code, content type, body)
PostRoute = Callable[[bytes], tuple[int, str, bytes]]  # request body -> (HTTP code, content type, body)
# (method, path, headers) -> None to go on, else the answer (401, 403...) given instead of the route's
Filter = Callable[[str, str, Mapping[str, str]], "tuple[int, str, bytes] | None"]
READ_TIMEOUT = 10.0  # seconds a connection may take to send a request (TLS handshake included)
IDLE_TIMEOUT = 90.0  # seconds a keep-alive connection may wait for its next request
MAX_BODY = 7 * 1024 * 1024  # bytes of a POSTed body
WORKERS = 4  # threads answering requests, per server
MAX_CONNECTIONS = 256  # open connections per server; beyond, the longest-idle one is closed


def parse_bind_address(address: str) -> tuple[str, int] | None:
    """controller-runtime's convention: ":8080" = every interface of both families, "0" = disabled.

    "[::1]:8080" and "0.0.0.0:8080" name one family; the host comes back without brackets
    ("" for every interface).
    """
    if address in ("0", ""):
        return None
    host, _, port = address.rpartition(":")
    if not port.isdigit() or (":" in host and not (host.startswith("[") and host.endswith("]"))):
        raise ValueError(f"bind address {address!r} is not [host]:port, [ipv6]:port or 0")
    return (host[1:-1] if host.startswith("[") else host, int(port))


def bind_socket(address: tuple[str, int]) -> socket.socket:
    """A listening socket; "" and "::" listen on both families where the host has IPv6 (as Go does)."""
    host, port = address
    if host in ("", "::"):
        if socket.has_ipv6 and socket.has_dualstack_ipv6():
            return socket.create_server(("::", port), family=socket.AF_INET6, dualstack_ipv6=True, backlog=128)
        if host == "":
            return socket.create_server(("0.0.0.0", port), backlog=128)
    family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
    return socket.create_server((host, port), family=family, backlog=128)


_REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    408: "Request Timeout",
    411: "Length Required",
    413: "Content Too Large",
    422: "Unprocessable Content",
    431: "Request Header Fields Too Large",
    500: "Internal Server Error",
    503: "Service Unavailable",
    505: "HTTP Version Not Supported",
}
MAX_HEAD = 64 * 1024  # bytes of a request line and its headers


class _BadRequest(Exception):
    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code


class _Conn:
    __slots__ = ("writer", "waiting_since")

    def __init__(self, writer: asyncio.StreamWriter):
        self.writer = writer
        self.waiting_since: float | None = time.monotonic()  # None while a request is being answered


class Server:
    """GET `routes` and POST `post_routes`; over TLS from `cert_dir` (or any `tls` provider) when given;
    `filter` sees each request first.

    An asyncio loop in one thread holds the connections (an idle or slow client costs a
    socket, not a thread); routes and the filter, which may block, run on `workers` threads.
    """

    def __init__(
        self,
        address: tuple[str, int],
        routes: dict[str, Route],
        name: str,
        post_routes: dict[str, PostRoute] | None = None,
        cert_dir: str | Path | None = None,
        max_body: int = MAX_BODY,
        *,
        filter: Filter | None = None,
        workers: int = WORKERS,
        max_connections: int = MAX_CONNECTIONS,
        read_timeout: float = READ_TIMEOUT,
        idle_timeout: float = IDLE_TIMEOUT,
        tls: TLSProvider | None = None,
    ):
        self.name = name
        self.routes, self.posts = dict(routes), dict(post_routes or {})
        self.max_body, self.filter = max_body, filter
        self.tls: TLSProvider | None = (
            tls if tls is not None else (ReloadingTLS(cert_dir) if cert_dir is not None else None)
        )
        self.read_timeout, self.idle_timeout = read_timeout, idle_timeout
        self.max_connections = max(1, max_connections)
        self._listener = bind_socket(address)
        self.port: int = self._listener.getsockname()[1]
        self._pool = ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix=name)
        self._conns: set[_Conn] = set()
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.base_events.Server | None = None
        self._started = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    # -- life --------------------------------------------------------------------------------------
    def start(self) -> Server:
        self._thread.start()
        self._started.wait(30)
        return self

    def stop(self) -> None:
        """Stop accepting, close every connection, end the threads."""
        if self._thread.is_alive():
            asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop)
            self._thread.join(30)
        self._pool.shutdown(wait=True, cancel_futures=True)  # a running route ends within its own timeouts
        self._listener.close()

    def tls_problem(self) -> str | None:
        """Why this TLS server cannot serve (no loadable certificate yet), or None."""
        if self.tls is None:
            return None
        self.tls.context()
        return self.tls.problem

    def open_connections(self) -> int:
        """Connections held now, waiting or being answered."""
        return len(self._conns)

    def _ssl_context(self) -> ssl.SSLContext | None:
        if self.tls is None:
            return None
        tls = self.tls
        base = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        base.minimum_version = ssl.TLSVersion.TLSv1_2

        def swap(sslobj: ssl.SSLObject, _server_name: str | None, _ctx: ssl.SSLContext) -> None:
            # Called for every handshake, with or without SNI: the current pair from the cert dir.
            current = tls.context()
            if current is not None:
                sslobj.context = current

        base.sni_callback = swap  # type: ignore[assignment]
        return base

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        # A client's broken connection is its own affair: logged at debug, never a traceback on stderr.
        self._loop.set_exception_handler(
            lambda _loop, ctx: log.debug("connection error", server=self.name, error=repr(ctx.get("exception")))
        )

        async def serve() -> None:
            self._server = await asyncio.start_server(
                self._client,
                sock=self._listener,
                ssl=self._ssl_context(),
                limit=MAX_HEAD,
                ssl_handshake_timeout=self.read_timeout if self.tls else None,
            )
            self._started.set()

        try:
            self._loop.run_until_complete(serve())
            self._loop.run_forever()
        finally:
            self._started.set()
            self._loop.run_until_complete(self._loop.shutdown_asyncgens())
            self._loop.close()

    async def _shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
        for conn in list(self._conns):
            conn.writer.transport.abort()
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._loop.stop()

    # -- one connection ---------------------------------------------------------------------------
    def _make_room(self, newest: _Conn) -> None:
        """Beyond max_connections, close the connection that has waited longest for a request."""
        while len(self._conns) > self.max_connections:
            waiting = [c for c in self._conns if c.waiting_since is not None and c is not newest]
            if not waiting:
                return
            oldest = min(waiting, key=lambda c: c.waiting_since or 0.0)
            self._conns.discard(oldest)
            oldest.writer.transport.abort()

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = _Conn(writer)
        self._conns.add(conn)
        self._make_room(conn)
        if len(self._conns) > self.max_connections:  # every other connection is being answered
            self._conns.discard(conn)
            writer.transport.abort()
            return
        timeout = self.read_timeout  # the first request must come promptly; later ones may idle
        try:
            while conn in self._conns:
                conn.waiting_since = time.monotonic()
                try:
                    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout)
                except asyncio.LimitOverrunError:
                    await self._write(writer, 431, "text/plain", b"request head too large\n", close=True)
                    return
                conn.waiting_since = None
                try:
                    method, path, headers, keep = _parse(head)
                    body = b""
                    if method == "POST":
                        body = await asyncio.wait_for(reader.readexactly(self._length(headers)), self.read_timeout)
                    code, ctype, payload = await asyncio.get_running_loop().run_in_executor(
                        self._pool, self._answer, method, path, headers, body
                    )
                except _BadRequest as exc:
                    await self._write(writer, exc.code, "text/plain", f"{exc}\n".encode(), close=True)
                    return
                await self._write(writer, code, ctype, payload, close=not keep)
                if not keep:
                    return
                timeout = self.idle_timeout
        except (
            asyncio.TimeoutError,
            asyncio.IncompleteReadError,
            ConnectionError,
            ssl.SSLError,
            OSError,
            asyncio.CancelledError,
        ):
            pass  # the connection ends; on CancelledError the server is stopping
        finally:
            self._conns.discard(conn)
            writer.transport.abort() if writer.transport.is_closing() else writer.close()

    def _length(self, headers: http.client.HTTPMessage) -> int:
        if headers.get("Transfer-Encoding"):
            raise _BadRequest(411, "Content-Length required (no chunked bodies)")
        try:
            length = int(headers.get("Content-Length") or "")
        except ValueError:
            raise _BadRequest(411, "Content-Length required") from None
        if length < 0 or length > self.max_body:
            raise _BadRequest(413, f"request body over {self.max_body} bytes")
        return length

    def _answer(self, method: str, path: str, headers: http.client.HTTPMessage, body: bytes) -> tuple[int, str, bytes]:
        """On a worker: the filter, then the route (a failing route is a 500, never a dead server)."""
        get, post = self.routes.get(path), self.posts.get(path)
        if (get if method == "GET" else post) is None:
            if get is not None or post is not None:
                return 405, "text/plain", b"method not allowed\n"
            return 404, "text/plain", b"not found\n"
        try:
            if self.filter is not None and (refused := self.filter(method, path, headers)) is not None:
                return refused
            return get() if method == "GET" else post(body)  # type: ignore[misc]
        except Exception as exc:
            return 500, "text/plain", f"{type(exc).__name__}\n".encode()

    async def _write(self, writer: asyncio.StreamWriter, code: int, ctype: str, body: bytes, close: bool) -> None:
        head = (
            f"HTTP/1.1 {code} {_REASONS.get(code, 'Unknown')}\r\nContent-Type: {ctype}\r\n"
            f"Content-Length: {len(body)}\r\n" + ("Connection: close\r\n" if close else "") + "\r\n"
        )
        writer.write(head.encode("latin-1") + body)
        await asyncio.wait_for(writer.drain(), self.read_timeout)


def _parse(head: bytes) -> tuple[str, str, http.client.HTTPMessage, bool]:
    """Request line and headers; (method, path, headers, keep-alive)."""
    line, _, rest = head.partition(b"\r\n")
    parts = line.decode("latin-1").split()
    if len(parts) != 3 or not parts[2].startswith("HTTP/"):
        raise _BadRequest(400, "malformed request line")
    method, target, version = parts
    if version not in ("HTTP/1.0", "HTTP/1.1"):
        raise _BadRequest(505, "HTTP/1.0 or HTTP/1.1 only")
    if method not in ("GET", "POST"):
        raise _BadRequest(405, "GET or POST only")
    try:
        headers = http.client.parse_headers(io.BytesIO(rest))
    except http.client.HTTPException:
        raise _BadRequest(431, "too many or too long headers") from None
    connection = (headers.get("Connection") or "").lower()
    keep = version == "HTTP/1.1" and "close" not in connection
    return method, target.split("?")[0], headers, keep


def metrics_route(registry: CollectorRegistry) -> Route:
    return lambda: (200, CONTENT_TYPE_LATEST, generate_latest(registry))


def check_route(check: Callable[[], str | None]) -> Route:
    """A probe: `check` returns None when healthy, else the reason."""

    def route() -> tuple[int, str, bytes]:
        problem = check()
        return (200, "text/plain", b"ok\n") if problem is None else (500, "text/plain", f"{problem}\n".encode())

    return route
