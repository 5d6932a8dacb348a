"""A Service's stand-in on loopback: one port whose TCP connections go to live backends.

The test bed has no kube-proxy, and the API server reaches webhooks by URL, so a webhook
served by several replicas needs one address in front of them, as a Service gives in a
cluster. Each connection goes to the next backend in turn that accepts it; a backend that
refuses (a killed replica) is skipped, as endpoints drop a pod that is not ready. Plain
TCP: TLS is between the API server and the replica.
"""

from __future__ import annotations

import itertools
import select
import socket
import threading
from collections.abc import Callable, Sequence
from typing import Self

__all__ = ["ServiceProxy"]


class ServiceProxy:
    """`ServiceProxy(lambda: [port1, port2])`; `with` it; `.port` is the Service's port."""

    def __init__(self, backends: Callable[[], Sequence[int]], host: str = "127.0.0.1") -> None:
        self.backends = backends
        self.host = host
        self._listener = socket.create_server((host, 0))
        self.port: int = self._listener.getsockname()[1]
        self._turn = itertools.count()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, name="service-proxy", daemon=True)
        self.connections = 0
        self.refused = 0  # connections no backend accepted

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._listener.close()
        self._thread.join(5)

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _connect(self) -> socket.socket | None:
        ports = list(self.backends())
        start = next(self._turn)
        for i in range(len(ports)):
            try:
                return socket.create_connection((self.host, ports[(start + i) % len(ports)]), timeout=2)
            except OSError:
                continue
        return None

    def _serve(self, client: socket.socket) -> None:
        backend = self._connect()
        if backend is None:
            self.refused += 1
            client.close()
            return
        backend.settimeout(None)
        pair = {client: backend, backend: client}
        try:
            while True:
                readable, _, _ = select.select(list(pair), [], [], 60)
                if not readable:
                    return
                for sock in readable:
                    data = sock.recv(65536)
                    if not data:
                        return
                    pair[sock].sendall(data)
        except OSError:
            return
        finally:
            client.close()
            backend.close()
