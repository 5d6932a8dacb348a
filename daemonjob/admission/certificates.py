"""Self-managed webhook certificates: a CA and a serving certificate kept in one Secret.

The conventions of open-policy-agent/cert-controller: the Secret (shipped empty with the
manifests, so the controller needs `get`/`update` on that one name only, never `create`)
holds `ca.crt`, `ca.key`, `tls.crt` and `tls.key`; the CA lives 10 years and the serving
certificate 1 year, each renewed when less than a quarter of its life remains; the CA is
written into every webhook of the named ValidatingWebhookConfiguration.

Every replica runs the same loop, leader or not: read the Secret, renew what is due (a
conflicting write means another replica renewed first: read again and use theirs), make
sure the configuration's caBundle trusts the Secret's CA, then write `tls.crt`/`tls.key`
into the cert dir, from which the webhook server reloads. The new CA enters the bundle
before any certificate it signed is served, and CAs still valid stay in the bundle (the
newest few), so replicas still serving the previous certificate keep being trusted while
they catch up.
"""

from __future__ import annotations

import base64
import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path

import structlog

from daemonjob import defaults
from daemonjob.machinery.client.kube import ApiError, Kube, path_for
from daemonjob.machinery.server import certs

log = structlog.get_logger("daemonjob.admission.certificates")

WEBHOOKS_API = "admissionregistration.k8s.io/v1"
CA_CERT, CA_KEY, TLS_CERT, TLS_KEY = "ca.crt", "ca.key", "tls.crt", "tls.key"
BUNDLE_MAX = 3  # CAs kept trusted at once: the current one and those it replaced, still valid


def service_names(service: str, namespace: str) -> list[str]:
    """The DNS names the API server may use for a webhook Service."""
    return [service, f"{service}.{namespace}", f"{service}.{namespace}.svc", f"{service}.{namespace}.svc.cluster.local"]


def _due(pem: bytes | None, lifetime: float, now: datetime, renew_fraction: float) -> bool:
    """Missing, unreadable, or with less than `renew_fraction` of `lifetime` left."""
    if not pem:
        return True
    try:
        not_after = certs.not_after(pem)
    except ValueError:
        return True
    return not_after - now < timedelta(seconds=lifetime * renew_fraction)


def merged_bundle(current_ca: bytes, bundle: bytes, now: datetime) -> bytes:
    """`current_ca` first, then the still-valid CAs of `bundle` (newest first), at most BUNDLE_MAX."""
    kept = [current_ca.strip()]
    for pem in certs.split_pem(bundle):
        try:
            valid = certs.not_after(pem) > now
        except ValueError:
            valid = False
        if valid and pem.strip() not in kept:
            kept.append(pem.strip())
    return b"\n".join(kept[:BUNDLE_MAX]) + b"\n"


