"""A `Kube` client whose API server is in this process: benchmarks at cluster sizes no test
machine can run.

`MemKube` is the client with its exchange and its watch answered here, so it does the
client's share of the work as the real one does: request bodies encoded, answers
and watch events decoded (with the watch's own decode). What the API server would do (parse
a request, answer it, encode watch events) is a `Server`'s, in the calling thread; its CPU
is counted apart (`server_cpu`), so a benchmark takes it off the process's CPU and what is
left is the controller's. Watch streams are queues of encoded events.
"""

from __future__ import annotations

import collections
import queue
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import orjson

from daemonjob import defaults
from daemonjob.machinery.client.apierror import JSON, api_error
from daemonjob.machinery.client.kube import Kube, request_info
from daemonjob.machinery.client.watchstream import Decode

__all__ = ["Lazy", "MemKube", "MemStream", "Request", "Server", "Watches", "parse_path", "status_error"]

Answer = tuple[int, bytes]
# An object encoded only when a watch reads it: a Job's event waiting in a stream holds a few
# fields, not its 3 KB, as the API server holds a slow watcher's backlog and not its client.
Lazy = tuple[Callable[..., bytes], tuple[Any, ...]]
Item = tuple[bytes, "bytes | Lazy"]  # an event's type and object


@dataclass(frozen=True)
class Request:
    method: str  # GET, POST, PATCH, DELETE, PUT
    group_version: str  # v1, batch/v1, daemonjob.io/v1alpha1
    namespace: str | None
    resource: str
    name: str | None
    subresource: str | None
    params: Mapping[str, Any]
    body: bytes | None
    content_type: str | None


def parse_path(method: str, path: str, params: Mapping[str, Any], body: bytes | None, ctype: str | None) -> Request:
    """/api/v1/[namespaces/NS/]RESOURCE[/NAME[/SUB]] or /apis/GROUP/VERSION/..."""
    parts = [p for p in path.split("?")[0].split("/") if p]
    if parts[:1] == ["api"]:
        gv, rest = parts[1], parts[2:]
    else:
        gv, rest = f"{parts[1]}/{parts[2]}", parts[3:]
    namespace = None
    if len(rest) > 2 and rest[0] == "namespaces":
        namespace, rest = rest[1], rest[2:]
    return Request(
        method,
        gv,
        namespace,
        rest[0] if rest else "",
        rest[1] if len(rest) > 1 else None,
        rest[2] if len(rest) > 2 else None,
        params,
        body,
        ctype,
    )


def status_error(code: int, reason: str, message: str) -> Answer:
    """A failure as the API server words it (a metav1.Status)."""
    body = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": reason, "message": message}
    return code, orjson.dumps({**body, "code": code})


class MemStream:
    """A watch response: events queued by the server, encoded (the server's CPU, told to
    `charge`) and decoded (the client's) as they are read."""

    def __init__(self, decode: Decode) -> None:
        self._queue: queue.SimpleQueue[Item | None] = queue.SimpleQueue()
        self._decode = decode
        self.closed = False
        self.charge: Callable[[float], None] = lambda seconds: None

    def put(self, item: Item) -> None:
        self._queue.put(item)

    def backlog(self) -> int:
        """Events sent and not read yet."""
        return self._queue.qsize()

    def __iter__(self) -> Iterator[JSON]:
        while not self.closed:
            item = self._queue.get()
            if item is None:
                return
            kind, obj = item
            started = time.thread_time()
            if not isinstance(obj, bytes):
                obj = obj[0](*obj[1])
            line = b'{"type":"' + kind + b'","object":' + obj + b"}"
            self.charge(time.thread_time() - started)
            yield self._decode(line)

    def close(self) -> None:
        self.closed = True
        self._queue.put(None)


