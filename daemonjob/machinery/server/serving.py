"""Small HTTP endpoints: /metrics and the health probes; over TLS, the admission webhook.

Bounded so that no client can starve the probes or exhaust memory: an asyncio loop in one
thread holds every connection, a fixed pool of workers runs the routes; the first request
must arrive within `read_timeout` (TLS handshake included), a keep-alive connection may wait
`idle_timeout` for the next, and beyond `max_connections` the connection that has waited
longest for a request is closed to make room. Threads: the pool plus one, whatever the
clients do.

Bodies: the route, the method and the filter (authentication) are checked on the request's
head, before a byte of its body is read; GET routes read none, a POST route (`Upload`) at
most its own `max_bytes`. Every body in flight takes its size from the server's
`body_bytes` budget before it is read and its handling cost (size times the route's
`memory_per_byte`, what parsing it may take) from `handling_bytes` before its route runs;
a body that does not fit is answered 429 unread, as the API server's max-in-flight does.
So a server's memory for requests is at most the two budgets plus `max_connections` small
read buffers, whatever the clients send.
"""

from __future__ import annotations

import asyncio
import ssl
import threading
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import structlog

from daemonjob.machinery.server.budget import Budget
from daemonjob.machinery.server.dispatch import Dispatch, check_budgets
from daemonjob.machinery.server.listen import bind_socket
from daemonjob.machinery.server.requesthead import MAX_HEAD, REASONS, BadRequest
from daemonjob.machinery.server.routes import (
    MAX_BODY,
    ClientPostRoute,
    Filter,
    PostRoute,
    Route,
    Upload,
    check_route,
    metrics_route,
)
from daemonjob.machinery.server.tls import ReloadingTLS, TLSProvider

__all__ = [
    "Route",
    "PostRoute",
    "ClientPostRoute",
    "Upload",
    "Filter",
    "ReloadingTLS",
    "TLSProvider",
    "Server",
    "metrics_route",
    "check_route",
    "READ_TIMEOUT",
    "IDLE_TIMEOUT",
    "MAX_BODY",
    "WORKERS",
    "MAX_CONNECTIONS",
    "BODY_BYTES",
    "HANDLING_BYTES",
]

log = structlog.get_logger("daemonjob.machinery.server.serving")

READ_TIMEOUT = 10.0  # seconds a connection may take to send a request (TLS handshake included)
IDLE_TIMEOUT = 90.0  # seconds a keep-alive connection may wait for its next request
WORKERS = 4  # threads answering requests, per server
MAX_CONNECTIONS = 256  # open connections per server; beyond, the longest-idle one is closed
BODY_BYTES = 8 * 1024 * 1024  # bytes of request bodies held at once, per server
HANDLING_BYTES = 8 * 1024 * 1024  # bytes the routes may spend handling bodies at once, per server


class _Conn:
    __slots__ = ("writer", "waiting_since")

    def __init__(self, writer: asyncio.StreamWriter):
        self.writer = writer
        self.waiting_since: float | None = time.monotonic()  # None while a request is being answered


