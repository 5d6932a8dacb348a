"""Self-managed certificates: what is renewed when, what the bundle trusts, what a conflict does."""

from __future__ import annotations

import base64
import copy
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from daemonjob.admission.certificates import SelfManagedCertificates, merged_bundle, service_names
from daemonjob.machinery.client.kube import ApiError
from daemonjob.machinery.server import certs

SECRET_PATH = "/api/v1/namespaces/daemonjob-system/secrets/tls"
CONFIG_PATH = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/hook"
YEAR = 365 * 24 * 3600.0


class FakeKube:
    """get/put with resourceVersion conflicts, as the API server answers them."""

    def __init__(self) -> None:
        self.objects: dict[str, dict[str, Any]] = {
            SECRET_PATH: {
                "metadata": {"name": "tls", "resourceVersion": "1"},
                "type": "kubernetes.io/tls",
                "data": {"tls.crt": "", "tls.key": ""},
            },
            CONFIG_PATH: {
                "metadata": {"name": "hook", "resourceVersion": "1"},
                "webhooks": [
                    {"name": "a", "clientConfig": {"url": "https://x"}},
                    {"name": "b", "clientConfig": {"url": "https://y"}},
                ],
            },
        }
        self.puts: list[str] = []
        self.before_put: Any = None

    def get(self, path: str) -> dict[str, Any]:
        if path not in self.objects:
            raise ApiError(404, "NotFound", f"{path} not found")
        return copy.deepcopy(self.objects[path])

    def put(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        if self.before_put is not None:
            hook, self.before_put = self.before_put, None
            hook()
        current = self.objects[path]
        if body["metadata"]["resourceVersion"] != current["metadata"]["resourceVersion"]:
            raise ApiError(409, "Conflict", "the object has been modified")
        body = copy.deepcopy(body)
        body["metadata"]["resourceVersion"] = str(int(current["metadata"]["resourceVersion"]) + 1)
        self.objects[path] = body
        self.puts.append(path)
        return body

    def secret(self) -> dict[str, bytes]:
        return {k: base64.b64decode(v) for k, v in self.objects[SECRET_PATH]["data"].items()}

    def bundles(self) -> list[bytes]:
        return [
            base64.b64decode(h["clientConfig"].get("caBundle") or "") for h in self.objects[CONFIG_PATH]["webhooks"]
        ]


class Clock:
    def __init__(self) -> None:
        self.t = datetime(2026, 1, 1, tzinfo=timezone.utc)

    def __call__(self) -> datetime:
        return self.t


def keeper(kube: FakeKube, tmp_path: Path, clock: Clock, name: str = "a") -> SelfManagedCertificates:
    return SelfManagedCertificates(
        kube,
        "daemonjob-system",
        "tls",
        "hook",
        [*service_names("svc", "daemonjob-system"), "127.0.0.1"],
        tmp_path / name,
        now=clock,
    )


def test_an_empty_secret_gets_a_ca_and_a_certificate_for_the_service_names(tmp_path: Path) -> None:
    kube, clock = FakeKube(), Clock()
    k = keeper(kube, tmp_path, clock)
    k.check()
    assert k.healthy() is None
    data = kube.secret()
    assert set(data) == {"ca.crt", "ca.key", "tls.crt", "tls.key"}
    assert certs.issued_by(data["tls.crt"], data["ca.crt"])
    assert certs.covers(data["tls.crt"], ["svc.daemonjob-system.svc", "127.0.0.1"])
    assert kube.bundles() == [data["ca.crt"].strip() + b"\n"] * 2
    assert (tmp_path / "a" / "tls.crt").read_bytes() == data["tls.crt"]
    assert (tmp_path / "a" / "tls.key").read_bytes() == data["tls.key"]
    puts = len(kube.puts)
    k.check()  # nothing due: nothing written
    assert len(kube.puts) == puts


def test_the_serving_certificate_is_renewed_a_quarter_before_expiry_and_the_ca_kept(tmp_path: Path) -> None:
    kube, clock = FakeKube(), Clock()
    k = keeper(kube, tmp_path, clock)
    k.check()
    first = kube.secret()
    clock.t += timedelta(seconds=YEAR * 0.74)
    k.check()
    assert kube.secret() == first
    clock.t += timedelta(seconds=YEAR * 0.02)
    k.check()
    second = kube.secret()
    assert second["tls.crt"] != first["tls.crt"] and second["ca.crt"] == first["ca.crt"]
    assert (tmp_path / "a" / "tls.crt").read_bytes() == second["tls.crt"]
    assert kube.bundles()[0] == first["ca.crt"].strip() + b"\n"


def test_a_new_ca_joins_the_bundle_beside_the_previous_one(tmp_path: Path) -> None:
    kube, clock = FakeKube(), Clock()
    k = keeper(kube, tmp_path, clock)
    k.check()
    first = kube.secret()
    clock.t += timedelta(days=365 * 7.6)  # the CA (10 years) has less than a quarter left
    k.check()
    second = kube.secret()
    assert second["ca.crt"] != first["ca.crt"]
    assert certs.issued_by(second["tls.crt"], second["ca.crt"])
    assert certs.split_pem(kube.bundles()[0]) == [second["ca.crt"].strip(), first["ca.crt"].strip()]


def test_a_conflict_means_another_replica_renewed_and_its_certificate_is_used(tmp_path: Path) -> None:
    kube, clock = FakeKube(), Clock()
    other = keeper(kube, tmp_path, clock, "b")
    mine = keeper(kube, tmp_path, clock, "a")
    kube.before_put = other.check  # the other replica writes between my read and my write
    mine.check()
    assert mine.healthy() is None
    data = kube.secret()
    assert (tmp_path / "a" / "tls.crt").read_bytes() == data["tls.crt"] == (tmp_path / "b" / "tls.crt").read_bytes()


def test_a_missing_secret_is_reported_not_raised(tmp_path: Path) -> None:
    kube, clock = FakeKube(), Clock()
    del kube.objects[SECRET_PATH]
    k = keeper(kube, tmp_path, clock)
    k.check()
    assert "daemonjob-system/tls" in (k.healthy() or "") and "manifests" in (k.healthy() or "")


def test_bundle_drops_expired_cas_and_keeps_at_most_three() -> None:
    now = datetime.now(timezone.utc)
    cas = [certs.new_ca(f"ca{i}", 3600).cert_pem for i in range(5)]
    bundle = merged_bundle(cas[0], b"".join(cas[1:]), now)
    assert len(certs.split_pem(bundle)) == 3
    assert merged_bundle(cas[0], cas[1], now + timedelta(hours=2)) == cas[0].strip() + b"\n"


@pytest.mark.parametrize("names", [["svc.daemonjob-system.svc"], ["127.0.0.1"]])
def test_a_certificate_missing_a_name_is_reissued(tmp_path: Path, names: list[str]) -> None:
    kube, clock = FakeKube(), Clock()
    k = keeper(kube, tmp_path, clock)
    k.check()
    data = kube.secret()
    ca = certs.KeyPair(data["ca.crt"], data["ca.key"])
    narrow = certs.issue(ca, ["other.example"], YEAR)
    kube.objects[SECRET_PATH]["data"]["tls.crt"] = base64.b64encode(narrow.cert_pem).decode()
    kube.objects[SECRET_PATH]["data"]["tls.key"] = base64.b64encode(narrow.key_pem).decode()
    k.check()
    assert certs.covers(kube.secret()["tls.crt"], names)
