"""A thin JSON client for the Kubernetes API.

The official client loads kubeconfig/in-cluster credentials and owns the TLS pool; requests
go straight through its urllib3 pool with orjson, skipping the generated models, which cost
several times the CPU of decoding (the controller's throughput is bound by client CPU).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson
import structlog
import urllib3
import urllib3.connection
from kubernetes import client as k8s_client
from kubernetes.client import Configuration

from daemonjob import defaults
from daemonjob.machinery.client.apierror import JSON, ApiError, api_error
from daemonjob.machinery.client.credentials import ConfigError, Headers, load_configuration, request_headers
from daemonjob.machinery.client.exchange import ANSWER_READ, PAGE_READ, Answer, exchange
from daemonjob.machinery.client.guardedhttp import GuardedHTTPConnectionPool, GuardedHTTPSConnectionPool, send_guard
from daemonjob.machinery.client.paths import micro_time, path_for, request_info, with_query
from daemonjob.machinery.client.pipelined import create_together
from daemonjob.machinery.client.watchstream import Decode, WatchStream

# ApiError, ConfigError, WatchStream and the paths are part of this client's API, where its callers
# import them from.
__all__ = [
    "PATCH_MERGE",
    "PATCH_STRATEGIC",
    "ApiError",
    "ConfigError",
    "Kube",
    "WatchStream",
    "micro_time",
    "path_for",
    "request_info",
]

log = structlog.get_logger("daemonjob.machinery.client.kube")

PATCH_MERGE = "application/merge-patch+json"
PATCH_STRATEGIC = "application/strategic-merge-patch+json"


RequestHook = Callable[[str, str, int], None]  # verb, resource, HTTP code (0 = no answer)


@dataclass
class Kube:
    """One API server connection pool; thread-safe."""

    configuration: Configuration
    limiter: Any = None  # anything with accept(): ratelimit.TokenBucket
    on_request: RequestHook | None = None
    timeout: float = defaults.API_REQUEST_TIMEOUT
    credentials_recheck: float = defaults.API_CREDENTIALS_RECHECK  # seconds between refresh hook calls
    now: Callable[[], float] = time.monotonic
    # More headers on every request, a name may repeat: kubectl's --as and --as-group
    # (Impersonate-User, one Impersonate-Group per group), which the client's Configuration has no field for.
    extra_headers: tuple[tuple[str, str], ...] = ()
    _pool: urllib3.PoolManager = field(init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)
    _headers_cache: tuple[float, Headers] | None = field(default=None, init=False, repr=False)
    # False once a server (or a proxy before it) closed a connection with creates sent together unanswered
    pipelining: bool = field(default=True, init=False)

    def __post_init__(self) -> None:
        self.configuration.connection_pool_maxsize = max(
            self.configuration.connection_pool_maxsize or 0, defaults.API_POOL_SIZE
        )
        self._pool = k8s_client.ApiClient(self.configuration).rest_client.pool_manager
        self._pool.pool_classes_by_scheme = {"http": GuardedHTTPConnectionPool, "https": GuardedHTTPSConnectionPool}
        self.host = self.configuration.host.rstrip("/")
        # Requests go to the API server's own connection pool with the path alone: the pool
        # manager would parse each URL to find the pool again. Through a proxy, the manager's way.
        self._host_pool = (
            None if isinstance(self._pool, urllib3.ProxyManager) else self._pool.connection_from_url(self.host)
        )
        self._path_prefix = urllib3.util.parse_url(self.host).path or ""

    # -- construction -------------------------------------------------------------------
    @classmethod
    def from_config(cls, kubeconfig: str | None = None, context: str | None = None, **kw: Any) -> Kube:
        """kubeconfig if named, else in-cluster, else ~/.kube/config (KUBECONFIG honoured)."""
        return cls(load_configuration(kubeconfig, context), **kw)

    # -- requests -----------------------------------------------------------------------
    def _headers(self, content_type: str | None) -> Headers:
        headers = self._base_headers().copy()  # shared: a copy for each request
        if content_type:
            headers["Content-Type"] = content_type
        return headers

    def _base_headers(self) -> Headers:
        """Accept, User-Agent and credentials, made again at most every `credentials_recheck` s.

        The kubeconfig and in-cluster loaders hand over a refresh hook that renews an expiring
        token (exec plugins, OIDC: ahead of expiry; projected tokens: when the file is a minute
        old) and rewrites the host and proxy settings on every call, which cost more than the
        rest of a request's preparation together; once a second is as current.
        """
        now = self.now()
        cached = self._headers_cache
        if cached is not None and now - cached[0] < self.credentials_recheck:
            return cached[1]
        with self._lock:
            headers = request_headers(self.configuration, self.extra_headers)
            self._headers_cache = (now, headers)
        return headers

    def _send(self, method: str, path: str, params: Mapping[str, Any] | None, **kw: Any) -> urllib3.BaseHTTPResponse:
        if self._host_pool is None:
            return self._pool.request(method, self.url(path, params), retries=False, **kw)
        return self._host_pool.urlopen(
            method, self._path_prefix + with_query(path, params), retries=False, redirect=False, **kw
        )

    def url(self, path: str, params: Mapping[str, Any] | None = None) -> str:
        return self.host + with_query(path, params)

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        params: Mapping[str, Any] | None = None,
        content_type: str | None = None,
        timeout: float | None = None,
        guard: Callable[[], None] | None = None,
        want_answer: bool = True,
    ) -> JSON:
        """One request. `guard` cancels it by raising (not an OSError, which would read as a
        network failure): it runs after the rate limiter's wait, and again right before the
        first byte is written, so a leader's fence is checked as late as it can be. Without
        `want_answer` a success returns {} undecoded: a caller that learns what it wrote
        from its watch (Job creates) skips decoding the object the server sends back."""
        if self.limiter is not None:
            self.limiter.accept()
        if guard is not None:
            guard()
            send_guard.fn = guard
        data = None if body is None else orjson.dumps(body)
        if data is not None and content_type is None:
            content_type = "application/json"
        code = 0
        try:
            code, payload = self._whole(method, path, params, data, content_type, timeout)
        finally:
            send_guard.fn = None
            if self.on_request is not None:
                self.on_request(*request_info(method, path), code)
        if 200 <= code < 300:
            return orjson.loads(payload) if payload and want_answer else {}
        raise api_error(code, payload)

    def _whole(
        self,
        method: str,
        path: str,
        params: Mapping[str, Any] | None,
        data: bytes | None,
        content_type: str | None,
        timeout: float | None,
    ) -> Answer:
        """A request whose answer is read whole: the short way (exchange.py) to the API
        server's own pool, urllib3's urlopen through a proxy."""
        seconds = self.timeout if timeout is None else timeout
        headers = self._headers(content_type)
        if self._host_pool is not None:
            url = self._path_prefix + with_query(path, params)
            read = PAGE_READ if method == "GET" else ANSWER_READ  # a list's pages, or one object
            return exchange(self._host_pool, method, url, data, headers, seconds, read)
        resp = self._send(
            method,
            path,
            params,
            body=data,
            headers=headers,
            timeout=urllib3.Timeout(total=seconds),
            preload_content=True,
        )
        return resp.status, resp.data

    # `request_timeout` (seconds, whole request) overrides `self.timeout` for one call: a caller
    # with a deadline of its own (the Lease renewal) must not wait out the default. Keyword-only
    # and not a query parameter: the rest of `params` goes to the URL.
    def get(self, path: str, *, request_timeout: float | None = None, **params: Any) -> JSON:
        return self.request("GET", path, params=params, timeout=request_timeout)

    def get_text(self, path: str, timeout: float | None = None, **params: Any) -> str:
        """A plain-text answer (pods/log), decoded leniently: logs are not always UTF-8."""
        if self.limiter is not None:
            self.limiter.accept()
        code = 0
        try:
            code, payload = self._whole("GET", path, params, None, None, timeout or self.timeout)
        finally:
            if self.on_request is not None:
                self.on_request(*request_info("GET", path), code)
        if 200 <= code < 300:
            return payload.decode("utf-8", "replace")
        raise api_error(code, payload)

    def create(
        self,
        path: str,
        body: JSON,
        *,
        request_timeout: float | None = None,
        guard: Callable[[], None] | None = None,
        want_answer: bool = True,
        **params: Any,
    ) -> JSON:
        return self.request(
            "POST", path, body=body, params=params, timeout=request_timeout, guard=guard, want_answer=want_answer
        )

    def create_pipelined(
        self,
        path: str,
        bodies: Sequence[Mapping[str, Any]],
        *,
        request_timeout: float | None = None,
        guard: Callable[[], None] | None = None,
    ) -> list[Exception | None]:
        """Creates in one collection sent together on one connection, each one's outcome in
        order: None when created, else its error (pipelined.py says how)."""
        if len(bodies) <= 1 or self._host_pool is None or not self.pipelining:
            return [self._create_one(path, body, request_timeout, guard) for body in bodies]
        return create_together(self, path, bodies, request_timeout, guard)

    def _create_one(
        self, path: str, body: Mapping[str, Any], request_timeout: float | None, guard: Callable[[], None] | None
    ) -> Exception | None:
        try:
            self.create(
                path,
                body if type(body) is dict else dict(body),
                request_timeout=request_timeout,
                guard=guard,
                want_answer=False,
            )
        except Exception as exc:
            return exc
        return None

    def delete(
        self,
        path: str,
        body: JSON | None = None,
        *,
        request_timeout: float | None = None,
        guard: Callable[[], None] | None = None,
        want_answer: bool = True,
        **params: Any,
    ) -> JSON:
        return self.request(
            "DELETE", path, body=body, params=params, timeout=request_timeout, guard=guard, want_answer=want_answer
        )

    def patch(
        self,
        path: str,
        body: Any,
        content_type: str = PATCH_MERGE,
        *,
        request_timeout: float | None = None,
        guard: Callable[[], None] | None = None,
        want_answer: bool = True,
        **params: Any,
    ) -> JSON:
        return self.request(
            "PATCH",
            path,
            body=body,
            params=params,
            content_type=content_type,
            timeout=request_timeout,
            guard=guard,
            want_answer=want_answer,
        )

    def put(
        self,
        path: str,
        body: JSON,
        *,
        request_timeout: float | None = None,
        guard: Callable[[], None] | None = None,
        **params: Any,
    ) -> JSON:
        return self.request("PUT", path, body=body, params=params, timeout=request_timeout, guard=guard)

    def watch(
        self, path: str, params: Mapping[str, Any], read_timeout: float, decode: Decode | None = None
    ) -> WatchStream:
        """Open a watch; iterate the result for event dicts, close() it from any thread.
        `decode`: how an event's line is decoded (watchstream.py), if not generically."""
        if self.limiter is not None:
            self.limiter.accept()
        code = 0
        try:
            resp = self._send(
                "GET",
                path,
                {**params, "watch": "true"},
                headers=self._headers(None),
                timeout=urllib3.Timeout(connect=self.timeout, read=read_timeout),
                preload_content=False,
            )
            code = resp.status
        finally:
            if self.on_request is not None:
                self.on_request(*request_info("WATCH", path), code)
        if resp.status != 200:
            payload = resp.read()
            resp.release_conn()
            raise api_error(resp.status, payload)
        return WatchStream(resp) if decode is None else WatchStream(resp, decode)
