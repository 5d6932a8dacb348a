"""The /metrics endpoint as controller-runtime serves it: HTTPS, readers checked with the API server.

--metrics-secure (the default) serves TLS from --metrics-cert-dir, or else from a self-signed
certificate made at start (as controller-runtime does; Prometheus then scrapes with
`insecureSkipVerify` or a provided certificate), and lets through only bearer tokens whose
user may `get` the non-resource URL /metrics (the `daemonjob-metrics-reader` ClusterRole).
--metrics-secure=false serves plain HTTP to anyone, for local runs.
"""

from __future__ import annotations

import argparse
import shutil
import socket
import tempfile
from pathlib import Path

from prometheus_client import CollectorRegistry

from daemonjob import defaults
from daemonjob.machinery.client.kube import Kube
from daemonjob.machinery.server.authn import TokenReviewAuth
from daemonjob.machinery.server.serving import Server, metrics_route

__all__ = ["metrics_server"]


def metrics_server(args: argparse.Namespace, registry: CollectorRegistry) -> Server:
    """The (not yet started) /metrics server for the parsed flags; OSError when the address is taken."""
    routes = {"/metrics": metrics_route(registry)}
    if not args.metrics_secure:
        return Server(args.metrics_addr, routes, "metrics", max_connections=defaults.METRICS_MAX_CONNECTIONS)
    auth = TokenReviewAuth(Kube.from_config(args.kubeconfig), ttl=defaults.METRICS_AUTH_CACHE_TTL)
    if args.metrics_cert_dir:
        return Server(
            args.metrics_addr,
            routes,
            "metrics",
            cert_dir=args.metrics_cert_dir,
            filter=auth,
            max_connections=defaults.METRICS_MAX_CONNECTIONS,
        )
    # The pair is loaded once and kept in memory; the files are not needed afterwards. Only
    # here is a certificate made: the cryptography package (some 10 MB) is loaded for it.
    from daemonjob.machinery.server import certs

    tmp = Path(tempfile.mkdtemp(prefix="daemonjob-metrics-"))
    try:
        host = socket.gethostname()
        ca = certs.new_ca(f"{host}-ca", defaults.METRICS_SELF_SIGNED_VALIDITY)
        pair = certs.issue(ca, [host, "localhost", "127.0.0.1", "::1"], defaults.METRICS_SELF_SIGNED_VALIDITY)
        certs.write_dir(tmp, certs.KeyPair(pair.cert_pem + ca.cert_pem, pair.key_pem))
        return Server(
            args.metrics_addr,
            routes,
            "metrics",
            cert_dir=tmp,
            filter=auth,
            max_connections=defaults.METRICS_MAX_CONNECTIONS,
        )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
