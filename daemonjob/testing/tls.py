"""Self-signed serving certificates for loopback test servers (the simulated kubelet, webhooks)."""

from __future__ import annotations

import os
import ssl
import subprocess
import tempfile
from dataclasses import dataclass


@dataclass(frozen=True)
class SelfSigned:
    """A server TLS context and its certificate (PEM), which is also its own CA: a webhook's caBundle."""

    context: ssl.SSLContext
    cert_pem: bytes


def self_signed(common_name: str) -> SelfSigned:
    """A fresh P-256 certificate for IP 127.0.0.1 (Go verifies the SAN, never the CN)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    with tempfile.TemporaryDirectory(prefix="daemonjob-tls-") as tmp:
        key, crt = os.path.join(tmp, "tls.key"), os.path.join(tmp, "tls.crt")
        subprocess.run(
            [
                "openssl",
                "req",
                "-x509",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:prime256v1",
                "-nodes",
                "-days",
                "3650",
                "-keyout",
                key,
                "-out",
                crt,
                "-subj",
                f"/CN={common_name}",
                "-addext",
                "subjectAltName=IP:127.0.0.1",
            ],
            check=True,
            capture_output=True,
        )
        ctx.load_cert_chain(crt, key)
        with open(crt, "rb") as f:
            pem = f.read()
    return SelfSigned(ctx, pem)
