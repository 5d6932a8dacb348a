"""A TCP proxy that partitions, hangs or slows the connections of a process under test.

The proxy is a byte pump on loopback: the API server's TLS passes through untouched, so a
process under test only needs a kubeconfig whose server is the proxy (proxiedconfig.py).
The three faults are the ones that decide what a leader may do:

- partition: every connection is cut (RST) and new ones are refused, as when the API server
  is unreachable; heal() listens again on the same port;
- hang: connections are accepted and read, but nothing is forwarded either way, as with an
  API server that accepts and never answers. Bytes read meanwhile are dropped, never
  delivered later, and heal() cuts the connections that saw the hang (their streams are
  broken anyway), so no request sent during a hang ever reaches the API server;
- latency: each chunk is held for a given time in either direction.
"""

from __future__ import annotations

import collections
import socket
import struct
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import urlsplit

import structlog

from daemonjob.testing.children import free_port

log = structlog.get_logger("daemonjob.testing.faults.proxy")

__all__ = ["FaultProxy"]

_CHUNK = 64 * 1024
_EOF = b""


class _Conn:
    """One proxied connection: a reader and a writer thread per direction."""

    def __init__(self, proxy: FaultProxy, client: socket.socket, upstream: socket.socket, held: bool):
        self.proxy = proxy
        self.client, self.upstream = client, upstream
        self.held = held  # saw a hang: forwards nothing from now on
        self.cond = threading.Condition()
        self.queues: dict[str, collections.deque[tuple[float, bytes]]] = {
            "to_server": collections.deque(),
            "to_client": collections.deque(),
        }
        self.closed = False
        self.eofs = 0

    def start(self) -> None:
        for direction, src, dst in (
            ("to_server", self.client, self.upstream),
            ("to_client", self.upstream, self.client),
        ):
            threading.Thread(
                target=self._read, args=(direction, src), daemon=True, name=f"proxy-read-{direction}"
            ).start()
            threading.Thread(
                target=self._write, args=(direction, dst), daemon=True, name=f"proxy-write-{direction}"
            ).start()

    def _read(self, direction: str, src: socket.socket) -> None:
        while True:
            try:
                data = src.recv(_CHUNK)
            except OSError:
                data = None
            with self.cond:
                if self.closed:
                    return
                if data is None:  # reset: the whole connection goes
                    break
                if not self.held:
                    ready = time.monotonic() + self.proxy.latency(direction)
                    self.queues[direction].append((ready, data))
                    self.cond.notify_all()
                if data == _EOF:
                    return
        self.close()

    def _write(self, direction: str, dst: socket.socket) -> None:
        queue = self.queues[direction]
        while True:
            with self.cond:
                while not self.closed and not (queue and queue[0][0] <= time.monotonic()):
                    self.cond.wait(max(0.0, queue[0][0] - time.monotonic()) if queue else None)
                if self.closed:
                    return
                _, data = queue.popleft()
                if self.held:
                    continue
            try:
                if data == _EOF:
                    dst.shutdown(socket.SHUT_WR)
                else:
                    dst.sendall(data)
            except OSError:
                self.close()
                return
            if data == _EOF:
                with self.cond:
                    self.eofs += 1
                    done = self.eofs == 2
                if done:
                    self.close()
                return

    def hold(self) -> None:
        with self.cond:
            self.held = True
            for queue in self.queues.values():
                queue.clear()
            self.cond.notify_all()

    def close(self, reset: bool = False) -> None:
        with self.cond:
            if self.closed:
                return
            self.closed = True
            self.cond.notify_all()
        for sock in (self.client, self.upstream):
            try:
                if reset:  # RST, not FIN: the peer fails at once instead of reading an end of stream
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                # Wakes the reader blocked in recv(); SHUT_RD sends nothing, so close() sends the RST.
                sock.shutdown(socket.SHUT_RD if reset else socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()
        self.proxy._forget(self)


class FaultProxy:
    """A loopback TCP proxy to `upstream` (host, port); start() it, or use it as a context manager."""

    def __init__(self, upstream: tuple[str, int], port: int = 0, host: str = "127.0.0.1"):
        self.upstream = upstream
        # a port of its own, not bind(0)'s: heal() listens on it again, after a partition in
        # which an outgoing connection could have taken an ephemeral one
        self.host, self.port = host, port or (free_port() if host == "127.0.0.1" else 0)
        self._lock = threading.Lock()
        self._listener: socket.socket | None = None
        self._conns: set[_Conn] = set()
        self._hung = False
        self._latency = {"to_server": 0.0, "to_client": 0.0}
        self._stopped = False
        self.accepted = 0  # connections accepted since start (refused ones never count)

    @classmethod
    def to_url(cls, url: str, port: int = 0) -> FaultProxy:
        """A proxy to the host and port of a server URL such as https://127.0.0.1:6443."""
        parts = urlsplit(url)
        default = 443 if parts.scheme == "https" else 80
        return cls((parts.hostname or "127.0.0.1", parts.port or default), port=port)

    # -- lifecycle ----------------------------------------------------------------------------
    def start(self) -> FaultProxy:
        self._listen()
        return self

    def stop(self) -> None:
        with self._lock:
            self._stopped = True
        self._close_listener()
        self._cut_all()

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def address(self) -> tuple[str, int]:
        return self.host, self.port

    def url(self, scheme: str = "https") -> str:
        return f"{scheme}://{self.host}:{self.port}"

    def connections(self) -> int:
        """Connections open through the proxy now."""
        with self._lock:
            return len(self._conns)

    # -- faults -------------------------------------------------------------------------------
    def partition(self) -> None:
        """Cut every connection and refuse new ones until heal()."""
        self._close_listener()
        self._cut_all()
        log.info("proxy partitioned", port=self.port)

    def hang(self) -> None:
        """Accept and read, answer nothing: on open connections and on new ones, until heal()."""
        with self._lock:
            self._hung = True
            conns = list(self._conns)
        for conn in conns:
            conn.hold()
        log.info("proxy hung", port=self.port)

    def set_latency(self, to_server: float = 0.0, to_client: float = 0.0) -> None:
        """Hold each chunk this long before forwarding it; a request and its answer take the sum."""
        with self._lock:
            self._latency = {"to_server": to_server, "to_client": to_client}

    def latency(self, direction: str) -> float:
        with self._lock:
            return self._latency[direction]

    def heal(self) -> None:
        """End a partition or a hang: listen again on the same port; connections held by a hang are cut."""
        with self._lock:
            self._hung = False
            held = [c for c in self._conns if c.held]
        for conn in held:
            conn.close(reset=True)
        if self._listener is None:
            self._listen()
        log.info("proxy healed", port=self.port)

    @contextmanager
    def partitioned(self) -> Iterator[FaultProxy]:
        self.partition()
        try:
            yield self
        finally:
            self.heal()

    @contextmanager
    def hung(self) -> Iterator[FaultProxy]:
        self.hang()
        try:
            yield self
        finally:
            self.heal()

    @contextmanager
    def delayed(self, to_server: float = 0.0, to_client: float = 0.0) -> Iterator[FaultProxy]:
        self.set_latency(to_server, to_client)
        try:
            yield self
        finally:
            self.set_latency()

    # -- internals ----------------------------------------------------------------------------
    def _listen(self) -> None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, self.port))
        sock.listen(128)
        self.port = sock.getsockname()[1]
        with self._lock:
            if self._stopped:
                sock.close()
                return
            self._listener = sock
        threading.Thread(target=self._accept, args=(sock,), name="proxy-accept", daemon=True).start()

    def _close_listener(self) -> None:
        with self._lock:
            sock, self._listener = self._listener, None
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)  # wakes accept(); close() alone does not
            except OSError:
                pass
            sock.close()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # closed: partitioned or stopped
            try:
                upstream = socket.create_connection(self.upstream, timeout=5)
                upstream.settimeout(None)
            except OSError as exc:
                log.warning("proxy cannot reach upstream", upstream=self.upstream, error=str(exc))
                client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                client.close()
                continue
            for sock in (client, upstream):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                if self._listener is not listener:  # partitioned between accept and here
                    client.close()
                    upstream.close()
                    continue
                conn = _Conn(self, client, upstream, held=self._hung)
                self._conns.add(conn)
                self.accepted += 1
            conn.start()

    def _cut_all(self) -> None:
        with self._lock:
            conns = list(self._conns)
        for conn in conns:
            conn.close(reset=True)

    def _forget(self, conn: _Conn) -> None:
        with self._lock:
            self._conns.discard(conn)
