"""urllib3 connections that run the calling thread's write guard (fence) once more just
before a request's first byte (`send_guard.fn`, set by the client around a guarded request),
and write a request's head and its body in one send."""

from __future__ import annotations

import threading
from typing import Any

import urllib3
import urllib3.connection

__all__ = ["GuardedHTTPConnectionPool", "GuardedHTTPSConnectionPool", "send_guard"]

send_guard = threading.local()


class _GuardedSend:
    """The calling thread's guard runs once more just before a request's first byte is written:
    a process stopped (SIGSTOP, a long pause) after the first check sends nothing unchecked."""

    def send(self, data: Any) -> None:
        guard = getattr(send_guard, "fn", None)
        if guard is not None:
            send_guard.fn = None
            guard()
        super().send(data)  # type: ignore[misc]  # a mixin: send is the connection class's it precedes

    def _send_output(self, message_body: Any = None, encode_chunked: bool = False) -> None:
        """http.client writes the head, then the body: two TLS records and two wake-ups of the
        server for each create or patch, some 45 µs of client CPU (and the server's) a request.
        A body in bytes goes out with its head in one send."""
        if not isinstance(message_body, bytes) or encode_chunked:
            super()._send_output(message_body, encode_chunked=encode_chunked)  # type: ignore[misc]
            return
        buffer: list[bytes] = self._buffer  # type: ignore[attr-defined]  # http.client's head lines
        buffer.extend((b"", b""))
        head = b"\r\n".join(buffer)
        del buffer[:]
        self.send(head + message_body)


class _GuardedHTTPConnection(_GuardedSend, urllib3.connection.HTTPConnection):
    pass


class _GuardedHTTPSConnection(_GuardedSend, urllib3.connection.HTTPSConnection):
    pass


class GuardedHTTPConnectionPool(urllib3.HTTPConnectionPool):
    ConnectionCls = _GuardedHTTPConnection


class GuardedHTTPSConnectionPool(urllib3.HTTPSConnectionPool):
    ConnectionCls = _GuardedHTTPSConnection
