"""A running controller under a flood of its webhook port: bounded memory, bounded series,
and every other request still answered.

The flood is what any pod that can reach port 9443 can send: bodies as large as the
webhook takes (3.5 MiB), made of the smallest JSON objects (the costliest to parse), in the
shape that costs the webhook most (an update of a DaemonJob asking for node maintenance,
both versions padded: the spec is read, node powers checked and the versions compared), all
at once; and AdmissionReviews with made-up operations. The controller's peak RSS (VmHWM) must stay under
the memory limit of the manifests' Deployment, its /metrics must not grow a series per
request, and the probes, /metrics and small reviews must be answered throughout.
"""

from __future__ import annotations

import http.client
import json
import re
import socket
import ssl
import threading
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import yaml

from daemonjob import defaults
from daemonjob.machinery.server import certs
from daemonjob.testing.cluster import LocalCluster
from daemonjob.testing.costlyreviews import costly_review
from daemonjob.testing.process import ControllerProcess

pytestmark = pytest.mark.cluster
ROOT = Path(__file__).resolve().parents[2]
MIB = 1024 * 1024
_UNITS = {"Ki": 1024, "Mi": MIB, "Gi": 1024 * MIB}
WORST = "update, both versions"  # the costliest shape before the webhook's costs were counted


def manifests_memory_limit() -> int:
    """The controller container's memory limit in manifests/deployment.yaml, in bytes."""
    for doc in yaml.safe_load_all((ROOT / "manifests" / "deployment.yaml").read_text()):
        if doc and doc.get("kind") == "Deployment":
            (container,) = [c for c in doc["spec"]["template"]["spec"]["containers"] if c["name"] == "controller"]
            value = container["resources"]["limits"]["memory"]
            number, unit = re.fullmatch(r"(\d+)(Ki|Mi|Gi)", value).groups()  # type: ignore[union-attr]
            return int(number) * _UNITS[unit]
    raise LookupError("no Deployment in manifests/deployment.yaml")


def _status(pid: int, key: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key):
            return int(line.split()[1]) * 1024
    raise LookupError(f"no {key}")


def peak_rss(pid: int) -> int:
    """VmHWM: the most resident memory the process ever had, in bytes."""
    return _status(pid, "VmHWM:")


def rss(pid: int) -> int:
    return _status(pid, "VmRSS:")


# What the webhook's server accounts for (docs/operations/flags.md, "What each server reads"): the bodies being
# read, their handling (WEBHOOK_MEMORY_PER_BYTE per byte), ~1 MiB per TLS connection; and some
# room for the other servers' requests and the threads' stacks touched meanwhile.
ACCOUNTED = (
    defaults.WEBHOOK_BODY_BYTES + defaults.WEBHOOK_HANDLING_BYTES + defaults.WEBHOOK_MAX_CONNECTIONS * MIB + 32 * MIB
)


def review(operation: str = "CREATE", obj: Any = None, uid: str = "u") -> dict[str, Any]:
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "operation": operation,
            "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
            "object": obj if obj is not None else {"metadata": {"name": "x"}},
        },
    }


def series_count(text: str) -> int:
    return sum(1 for line in text.splitlines() if line and not line.startswith("#"))


@pytest.fixture
def controller(cluster: LocalCluster, installed_crd: None, tmp_path: Path) -> Iterator[ControllerProcess]:
    cert_dir = tmp_path / "certs"
    cert_dir.mkdir()
    ca = certs.new_ca("flood-ca", 3600)
    pair = certs.issue(ca, ["127.0.0.1"], 3600)
    (cert_dir / "tls.key").write_bytes(pair.key_pem)
    (cert_dir / "tls.crt").write_bytes(pair.cert_pem)
    proc = ControllerProcess(
        cluster.kubeconfig,
        tmp_path / "controller.log",
        "--webhook-cert-secret=",
        "--webhook-cert-dir",
        str(cert_dir),
        webhook=True,
    )
    try:
        proc.start(wait=True)
        yield proc
    finally:
        proc.stop()


def _tls() -> ssl.SSLContext:
    ctx = ssl.create_default_context()
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    return ctx


