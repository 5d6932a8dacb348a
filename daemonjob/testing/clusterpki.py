"""The local control plane's certificates and kubeconfigs: a CA, the API server's serving
certificate (for loopback and the in-cluster names), the service-account key pair."""

from __future__ import annotations

import subprocess
from pathlib import Path

__all__ = ["kubeconfig_text", "make_pki"]


def make_pki(p: Path) -> None:
    """The CA, the API server's certificate and the service-account keys, made with openssl in `p`."""

    def ssl(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=p, check=True, capture_output=True)

    ssl(
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-days",
        "3650",
        "-keyout",
        "ca.key",
        "-out",
        "ca.crt",
        "-subj",
        "/CN=daemonjob-local-ca",
    )
    (p / "san.cnf").write_text(
        "[req]\ndistinguished_name=dn\n[dn]\n[ext]\nsubjectAltName=IP:127.0.0.1,DNS:localhost,"
        "DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,IP:10.96.0.1\n"
        "keyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n"
    )
    ssl(
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "apiserver.key",
        "-out",
        "apiserver.csr",
        "-subj",
        "/CN=kube-apiserver",
    )
    ssl(
        "x509",
        "-req",
        "-in",
        "apiserver.csr",
        "-CA",
        "ca.crt",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-days",
        "3650",
        "-out",
        "apiserver.crt",
        "-extfile",
        "san.cnf",
        "-extensions",
        "ext",
    )
    ssl("genrsa", "-out", "sa.key", "2048")
    ssl("rsa", "-in", "sa.key", "-pubout", "-out", "sa.pub")


def kubeconfig_text(server: str, ca: Path, token: str, user: str) -> str:
    return (
        "apiVersion: v1\nkind: Config\n"
        f"clusters:\n- name: local\n  cluster:\n    server: {server}\n    certificate-authority: {ca}\n"
        f"users:\n- name: {user}\n  user:\n    token: {token}\n"
        f"contexts:\n- name: local\n  context:\n    cluster: local\n    user: {user}\n"
        "current-context: local\n"
    )
