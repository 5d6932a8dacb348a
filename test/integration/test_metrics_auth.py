"""Secure /metrics against the real API server: TokenReview for who, SubjectAccessReview for may."""

from __future__ import annotations

import argparse
import http.client
import ssl
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from prometheus_client import CollectorRegistry, Counter

from daemonjob.machinery.client.kube import ApiError, Kube, path_for
from daemonjob.machinery.server import certs
from daemonjob.machinery.server.serving import Server
from daemonjob.metricsserver import metrics_server

pytestmark = pytest.mark.cluster
MANIFESTS = Path(__file__).resolve().parents[2] / "manifests"
RBAC = "rbac.authorization.k8s.io/v1"


def _manifest(name: str, kind: str) -> dict:
    for doc in yaml.safe_load_all((MANIFESTS / "metrics-rbac.yaml").read_text()):
        if doc and doc["kind"] == kind and doc["metadata"]["name"] == name:
            return doc
    raise LookupError(f"{kind} {name} not in metrics-rbac.yaml")


def _token(kube: Kube, namespace: str, account: str) -> str:
    kube.create(path_for("v1", "serviceaccounts", namespace), {"metadata": {"name": account}})
    review = kube.create(
        path_for("v1", "serviceaccounts", namespace, account, "token"),
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 600}},
    )
    return review["status"]["token"]


@pytest.fixture
def reader_role(kube: Kube) -> Iterator[None]:
    """The manifests' daemonjob-metrics-reader ClusterRole (created if this cluster lacks it)."""
    role = _manifest("daemonjob-metrics-reader", "ClusterRole")
    created = False
    try:
        kube.create(path_for(RBAC, "clusterroles"), role)
        created = True
    except ApiError as exc:
        if not exc.already_exists:
            raise
    yield
    if created:
        kube.delete(path_for(RBAC, "clusterroles", name=role["metadata"]["name"]))


@pytest.fixture
def tokens(kube: Kube, namespace: str, reader_role: None) -> Iterator[dict[str, str]]:
    """A token bound to metrics-reader, and one of an account without it."""
    binding = f"metrics-reader-{uuid.uuid4().hex[:8]}"
    out = {"reader": _token(kube, namespace, "scraper"), "stranger": _token(kube, namespace, "stranger")}
    kube.create(
        path_for(RBAC, "clusterrolebindings"),
        {
            "metadata": {"name": binding},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "daemonjob-metrics-reader",
            },
            "subjects": [{"kind": "ServiceAccount", "name": "scraper", "namespace": namespace}],
        },
    )
    yield out
    kube.delete(path_for(RBAC, "clusterrolebindings", name=binding))


def _args(cluster, **kw) -> argparse.Namespace:
    base = {
        "metrics_addr": ("127.0.0.1", 0),
        "metrics_secure": True,
        "metrics_cert_dir": "",
        "kubeconfig": str(cluster.kubeconfig),
    }
    return argparse.Namespace(**{**base, **kw})


def _registry() -> CollectorRegistry:
    registry = CollectorRegistry()
    Counter("secret_things_total", "What only readers may see.", registry=registry).inc()
    return registry


def _scrape(server: Server, token: str | None, context: ssl.SSLContext) -> tuple[int, bytes]:
    conn = http.client.HTTPSConnection("127.0.0.1", server.port, context=context, timeout=30)
    try:
        conn.request("GET", "/metrics", headers={"Authorization": f"Bearer {token}"} if token is not None else {})
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def _unverified() -> ssl.SSLContext:
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE  # the self-signed certificate, as Prometheus' insecureSkipVerify
    return ctx


def test_secure_metrics_need_a_token_whose_user_may_get_metrics(cluster, tokens):
    server = metrics_server(_args(cluster), _registry()).start()
    try:
        ctx = _unverified()
        assert _scrape(server, None, ctx)[0] == 401
        assert _scrape(server, "not-a-token", ctx)[0] == 401
        code, body = _scrape(server, tokens["stranger"], ctx)
        assert code == 403 and b"may not get /metrics" in body
        code, body = _scrape(server, tokens["reader"], ctx)
        assert code == 200 and b"secret_things_total 1.0" in body
        assert _scrape(server, tokens["reader"], ctx)[0] == 200  # from the cache
        assert server.tls_problem() is None
    finally:
        server.stop()


def test_secure_metrics_serve_the_cert_dir_certificate(cluster, tokens, tmp_path: Path):
    ca = certs.new_ca("metrics-ca", 3600)
    pair = certs.issue(ca, ["127.0.0.1"], 3600)
    (tmp_path / "tls.crt").write_bytes(pair.cert_pem)
    (tmp_path / "tls.key").write_bytes(pair.key_pem)
    server = metrics_server(_args(cluster, metrics_cert_dir=str(tmp_path)), _registry()).start()
    try:
        verified = ssl.create_default_context(cadata=ca.cert_pem.decode())
        assert _scrape(server, tokens["reader"], verified)[0] == 200
    finally:
        server.stop()


def test_plain_metrics_when_not_secure(cluster):
    server = metrics_server(_args(cluster, metrics_secure=False), _registry()).start()
    try:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
        conn.request("GET", "/metrics")
        resp = conn.getresponse()
        assert resp.status == 200 and b"secret_things_total" in resp.read()
        conn.close()
    finally:
        server.stop()


def test_the_controller_role_may_review_tokens_and_access(kube: Kube):
    """The manifests give the controller's account what the filter asks of the API server."""
    rules = _manifest("daemonjob-metrics-auth", "ClusterRole")["rules"]
    granted = {(g, r, v) for rule in rules for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]}
    assert ("authentication.k8s.io", "tokenreviews", "create") in granted
    assert ("authorization.k8s.io", "subjectaccessreviews", "create") in granted
    binding = _manifest("daemonjob-metrics-auth", "ClusterRoleBinding")
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "daemonjob-controller", "namespace": "daemonjob-system"}
    ]
