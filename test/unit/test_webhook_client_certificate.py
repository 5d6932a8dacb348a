"""--webhook-client-ca-file: the webhook's real listener serves only clients presenting a
certificate the CA signed (the API server's, from its AdmissionConfiguration), refusing
others at the handshake, and follows the CA file when it changes."""

from __future__ import annotations

import http.client
import json
import ssl
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes.client import Configuration
from prometheus_client import CollectorRegistry

from daemonjob import cli, defaults
from daemonjob.admission import webhook as admission
from daemonjob.machinery.client.kube import Kube
from daemonjob.machinery.server import certs

REVIEW = json.dumps(
    {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {"uid": "u", "operation": "CREATE", "kind": {"group": "", "version": "v1", "kind": "ConfigMap"}},
    }
).encode()


class Bed:
    def __init__(self, tmp: Path, with_ca_file: bool = True) -> None:
        self.tmp = tmp
        self.server_ca = certs.new_ca("webhook-ca", 3600)
        self.client_ca = certs.new_ca("apiserver-client-ca", 3600)
        self.ca_file = tmp / "client-ca.crt"
        if with_ca_file:
            self.ca_file.write_bytes(self.client_ca.cert_pem)
        cert_dir = tmp / "certs"
        cert_dir.mkdir()
        serving = certs.issue(self.server_ca, ["127.0.0.1"], 3600)
        (cert_dir / "tls.crt").write_bytes(serving.cert_pem)
        (cert_dir / "tls.key").write_bytes(serving.key_pem)
        args = cli.parser().parse_args(
            ["--webhook-cert-secret=", f"--webhook-cert-dir={cert_dir}", f"--webhook-client-ca-file={self.ca_file}"]
        )
        kube = Kube(Configuration(host="https://127.0.0.1:1"))  # never asked: no review here needs it
        self.webhook = admission.start(args, ("127.0.0.1", 0), kube, CollectorRegistry())

    def post(self, client: certs.KeyPair | None) -> int:
        """The answer's status to a review sent with `client`'s certificate (None: none)."""
        ctx = ssl.create_default_context(cadata=self.server_ca.cert_pem.decode())
        if client is not None:
            crt, key = self.tmp / "client.crt", self.tmp / "client.key"
            crt.write_bytes(client.cert_pem)
            key.write_bytes(client.key_pem)
            ctx.load_cert_chain(crt, key)
        conn = http.client.HTTPSConnection("127.0.0.1", self.webhook.server.port, context=ctx, timeout=10)
        try:
            conn.request("POST", defaults.WEBHOOK_PATH, body=REVIEW)
            resp = conn.getresponse()
            resp.read()
            return resp.status
        finally:
            conn.close()


@pytest.fixture
def bed(tmp_path: Path) -> Iterator[Bed]:
    b = Bed(tmp_path)
    try:
        yield b
    finally:
        b.webhook.stop()


def test_only_a_client_whose_certificate_the_ca_signed_is_served(bed: Bed) -> None:
    assert bed.webhook.problem() is None
    apiserver = certs.issue(bed.client_ca, ["kube-apiserver"], 3600, client=True)
    assert bed.post(apiserver) == 200
    with pytest.raises((ssl.SSLError, ConnectionError)):
        bed.post(None)  # no certificate: refused at the handshake, nothing read
    stranger = certs.issue(certs.new_ca("someone-else", 3600), ["kube-apiserver"], 3600, client=True)
    with pytest.raises((ssl.SSLError, ConnectionError)):
        bed.post(stranger)
    assert bed.post(apiserver) == 200


def test_a_new_ca_file_is_followed_without_a_restart(bed: Bed) -> None:
    old = certs.issue(bed.client_ca, ["kube-apiserver"], 3600, client=True)
    rotated = certs.new_ca("apiserver-client-ca-2", 3600)
    bed.ca_file.write_bytes(rotated.cert_pem)
    assert bed.post(certs.issue(rotated, ["kube-apiserver"], 3600, client=True)) == 200
    with pytest.raises((ssl.SSLError, ConnectionError)):
        bed.post(old)


def test_a_ca_file_that_is_missing_is_the_readiness_problem(tmp_path: Path) -> None:
    b = Bed(tmp_path, with_ca_file=False)
    try:
        problem = b.webhook.problem()
        assert problem == f"the webhook does not serve: no certificate in {b.ca_file}: No such file or directory"
        b.ca_file.write_bytes(b"not a certificate")
        problem = b.webhook.problem()
        assert problem is not None and problem.startswith(f"the webhook does not serve: the certificate in {b.ca_file}")
        b.ca_file.write_bytes(b.client_ca.cert_pem)
        assert b.webhook.problem() is None
        assert b.post(certs.issue(b.client_ca, ["kube-apiserver"], 3600, client=True)) == 200
    finally:
        b.webhook.stop()


def test_without_the_flag_any_client_is_served(tmp_path: Path) -> None:
    b = Bed(tmp_path)
    b.webhook.stop()
    args = cli.parser().parse_args(["--webhook-cert-secret=", f"--webhook-cert-dir={tmp_path / 'certs'}"])
    assert args.webhook_client_ca_file is None
    b.webhook = admission.start(
        args, ("127.0.0.1", 0), Kube(Configuration(host="https://127.0.0.1:1")), CollectorRegistry()
    )
    try:
        assert b.post(None) == 200
    finally:
        b.webhook.stop()
