"""--webhook-client-ca-file through a real API server: given an AdmissionConfiguration whose
kubeConfigFile names a client certificate, the API server presents it and is served; once
the webhook trusts another CA, the API server is refused at the handshake (failurePolicy
Fail: the create fails), and so is any client without a certificate.

A private control plane: the AdmissionConfiguration is the API server's start flag."""

from __future__ import annotations

import base64
import http.client
import ssl
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from daemonjob import cli, defaults
from daemonjob.admission import webhook as admission
from daemonjob.machinery.client.kube import ApiError, Kube, path_for
from daemonjob.machinery.server import certs
from daemonjob.testing.cluster import ClusterOptions, LocalCluster
from daemonjob.testing.waiting import wait_for

pytestmark = pytest.mark.cluster
WEBHOOKS = "admissionregistration.k8s.io/v1"
SCOPE = "daemonjob.io/client-cert-test"


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def admission_config(tmp: Path, client: certs.KeyPair) -> Path:
    """The API server's AdmissionConfiguration: its certificate for every webhook ("*")."""
    kubeconfig = tmp / "webhook-clients.kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\nusers:\n"
        f'- name: "*"\n  user:\n    client-certificate-data: {b64(client.cert_pem)}\n'
        f"    client-key-data: {b64(client.key_pem)}\n"
    )
    config = tmp / "admission.yaml"
    config.write_text(
        "apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugins:\n"
        "- name: ValidatingAdmissionWebhook\n  configuration:\n"
        "    apiVersion: apiserver.config.k8s.io/v1\n    kind: WebhookAdmissionConfiguration\n"
        f"    kubeConfigFile: {kubeconfig}\n"
    )
    return config


@pytest.fixture(scope="module")
def client_ca() -> certs.KeyPair:
    return certs.new_ca("apiserver-webhook-client-ca", 3600)


@pytest.fixture(scope="module")
def presenting(client_ca: certs.KeyPair, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    tmp = tmp_path_factory.mktemp("admission")
    client = certs.issue(client_ca, ["kube-apiserver"], 3600, client=True)
    options = ClusterOptions(extra_apiserver_args=[f"--admission-control-config-file={admission_config(tmp, client)}"])
    with LocalCluster(options=options) as c:
        yield c


def reviews(registry: CollectorRegistry) -> float:
    return (
        registry.get_sample_value("daemonjob_webhook_reviews_total", {"operation": "CREATE", "result": "allowed"}) or 0
    )


def _webhook(
    tmp: Path, trusted: certs.KeyPair, kube: Kube
) -> tuple[admission.Webhook, certs.KeyPair, CollectorRegistry]:
    """The controller's webhook from its flags, trusting client certificates `trusted` signed."""
    server_ca = certs.new_ca("webhook-serving-ca", 3600)
    cert_dir = tmp / "certs"
    cert_dir.mkdir(parents=True)
    serving = certs.issue(server_ca, ["127.0.0.1"], 3600)
    (cert_dir / "tls.crt").write_bytes(serving.cert_pem)
    (cert_dir / "tls.key").write_bytes(serving.key_pem)
    ca_file = tmp / "client-ca.crt"
    ca_file.write_bytes(trusted.cert_pem)
    args = cli.parser().parse_args(
        ["--webhook-cert-secret=", f"--webhook-cert-dir={cert_dir}", f"--webhook-client-ca-file={ca_file}"]
    )
    registry = CollectorRegistry()
    return admission.start(args, ("127.0.0.1", 0), kube, registry), server_ca, registry


def _configuration(name: str, port: int, server_ca: certs.KeyPair, scope: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "webhooks": [
            {
                "name": "validate.daemonjob.io",
                "clientConfig": {
                    "url": f"https://127.0.0.1:{port}{defaults.WEBHOOK_PATH}",
                    "caBundle": b64(server_ca.cert_pem),
                },
                "rules": [
                    {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["configmaps"]}
                ],
                "namespaceSelector": {"matchLabels": {SCOPE: scope}},
                "failurePolicy": "Fail",
                "sideEffects": "None",
                "admissionReviewVersions": ["v1"],
                "timeoutSeconds": 5,
            }
        ],
    }


def test_the_api_server_presenting_its_certificate_is_served_and_others_are_refused(
    presenting: LocalCluster, client_ca: certs.KeyPair, tmp_path: Path
) -> None:
    """Two webhooks: one trusts the CA of the API server's certificate, one another CA."""
    kube = Kube.from_config(str(presenting.kubeconfig))
    suffix = uuid.uuid4().hex[:6]
    trusting, server_ca, registry = _webhook(tmp_path / "trusting", client_ca, kube)
    other, other_server_ca, other_registry = _webhook(tmp_path / "other", certs.new_ca("another-ca", 3600), kube)
    cleanup: list[str] = []
    try:
        for scope, hook, ca in (("trusting", trusting, server_ca), ("other", other, other_server_ca)):
            ns, name = f"client-cert-{scope}-{suffix}", f"daemonjob-client-cert-{scope}-{suffix}"
            kube.create(
                path_for("v1", "namespaces"), {"metadata": {"name": ns, "labels": {SCOPE: f"{scope}-{suffix}"}}}
            )
            cleanup.append(path_for("v1", "namespaces", name=ns))
            kube.create(
                path_for(WEBHOOKS, "validatingwebhookconfigurations"),
                _configuration(name, hook.server.port, ca, f"{scope}-{suffix}"),
            )
            cleanup.insert(0, path_for(WEBHOOKS, "validatingwebhookconfigurations", name=name))

        # the API server presents its certificate: served (once the configuration is in force)
        trusted = path_for("v1", "configmaps", f"client-cert-trusting-{suffix}")
        count = iter(range(1000))

        def created() -> bool:
            kube.create(trusted, {"metadata": {"name": f"cm-{next(count)}"}})
            return reviews(registry) > 0

        wait_for(created, 60, "a create reviewed by the webhook")

        # a webhook trusting another CA refuses the API server at the handshake: the create fails
        refused = path_for("v1", "configmaps", f"client-cert-other-{suffix}")

        def refused_by_the_webhook() -> bool:
            try:
                kube.create(refused, {"metadata": {"name": f"cm-{next(count)}"}})
            except ApiError as exc:
                return "failed calling webhook" in exc.message
            return False

        wait_for(refused_by_the_webhook, 60, "the API server's create refused for want of a trusted certificate")
        assert reviews(other_registry) == 0

        # any client without a certificate: refused at the handshake
        ctx = ssl.create_default_context(cadata=server_ca.cert_pem.decode())
        conn = http.client.HTTPSConnection("127.0.0.1", trusting.server.port, context=ctx, timeout=10)
        with pytest.raises((ssl.SSLError, ConnectionError)):
            conn.request("POST", defaults.WEBHOOK_PATH, body=b"{}")
            conn.getresponse()
        conn.close()
    finally:
        trusting.stop()
        other.stop()
        for path in cleanup:
            try:
                kube.delete(path)
            except ApiError as exc:
                if not exc.not_found:
                    raise