class Watches:
    """The open watches of one resource, and the recent events a watch from a past
    resourceVersion starts with."""

    def __init__(self, history: int = 1000) -> None:
        self._lock = threading.Lock()
        self._streams: list[tuple[str | None, MemStream]] = []
        self._recent: collections.deque[tuple[int, str | None, Item]] = collections.deque(maxlen=history)
        self.sent = 0  # events put into streams
        self.max_backlog = 0

    def open(self, namespace: str | None, since: int, decode: Decode) -> MemStream:
        stream = MemStream(decode)
        with self._lock:
            for rv, ns, item in self._recent:
                if rv > since and (namespace is None or ns == namespace):
                    stream.put(item)
            self._streams = [(ns, s) for ns, s in self._streams if not s.closed] + [(namespace, stream)]
        return stream

    def send(self, rv: int, namespace: str | None, kind: str, obj: bytes | Lazy) -> None:
        """One event; its object encoded already, or when read."""
        item: Item = (kind.encode(), obj)
        with self._lock:
            self._recent.append((rv, namespace, item))
            for ns, stream in self._streams:
                if ns is None or ns == namespace:
                    stream.put(item)
                    self.sent += 1

    def backlog(self) -> int:
        with self._lock:
            return sum(s.backlog() for _, s in self._streams if not s.closed)

    def close(self) -> None:
        with self._lock:
            streams, self._streams = self._streams, []
        for _, stream in streams:
            stream.close()


class Server(Protocol):
    """What answers a MemKube's requests."""

    def handle(self, request: Request) -> Answer: ...

    def watch(self, request: Request, since: int, decode: Decode) -> MemStream | Answer: ...


class MemKube(Kube):
    """The Kube client over a `Server` in this process: its own request, get, create, patch,
    delete and put (bodies encoded, answers decoded, the rate limit taken), with the exchange
    and the watch answered here. Counts requests by (verb, resource) and the server's CPU
    seconds (thread CPU time around each request's handling)."""

    def __init__(self, server: Server, limiter: Any = None) -> None:
        """`limiter`: the client's rate limit (anything with accept()), as `Kube` takes it."""
        self.server = server
        self.limiter = limiter
        self.on_request = None
        self.timeout = defaults.API_REQUEST_TIMEOUT
        self.extra_headers = ()
        self.pipelining = False  # creates one by one: there is no connection to send them together on
        self._host_pool = None
        self.requests: collections.Counter[tuple[str, str]] = collections.Counter()
        self._cpu_lock = threading.Lock()
        self._server_cpu = 0.0
        self._server_cpu_by_thread: dict[str, float] = collections.defaultdict(float)  # by the calling thread's name

    def server_cpu(self) -> float:
        with self._cpu_lock:
            return self._server_cpu

    def server_cpu_by_thread(self) -> dict[str, float]:
        """The server's CPU seconds by the name of the thread that called it."""
        with self._cpu_lock:
            return dict(self._server_cpu_by_thread)

    def _charge(self, seconds: float) -> None:
        with self._cpu_lock:
            self._server_cpu += seconds
            self._server_cpu_by_thread[threading.current_thread().name] += seconds

    def _serve(self, fn: Callable[[], Any]) -> Any:
        started = time.thread_time()
        try:
            return fn()
        finally:
            self._charge(time.thread_time() - started)

    def _whole(
        self,
        method: str,
        path: str,
        params: Mapping[str, Any] | None,
        data: bytes | None,
        content_type: str | None,
        timeout: float | None,
    ) -> Answer:
        verb, resource = request_info(method, path)
        self.requests[(verb, resource)] += 1  # a Counter's update is one bytecode under the GIL: fine for counts
        request = parse_path(
            method, path, {k: v for k, v in (params or {}).items() if v is not None}, data, content_type
        )
        answer: Answer = self._serve(lambda: self.server.handle(request))
        return answer

    def watch(self, path: str, params: Mapping[str, Any], read_timeout: float, decode: Decode | None = None) -> Any:
        self.requests[request_info("WATCH", path)] += 1
        request = parse_path("GET", path, dict(params), None, None)
        since = int(params.get("resourceVersion") or 0)
        opened = self._serve(lambda: self.server.watch(request, since, decode or orjson.loads))
        if isinstance(opened, MemStream):
            opened.charge = self._charge
            return opened
        raise api_error(*opened)
