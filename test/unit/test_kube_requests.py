"""What the API client puts on the wire: paths, queries, credentials and their refresh."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator

import orjson
import pytest
from kubernetes.client import Configuration

from daemonjob.machinery.client.kube import Kube


class Recorder(http.server.BaseHTTPRequestHandler):
    seen: list[tuple[str, str, dict[str, str], bytes]]

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        self.seen.append((self.command, self.path, dict(self.headers), body))
        payload = orjson.dumps({"kind": "Status", "ok": True})
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_GET = do_POST = do_PATCH = do_DELETE = _answer

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[tuple[str, list[tuple[str, str, dict[str, str], bytes]]]]:
    seen: list[tuple[str, str, dict[str, str], bytes]] = []
    handler = type("Handler", (Recorder,), {"seen": seen, "protocol_version": "HTTP/1.1"})
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", seen
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_requests_carry_path_query_body_and_a_server_path_prefix(server) -> None:
    url, seen = server
    # A kubeconfig server may carry a path (an authenticating proxy in front of the cluster).
    client = Kube(Configuration(host=url + "/k8s/clusters/c1/"))
    assert client.get("/api/v1/nodes", labelSelector="a in (b)", limit=5, watch=None) == {"kind": "Status", "ok": True}
    client.create("/apis/batch/v1/namespaces/ns/jobs", {"metadata": {"name": "j"}})
    client.patch("/apis/batch/v1/namespaces/ns/jobs/j", {"metadata": {"labels": {"a": "b"}}})
    assert [(m, p) for m, p, _, _ in seen] == [
        ("GET", "/k8s/clusters/c1/api/v1/nodes?labelSelector=a+in+%28b%29&limit=5"),
        ("POST", "/k8s/clusters/c1/apis/batch/v1/namespaces/ns/jobs"),
        ("PATCH", "/k8s/clusters/c1/apis/batch/v1/namespaces/ns/jobs/j"),
    ]
    assert "Content-Type" not in seen[0][2]
    assert seen[1][2]["Content-Type"] == "application/json"
    assert orjson.loads(seen[1][3]) == {"metadata": {"name": "j"}}
    assert seen[2][2]["Content-Type"] == "application/merge-patch+json"
    assert all(h["Accept"] == "application/json" and h["User-Agent"] == "daemonjob-controller" for _, _, h, _ in seen)


def test_the_credentials_refresh_hook_runs_at_most_once_per_recheck_interval(server) -> None:
    url, seen = server
    cfg = Configuration(host=url)
    calls: list[float] = []
    clock = Clock()

    def refresh(c: Configuration) -> None:  # an exec plugin's token, renewed on each call
        calls.append(clock.t)
        c.api_key["authorization"] = f"Bearer token-{len(calls)}"

    cfg.refresh_api_key_hook = refresh
    client = Kube(cfg, credentials_recheck=1.0, now=clock)
    for _ in range(5):
        client.get("/api/v1/nodes")
    clock.t += 0.5
    client.get("/api/v1/nodes")
    assert calls == [100.0]
    clock.t += 0.6  # 1.1 s after the first call: the hook runs again and its new token is sent
    client.get("/api/v1/nodes")
    client.get("/api/v1/nodes")
    assert calls == [100.0, 101.1]
    assert [h["Authorization"] for _, _, h, _ in seen] == ["Bearer token-1"] * 6 + ["Bearer token-2"] * 2


def test_a_request_header_change_does_not_leak_into_the_next_request(server) -> None:
    url, seen = server
    cfg = Configuration(host=url)
    cfg.api_key["authorization"] = "Bearer t"
    client = Kube(cfg)
    client.patch("/api/v1/namespaces/ns/configmaps/c", {}, content_type="application/strategic-merge-patch+json")
    client.get("/api/v1/namespaces/ns/configmaps/c")
    assert seen[0][2]["Content-Type"] == "application/strategic-merge-patch+json"
    assert "Content-Type" not in seen[1][2]
    assert seen[1][2]["Authorization"] == "Bearer t"