def _post_raw(port: int, body: bytes) -> str:
    """One POST on a fresh TLS connection: the answer's status, or how the connection ended."""
    ctx = _tls()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=60) as raw, ctx.wrap_socket(raw) as tls:
            tls.sendall(
                f"POST {defaults.WEBHOOK_PATH} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\n\r\n".encode()
            )
            try:
                tls.sendall(body)
            except (ConnectionError, ssl.SSLError, OSError):
                pass  # refused before the body was read: the answer may still be there to read
            head = tls.recv(64)
            return head.split(b" ")[1].decode() if head.startswith(b"HTTP/1.1 ") else "closed"
    except (ConnectionError, ssl.SSLError, OSError, TimeoutError) as exc:
        return type(exc).__name__


class Others:
    """Requests a flood must not starve: probes, /metrics and a small review, in a loop."""

    def __init__(self, proc: ControllerProcess) -> None:
        self.proc = proc
        self.answers: dict[str, list[int]] = {"healthz": [], "metrics": [], "review": []}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Others:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(60)

    def counts(self) -> dict[str, list[tuple[int, int]]]:
        return {name: sorted(Counter(codes).items()) for name, codes in self.answers.items()}

    def _small_review(self) -> int:
        conn = http.client.HTTPSConnection("127.0.0.1", self.proc.webhook_port, context=_tls(), timeout=10)
        try:
            conn.request("POST", defaults.WEBHOOK_PATH, body=json.dumps(review()).encode())
            resp = conn.getresponse()
            resp.read()
            return resp.status
        except (OSError, http.client.HTTPException):
            return 0
        finally:
            conn.close()

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            self.answers["healthz"].append(self.proc.get(self.proc.health_port, "/healthz")[0])
            self.answers["metrics"].append(self.proc.get(self.proc.metrics_port, "/metrics")[0])
            self.answers["review"].append(self._small_review())


def test_a_flood_of_large_bodies_keeps_memory_under_the_limit_and_others_answered(
    controller: ControllerProcess,
) -> None:
    limit = manifests_memory_limit()
    body = costly_review(WORST, defaults.WEBHOOK_MAX_REQUEST_BYTES)
    idle = rss(controller.pid)

    with Others(controller) as others, ThreadPoolExecutor(200) as pool:
        outcomes = list(pool.map(lambda _: _post_raw(controller.webhook_port, body), range(200)))
    peak = peak_rss(controller.pid)
    print(f"idle RSS {idle / MIB:.0f} MiB, peak RSS {peak / MIB:.0f} MiB")
    print(f"outcomes {sorted(Counter(outcomes).items())}; others {others.counts()}")
    assert controller.running(), controller.log_tail()
    assert peak < limit, f"peak RSS {peak / MIB:.0f} MiB, the manifests' limit {limit / MIB:.0f} MiB"
    # what the budgets charge is what handling costs: the peak is within what they account for
    assert peak - idle < ACCOUNTED, f"{(peak - idle) / MIB:.0f} MiB over idle, {ACCOUNTED / MIB:.0f} MiB accounted for"
    answered = [o for o in outcomes if o.isdigit()]
    assert set(answered) <= {"200", "429"}, outcomes
    assert "200" in answered, outcomes  # the webhook still answers what fits
    # the probes and /metrics, every time; a small review, at least between the flood's bodies
    # (a connection that finds every place of the webhook taken is closed, as a 429 would say)
    assert set(others.answers["healthz"]) == {200} and set(others.answers["metrics"]) == {200}, others.answers
    assert 200 in others.answers["review"], others.answers["review"]


def test_made_up_operations_do_not_grow_the_series(controller: ControllerProcess) -> None:
    def send(first: int) -> list[int]:
        conn = http.client.HTTPSConnection("127.0.0.1", controller.webhook_port, context=_tls(), timeout=30)
        codes = []
        try:
            for i in range(first, first + 2500):
                conn.request("POST", defaults.WEBHOOK_PATH, body=json.dumps(review(f"OPERATION-{i}")).encode())
                resp = conn.getresponse()
                resp.read()
                codes.append(resp.status)
        finally:
            conn.close()
        return codes

    send(0)  # the first made-up operation may add the one series they all share
    before = series_count(controller.metrics_text())
    started = time.monotonic()
    with ThreadPoolExecutor(4) as pool:
        codes = [c for chunk in pool.map(send, range(2500, 12500, 2500)) for c in chunk]
    assert len(codes) == 10_000 and set(codes) == {200}, set(codes)
    text = controller.metrics_text()
    after = series_count(text)
    print(f"series before {before}, after {after}")
    assert after - before < 20, f"{after - before} new series after 10,000 operations"
    assert "OPERATION-" not in text
    assert 'operation="other"' in text
    assert controller.get(controller.health_port, "/healthz")[0] == 200
    assert time.monotonic() - started < 300