@dataclass
class SelfManagedCertificates:
    """Keeps the Secret's certificates fresh, the configuration's caBundle current, the cert dir written."""

    kube: Kube
    namespace: str
    secret: str
    configuration: str
    dns_names: Sequence[str]
    cert_dir: Path
    interval: float = defaults.CERT_CHECK_INTERVAL
    ca_validity: float = defaults.CA_VALIDITY
    cert_validity: float = defaults.SERVING_CERT_VALIDITY
    renew_fraction: float = defaults.CERT_RENEW_FRACTION
    now: Callable[[], datetime] = field(default=lambda: datetime.now(timezone.utc))
    problem: str | None = "the serving certificate has not been read yet"
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    # -- one check -----------------------------------------------------------------------------
    def check(self) -> None:
        """Renew what is due, trust the CA, write the files; `problem` says what failed, if anything."""
        try:
            for _ in range(5):
                secret = self.kube.get(path_for("v1", "secrets", self.namespace, self.secret))
                data = {k: base64.b64decode(v) for k, v in (secret.get("data") or {}).items()}
                renewed = self._renewed(data)
                if renewed is None:
                    break
                self._trust(renewed[CA_CERT])  # before anything signed by a new CA is served
                secret["data"] = {k: base64.b64encode(v).decode() for k, v in renewed.items()}
                secret["type"] = secret.get("type") or "kubernetes.io/tls"
                try:
                    self.kube.put(path_for("v1", "secrets", self.namespace, self.secret), secret)
                except ApiError as exc:
                    if exc.conflict:
                        continue  # another replica renewed first: use its certificates
                    raise
                log.info(
                    "webhook certificate renewed",
                    secret=f"{self.namespace}/{self.secret}",
                    ca_renewed=renewed[CA_CERT] != data.get(CA_CERT),
                    not_after=certs.not_after(renewed[TLS_CERT]).isoformat(),
                )
                data = renewed
                break
            else:
                raise RuntimeError("the Secret kept changing under every renewal")
            self._trust(data[CA_CERT])
            self._write_files(data)
            self.problem = None
        except ApiError as exc:
            self.problem = self._explain(exc)
            log.error("webhook certificates", error=self.problem)
        except Exception as exc:
            self.problem = f"webhook certificates: {exc}"
            log.error("webhook certificates", error=repr(exc))

    def _explain(self, exc: ApiError) -> str:
        if exc.not_found:
            return (
                f"webhook certificates: {exc} (the Secret {self.namespace}/{self.secret} and the "
                f"ValidatingWebhookConfiguration {self.configuration} come with the manifests)"
            )
        return f"webhook certificates: {exc}"

    def _renewed(self, data: dict[str, bytes]) -> dict[str, bytes] | None:
        """New Secret data when something is due, else None."""
        now = self.now()
        ca_cert, ca_key = data.get(CA_CERT), data.get(CA_KEY)
        new_ca = not ca_key or _due(ca_cert, self.ca_validity, now, self.renew_fraction)
        if not new_ca:
            assert ca_cert is not None and ca_key is not None
            ca = certs.KeyPair(ca_cert, ca_key)
            current = data.get(TLS_CERT)
            if (
                current
                and data.get(TLS_KEY)
                and not _due(current, self.cert_validity, now, self.renew_fraction)
                and certs.issued_by(current, ca.cert_pem)
                and certs.covers(current, self.dns_names)
            ):
                return None
        else:
            ca = certs.new_ca(f"daemonjob-webhook-ca@{int(now.timestamp())}", self.ca_validity, now=now)
        serving = certs.issue(ca, self.dns_names, self.cert_validity, now=now)
        return {CA_CERT: ca.cert_pem, CA_KEY: ca.key_pem, TLS_CERT: serving.cert_pem, TLS_KEY: serving.key_pem}

    def _trust(self, ca_pem: bytes) -> None:
        path = path_for(WEBHOOKS_API, "validatingwebhookconfigurations", name=self.configuration)
        for _ in range(5):
            config = self.kube.get(path)
            changed = False
            for hook in config.get("webhooks") or []:
                client = hook.setdefault("clientConfig", {})
                old = base64.b64decode(client.get("caBundle") or "")
                bundle = merged_bundle(ca_pem, old, self.now())
                if bundle != old:
                    client["caBundle"] = base64.b64encode(bundle).decode()
                    changed = True
            if not changed:
                return
            try:
                self.kube.put(path, config)
                log.info("webhook CA bundle updated", configuration=self.configuration)
                return
            except ApiError as exc:
                if not exc.conflict:
                    raise
        raise RuntimeError(f"the ValidatingWebhookConfiguration {self.configuration} kept changing")

    def _write_files(self, data: dict[str, bytes]) -> None:
        self.cert_dir.mkdir(parents=True, exist_ok=True)
        # Each file replaced atomically; a reload that reads a new key with the old certificate
        # fails to load the pair and keeps serving the previous one until the next look.
        for name in (TLS_KEY, TLS_CERT):
            target = self.cert_dir / name
            if target.exists() and target.read_bytes() == data[name]:
                continue
            tmp = self.cert_dir / f".{name}.tmp"
            with open(tmp, "wb", opener=lambda p, f: os.open(p, f, 0o600)) as out:
                out.write(data[name])
            os.replace(tmp, target)

    # -- the loop ------------------------------------------------------------------------------
    def start_loop(self) -> SelfManagedCertificates:
        """Look again every `interval` seconds (the first look is the caller's check())."""
        self._thread = threading.Thread(target=self._run, name="webhook-certificates", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.check()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)

    def healthy(self) -> str | None:
        return self.problem
