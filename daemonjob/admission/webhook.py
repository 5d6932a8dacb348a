"""The webhook in the controller process: its flags, its server, its certificates, its readiness.

Every replica serves, leader or not: admission must not wait for an election. The server
takes `tls.crt`/`tls.key` from --webhook-cert-dir and reloads them when they change; with
self-managed certificates (the default) this process also keeps them (certificates.py),
otherwise something else (cert-manager's mounted Secret) provides the files. With
--webhook-client-ca-file only clients with a certificate that CA signed (the API server, as
its AdmissionConfiguration says) are served: anyone else who reaches the port can neither
spend the webhook's budgets nor ask it who holds node powers.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Counter

from daemonjob import defaults
from daemonjob.admission.dryrun import ClusterDryRun
from daemonjob.admission.nodereads import allowed_keys, node_reads_problems
from daemonjob.admission.powers import CachedAccessReviewer, KubeAccessReviewer, powers_problems
from daemonjob.admission.review import OPERATIONS, Checks, handle
from daemonjob.domain.spec.validate import Problem
from daemonjob.machinery.client.kube import Kube
from daemonjob.machinery.server.serving import Server, Upload

if TYPE_CHECKING:
    from daemonjob.admission.certificates import SelfManagedCertificates

__all__ = ["add_flags", "Webhook", "start"]


def add_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("admission webhook")
    g.add_argument(
        "--webhook-bind-address",
        default=defaults.WEBHOOK_BIND_ADDRESS,
        help=f"address of the validating webhook, HTTPS, POST {defaults.WEBHOOK_PATH} ('0' disables)",
    )
    g.add_argument(
        "--webhook-cert-dir",
        default=defaults.WEBHOOK_CERT_DIR,
        help="directory of tls.crt and tls.key, reloaded when they change",
    )
    g.add_argument(
        "--webhook-cert-secret",
        default=defaults.WEBHOOK_CERT_SECRET,
        help="Secret in which this controller keeps the webhook's CA and certificate, renewed before "
        "they expire; empty: the files in --webhook-cert-dir are provided (cert-manager)",
    )
    g.add_argument(
        "--webhook-configuration-name",
        default=defaults.WEBHOOK_CONFIGURATION,
        help="ValidatingWebhookConfiguration whose caBundle this controller keeps (self-managed only)",
    )
    g.add_argument(
        "--webhook-service-name",
        default=defaults.WEBHOOK_SERVICE,
        help="Service in front of the webhook: its DNS names go into the certificate",
    )
    g.add_argument(
        "--webhook-service-namespace",
        default=None,
        help="namespace of that Service and of the Secret (default: the pod's namespace, else default)",
    )
    g.add_argument(
        "--webhook-timeout-seconds",
        type=float,
        default=defaults.WEBHOOK_TIMEOUT,
        help="timeoutSeconds of the ValidatingWebhookConfiguration: the dry run of the node Job "
        f"keeps {defaults.WEBHOOK_TIMEOUT_MARGIN:g} s short of it, else it is skipped with a warning",
    )
    g.add_argument(
        "--webhook-client-ca-file",
        default=None,
        metavar="FILE",
        help="PEM file of the CAs of the API server's client certificate: when set, the webhook "
        "requires one (the AdmissionConfiguration's kubeConfigFile) and refuses other clients "
        "at the handshake; reloaded when it changes (default: any client)",
    )
    g.add_argument(
        "--node-parameter-keys",
        type=allowed_keys,
        default=allowed_keys(defaults.NODE_PARAMETER_KEYS),
        metavar="KEYS",
        help="comma-separated node label and annotation keys (exact, or prefix/*) that any DaemonJob may pass "
        "to its Jobs (spec.nodeParameters); other keys only who may get nodes, checked by the webhook "
        "(default: none)",
    )
    g.add_argument(
        "--webhook-cert-extra-names",
        default="",
        help="more DNS names or IP addresses for the certificate, comma-separated",
    )


reviews_total_help = (
    "AdmissionReviews answered, by operation (CREATE, UPDATE, DELETE, CONNECT, other) and result "
    "(allowed, warned, refused, malformed)."
)


def operation_label(operation: str) -> str:
    """The request's operation as a label value from a closed set: a value per distinct string
    sent would be a series per value, kept for the life of the process."""
    return operation if operation in OPERATIONS else "other" if operation else ""


@dataclass
class Webhook:
    server: Server
    certificates: SelfManagedCertificates | None
    cert_dir: Path

    def problem(self) -> str | None:
        """Why the webhook does not serve (readiness), or None."""
        if self.certificates is not None and (problem := self.certificates.healthy()):
            return f"the webhook does not serve: {problem}"
        problem = self.server.tls_problem()
        return None if problem is None else f"the webhook does not serve: {problem}"

    def stop(self) -> None:
        if self.certificates is not None:
            self.certificates.stop()
        self.server.stop()


def start(
    args: argparse.Namespace,
    address: tuple[str, int],
    kube: Kube,
    registry: CollectorRegistry,
    maintenance_namespaces: frozenset[str] = frozenset(),
    nodes: Callable[[], Iterable[Mapping[str, Any]]] | None = None,
) -> Webhook:
    """Keep the certificates (first look done before serving), then serve; OSError if the address is taken.
    `maintenance_namespaces`: where DaemonJobs may ask for node maintenance (--node-maintenance-namespaces);
    `nodes`: the controller's node cache, where the dry run finds an eligible node (None: no dry run)."""
    reviews = Counter("daemonjob_webhook_reviews_total", reviews_total_help, ["operation", "result"], registry=registry)
    cert_dir = Path(args.webhook_cert_dir)
    certificates = None
    if args.webhook_cert_secret:
        # Imported here: certificates are made with the cryptography package (some 10 MB),
        # which a process without the webhook, or with provided certificates, never loads.
        from daemonjob.admission.certificates import SelfManagedCertificates, service_names

        namespace = args.webhook_service_namespace
        names = service_names(args.webhook_service_name, namespace)
        names += [n.strip() for n in args.webhook_cert_extra_names.split(",") if n.strip()]
        certificates = SelfManagedCertificates(
            kube, namespace, args.webhook_cert_secret, args.webhook_configuration_name, names, cert_dir
        )
        certificates.check()

    # Its own client, without the controller's rate limiter: an admission never queues behind the workers.
    own = Kube(kube.configuration, on_request=kube.on_request)
    reviewer = CachedAccessReviewer(KubeAccessReviewer(own))
    dry_run = ClusterDryRun(own, nodes) if nodes is not None else None
    budget = args.webhook_timeout_seconds - defaults.WEBHOOK_TIMEOUT_MARGIN

    node_keys = args.node_parameter_keys

    def validate(body: bytes, client: str) -> tuple[int, str, bytes]:
        mine = reviewer.for_client(client)  # the SubjectAccessReviews this client may cost

        def powers(request: Mapping[str, Any]) -> list[Problem]:
            return [*powers_problems(request, mine), *node_reads_problems(request, mine, node_keys)]

        answer = handle(body, Checks(maintenance_namespaces, powers, dry_run, time.monotonic() + budget))
        reviews.labels(operation_label(answer.operation), answer.result).inc()
        return answer.code, "application/json", answer.body

    server = Server(
        address,
        {},
        "webhook",
        post_routes={
            defaults.WEBHOOK_PATH: Upload(
                validate, defaults.WEBHOOK_MAX_REQUEST_BYTES, defaults.WEBHOOK_MEMORY_PER_BYTE, with_client=True
            )
        },
        cert_dir=cert_dir,
        client_ca=args.webhook_client_ca_file or None,
        max_connections=defaults.WEBHOOK_MAX_CONNECTIONS,
        body_bytes=defaults.WEBHOOK_BODY_BYTES,
        handling_bytes=defaults.WEBHOOK_HANDLING_BYTES,
    ).start()
    if certificates is not None:
        certificates.start_loop()
    return Webhook(server, certificates, cert_dir)