class Server:
    """GET `routes` and POST `post_routes` (a bare handler takes bodies of up to `max_body`);
    over TLS from `cert_dir` (or any `tls` provider) when given, and with `client_ca` (PEM, with
    `cert_dir`) only for clients presenting a certificate it signed; `filter` sees each
    request's head first. ValueError if a route's largest body cannot fit the budgets.

    An asyncio loop in one thread holds the connections (an idle or slow client costs a
    socket, not a thread); routes and the filter, which may block, run on `workers` threads.
    """

    def __init__(
        self,
        address: tuple[str, int],
        routes: dict[str, Route],
        name: str,
        post_routes: Mapping[str, PostRoute | Upload] | None = None,
        cert_dir: str | Path | None = None,
        max_body: int = MAX_BODY,
        *,
        filter: Filter | None = None,
        workers: int = WORKERS,
        max_connections: int = MAX_CONNECTIONS,
        read_timeout: float = READ_TIMEOUT,
        idle_timeout: float = IDLE_TIMEOUT,
        tls: TLSProvider | None = None,
        client_ca: str | Path | None = None,
        body_bytes: int = BODY_BYTES,
        handling_bytes: int = HANDLING_BYTES,
    ):
        self.name = name
        self.routes = dict(routes)
        self.posts = {
            path: r if isinstance(r, Upload) else Upload(r, max_body) for path, r in (post_routes or {}).items()
        }
        self.filter = filter
        self.bodies, self.handling = Budget(body_bytes), Budget(handling_bytes)
        check_budgets(name, self.posts, self.bodies, self.handling)
        self.tls: TLSProvider | None = (
            tls if tls is not None else (ReloadingTLS(cert_dir, client_ca) if cert_dir is not None else None)
        )
        self.client_ca = client_ca
        self.read_timeout, self.idle_timeout = read_timeout, idle_timeout
        self.max_connections = max(1, max_connections)
        self._listener = bind_socket(address)
        self.port: int = self._listener.getsockname()[1]
        self._pool = ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix=name)
        self._dispatch = Dispatch(self.routes, self.posts, filter, self.bodies, self.handling, self._pool, read_timeout)
        self._conns: set[_Conn] = set()
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.base_events.Server | None = None
        self._tls_context: ssl.SSLContext | None = None
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
        if self.client_ca is not None:
            # The handshake keeps this context's verify mode; the CAs are the swapped-in
            # context's (reloaded with the files), so one that does not load here refuses all.
            base.verify_mode = ssl.CERT_REQUIRED

        def swap(sslobj: ssl.SSLObject, _server_name: str | None, _ctx: ssl.SSLContext) -> None:
            # Called for every handshake, with or without SNI: the current pair from the cert dir.
            current = tls.context()
            if current is not None:
                sslobj.context = current

        base.sni_callback = swap
        return base

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        # A client's broken connection is its own affair: logged at debug, never a traceback on stderr.
        self._loop.set_exception_handler(
            lambda _loop, ctx: log.debug("connection error", server=self.name, error=repr(ctx.get("exception")))
        )

        async def serve() -> None:
            # TLS is started per connection once it has a place (start_tls), not by the
            # listener: a connection beyond max_connections is closed before its handshake,
            # so it never holds TLS buffers.
            self._tls_context = self._ssl_context()
            self._server = await asyncio.start_server(self._client, sock=self._listener, limit=MAX_HEAD)
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
        peer = writer.get_extra_info("peername")
        client = str(peer[0]) if isinstance(peer, tuple) and peer else ""
        try:
            if self._tls_context is not None:
                raw = writer.transport
                try:
                    await writer.start_tls(self._tls_context, ssl_handshake_timeout=self.read_timeout)
                except AttributeError:  # asyncio (3.11) trips on the missing transport just below
                    pass
                if writer.transport is None:  # the client left during the handshake: asyncio gives no transport
                    writer._transport = raw  # for the writer's own clean-up
                    return
                # the TLS layer buffers at most what the reader does (asyncio's default: 256 KiB)
                tls_transport: Any = writer.transport  # asyncio's TLS transport: its read limits are its own
                tls_transport.set_read_buffer_limits(high=MAX_HEAD)
            while conn in self._conns:
                conn.waiting_since = time.monotonic()
                try:
                    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout)
                except asyncio.LimitOverrunError:
                    await self._write(writer, 431, "text/plain", b"request head too large\n", close=True)
                    return
                conn.waiting_since = None
                try:
                    code, ctype, payload, keep = await self._dispatch.answer(reader, head, client)
                except BadRequest as exc:
                    extra = {} if exc.retry_after is None else {"Retry-After": str(exc.retry_after)}
                    await self._write(writer, exc.code, "text/plain", f"{exc}\n".encode(), close=True, extra=extra)
                    writer.transport.abort()  # a body may be on its way: not one more byte of it read
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

    async def _write(
        self,
        writer: asyncio.StreamWriter,
        code: int,
        ctype: str,
        body: bytes,
        close: bool,
        extra: Mapping[str, str] | None = None,
    ) -> None:
        head = (
            f"HTTP/1.1 {code} {REASONS.get(code, 'Unknown')}\r\nContent-Type: {ctype}\r\n"
            f"Content-Length: {len(body)}\r\n"
            + "".join(f"{k}: {v}\r\n" for k, v in (extra or {}).items())
            + ("Connection: close\r\n" if close else "")
            + "\r\n"
        )
        writer.write(head.encode("latin-1") + body)
        await asyncio.wait_for(writer.drain(), self.read_timeout)
