"""urllib3 connections that run the calling thread's write guard (fence) once more just
before a request's first byte: `send_guard.fn`, set by the client around a guarded request."""

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


class _GuardedHTTPConnection(_GuardedSend, urllib3.connection.HTTPConnection):
    pass


class _GuardedHTTPSConnection(_GuardedSend, urllib3.connection.HTTPSConnection):
    pass


class GuardedHTTPConnectionPool(urllib3.HTTPConnectionPool):
    ConnectionCls = _GuardedHTTPConnection


class GuardedHTTPSConnectionPool(urllib3.HTTPSConnectionPool):
    ConnectionCls = _GuardedHTTPSConnection
