"""The kubelet's container-log endpoint for simulated nodes, so `kubectl logs` works.

The API server proxies `pods/log` to `https://<node InternalIP>:<kubeletEndpoint port>/
containerLogs/<ns>/<pod>/<container>`; without `--kubelet-certificate-authority` it does not
verify the kubelet's certificate, so one self-signed server on loopback serves every node.
A pod's output is its `sim.daemonjob.io/output` annotation, `{node}` replaced by its node;
on a node where the container fails, `sim.daemonjob.io/failure-output` when set, so the log
tells the same story as the exit code and the termination message.
"""

from __future__ import annotations

import ssl
import threading
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from daemonjob.testing.sim.simpod import pod_output
from daemonjob.testing.tls import self_signed

PodLookup = Callable[[str, str], Mapping[str, Any] | None]


def _parse_time(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def select_log(pod: Mapping[str, Any], query: Mapping[str, list[str]], now: datetime | None = None) -> str:
    """The log as the kubelet would return it for `query` (tailLines, sinceSeconds, sinceTime,
    timestamps, limitBytes). Every line is stamped with the pod's start time."""
    started = _parse_time((pod.get("status") or {}).get("startTime")) or datetime.now(timezone.utc)
    now = now or datetime.now(timezone.utc)
    lines = pod_output(pod).splitlines(keepends=True)
    since: datetime | None = None
    if query.get("sinceSeconds"):
        since = now - timedelta(seconds=int(query["sinceSeconds"][0]))
    elif query.get("sinceTime"):
        since = _parse_time(query["sinceTime"][0])
    if since is not None and started < since:
        lines = []
    if query.get("tailLines"):
        tail = int(query["tailLines"][0])
        lines = lines[-tail:] if tail > 0 else []
    if query.get("timestamps", [""])[0] == "true":
        stamp = started.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f000Z")
        lines = [f"{stamp} {line}" for line in lines]
    text = "".join(lines)
    if query.get("limitBytes"):
        text = text.encode()[: int(query["limitBytes"][0])].decode("utf-8", "ignore")
    return text


def self_signed_context() -> ssl.SSLContext:
    """A server TLS context with a fresh self-signed P-256 certificate for 127.0.0.1."""
    return self_signed("sim-kubelet").context


class LogServer:
    """HTTPS on loopback answering `/containerLogs/...` for every simulated node."""

    def __init__(self, lookup: PodLookup, host: str = "127.0.0.1") -> None:
        self.lookup = lookup
        handler = type("Handler", (_Handler,), {"server_lookup": staticmethod(lookup)})
        self._httpd = ThreadingHTTPServer((host, 0), handler)
        self._httpd.daemon_threads = True
        self._httpd.socket = self_signed_context().wrap_socket(self._httpd.socket, server_side=True)
        self.port: int = self._httpd.server_address[1]
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="sim-kubelet-logs", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        if self._thread.is_alive():
            self._httpd.shutdown()
            self._thread.join(5)
        self._httpd.server_close()


class _Handler(BaseHTTPRequestHandler):
    server_lookup: PodLookup
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _send(self, code: int, text: str) -> None:
        body = text.encode()
        self.send_response(code)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        parts = [unquote(p) for p in url.path.split("/") if p]
        if len(parts) != 4 or parts[0] != "containerLogs":
            self._send(404, "404 page not found\n")
            return
        _, ns, name, container = parts
        pod = self.server_lookup(ns, name)
        if pod is None:
            self._send(404, f'pod "{name}" in namespace "{ns}" is not known to this kubelet\n')
            return
        if container not in {c.get("name") for c in (pod.get("spec") or {}).get("containers") or ()}:
            self._send(400, f'container "{container}" in pod "{name}" is not valid\n')
            return
        query = parse_qs(url.query)
        if query.get("previous", [""])[0] == "true":
            self._send(400, f'previous terminated container "{container}" in pod "{name}" not found\n')
            return
        if ((pod.get("status") or {}).get("phase") or "Pending") == "Pending":
            self._send(400, f'container "{container}" in pod "{name}" is waiting to start: ContainerCreating\n')
            return
        try:
            self._send(200, select_log(pod, query))
        except ValueError as exc:
            self._send(400, f"bad query: {exc}\n")
