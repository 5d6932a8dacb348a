"""A loopback TCP forwarder whose link can be cut: a network partition between one client and a server.

Tests point a client (a Kube, a controller) at `port` and call `cut()` to drop every open
connection and turn new ones away, while everything else keeps talking to the server;
`restore()` lets connections through again. TLS passes through untouched.
"""

from __future__ import annotations

import socket
import threading

_ACCEPT_POLL = 0.2  # seconds: how soon stop() is noticed by the accept loop
_CHUNK = 64 * 1024


class CuttableLink:
    """Start with `start()`, stop with `stop()`; usable as a context manager."""

    def __init__(self, target_port: int, target_host: str = "127.0.0.1") -> None:
        self.target = (target_host, target_port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(_ACCEPT_POLL)
        self.port: int = self._listener.getsockname()[1]
        self._conns: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._cut = threading.Event()
        self._stopped = threading.Event()
        self._threads: list[threading.Thread] = []
        self._acceptor = threading.Thread(target=self._accept_loop, name="netcut-accept", daemon=True)

    def __enter__(self) -> "CuttableLink":
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        self._acceptor.start()

    def cut(self) -> None:
        """Reset every open connection; new ones are closed at once until restore()."""
        self._cut.set()
        with self._lock:
            conns, self._conns = self._conns, set()
        for conn in conns:
            _close(conn)

    def restore(self) -> None:
        self._cut.clear()

    def is_cut(self) -> bool:
        return self._cut.is_set()

    def stop(self) -> None:
        self._stopped.set()
        self.cut()
        self._acceptor.join(5)
        self._listener.close()
        for t in self._threads:
            t.join(5)

    def _accept_loop(self) -> None:
        while not self._stopped.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            if self._cut.is_set():
                _close(client)
                continue
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                _close(client)
                continue
            client.settimeout(None)
            upstream.settimeout(None)
            with self._lock:
                self._conns.update((client, upstream))
            self._threads = [t for t in self._threads if t.is_alive()]
            for src, dst in ((client, upstream), (upstream, client)):
                t = threading.Thread(target=self._pump, args=(src, dst), name="netcut-pump", daemon=True)
                t.start()
                self._threads.append(t)

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(_CHUNK):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            with self._lock:
                self._conns.discard(src)
                self._conns.discard(dst)
            _close(src)
            _close(dst)


def _close(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    sock.close()
