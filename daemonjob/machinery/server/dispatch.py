"""One request answered from its head: the route, the filter, the body budgets, the route on a worker."""

from __future__ import annotations

import asyncio
import http.client
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from daemonjob.machinery.server.budget import Budget
from daemonjob.machinery.server.requesthead import MAX_HEAD, BadRequest, declared_length, parse_head
from daemonjob.machinery.server.routes import Filter, Route, Upload

Answer = tuple[int, str, bytes]


def check_budgets(name: str, posts: Mapping[str, Upload], bodies: Budget, handling: Budget) -> None:
    """ValueError if a POST route's largest body, or its handling, cannot fit the budgets."""
    for path, upload in posts.items():
        if not bodies.fits(upload.max_bytes) or not handling.fits(upload.cost(upload.max_bytes)):
            raise ValueError(
                f"{name}: POST {path} takes bodies of up to {upload.max_bytes} bytes, costing "
                f"{upload.cost(upload.max_bytes)} to handle; the budgets are {bodies.total} "
                f"and {handling.total}"
            )


@dataclass(frozen=True)
class Dispatch:
    """The routes of one server and what bounds them: the filter, the two budgets, the workers."""

    routes: Mapping[str, Route]
    posts: Mapping[str, Upload]
    filter: Filter | None
    bodies: Budget
    handling: Budget
    pool: ThreadPoolExecutor
    read_timeout: float

    async def answer(self, reader: asyncio.StreamReader, head: bytes, client: str = "") -> tuple[int, str, bytes, bool]:
        """One request from its head: (code, content type, body, keep-alive); BadRequest when the
        connection must close (an answer given before a body that was not read, for one)."""
        method, path, headers, keep = parse_head(head)
        length = declared_length(headers)
        unread = length != 0  # a body not read leaves the connection unusable
        get, upload = self.routes.get(path), self.posts.get(path)
        if (get if method == "GET" else upload) is None:
            if get is not None or upload is not None:
                if unread:
                    raise BadRequest(405, "method not allowed")
                return 405, "text/plain", b"method not allowed\n", keep
            if unread:
                raise BadRequest(404, "not found")
            return 404, "text/plain", b"not found\n", keep
        loop = asyncio.get_running_loop()
        if self.filter is not None:
            refused = await loop.run_in_executor(self.pool, self._filtered, method, path, headers)
            if refused is not None:
                if unread:
                    raise BadRequest(refused[0], refused[2].decode(errors="replace").rstrip("\n"))
                return (*refused, keep)
        if upload is None:
            if unread:
                raise BadRequest(413, f"GET {path} takes no body")
            return (*await loop.run_in_executor(self.pool, self._run_route, get, None, b""), keep)
        if length is None or headers.get("Content-Length") is None:
            raise BadRequest(411, "Content-Length required (no chunked bodies)")
        if length < 0 or length > upload.max_bytes:
            raise BadRequest(413, f"request body over {upload.max_bytes} bytes")
        if not self.bodies.try_take(length):
            raise BadRequest(429, "too many request bodies in flight, retry later", retry_after=1)
        try:
            body = await asyncio.wait_for(_read_body(reader, length), self.read_timeout)
            return (*await loop.run_in_executor(self.pool, self._run_route, None, upload, body, client), keep)
        finally:
            self.bodies.give(length)

    def _filtered(self, method: str, path: str, headers: http.client.HTTPMessage) -> Answer | None:
        assert self.filter is not None
        try:
            return self.filter(method, path, headers)
        except Exception as exc:
            return 500, "text/plain", f"{type(exc).__name__}\n".encode()

    def _run_route(self, get: Route | None, upload: Upload | None, body: bytes | bytearray, client: str = "") -> Answer:
        """On a worker: the route (a failing route is a 500, never a dead server); a body's handling
        waits for its cost to fit the handling budget, up to `read_timeout`, else 429."""
        cost = 0 if upload is None else upload.cost(len(body))
        if cost and not self.handling.take(cost, self.read_timeout):
            return 429, "text/plain", b"too many request bodies being handled, retry later\n"
        try:
            if get is not None:
                return get()
            assert upload is not None
            if upload.with_client:
                return upload.handler(body, client)  # type: ignore[call-arg,arg-type]  # a ClientPostRoute
            return upload.handler(body)  # type: ignore[call-arg,arg-type]  # a bytearray: bytes to every reader
        except Exception as exc:
            return 500, "text/plain", f"{type(exc).__name__}\n".encode()
        finally:
            if cost:
                self.handling.give(cost)


async def _read_body(reader: asyncio.StreamReader, length: int) -> bytearray:
    """Exactly `length` bytes, read into one buffer of that size: the reader's own buffer stays
    at its limit (readexactly would grow it to the whole body, then copy it)."""
    body = bytearray(length)
    view, got = memoryview(body), 0
    while got < length:
        chunk = await reader.read(min(length - got, MAX_HEAD))
        if not chunk:
            raise asyncio.IncompleteReadError(b"", length)
        view[got : got + len(chunk)] = chunk
        got += len(chunk)
    view.release()
    return body  # bytes-like: handlers only read it
