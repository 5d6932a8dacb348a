"""certs: a CA, the certificates it issues, the pair on disk and its reload into a fresh SSLContext."""

from __future__ import annotations

import ssl
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

from daemonjob.machinery.server import certs


def test_issue_for_dns_names_and_ips_signed_by_the_ca():
    now = datetime(2030, 1, 1, tzinfo=timezone.utc)
    ca = certs.new_ca("test-ca", 3600 * 24, now=now)
    pair = certs.issue(ca, ["svc.ns.svc", "10.0.0.1", "::1"], 3600, now=now)
    assert certs.issued_by(pair.cert_pem, ca.cert_pem)
    assert not certs.issued_by(pair.cert_pem, certs.new_ca("other", 3600).cert_pem)
    assert certs.covers(pair.cert_pem, ["svc.ns.svc", "10.0.0.1", "::1"])
    assert not certs.covers(pair.cert_pem, ["other.ns.svc"])
    assert certs.not_after(pair.cert_pem) == now + timedelta(seconds=3600)
    # never beyond its CA
    assert certs.not_after(certs.issue(ca, ["a"], 3600 * 48, now=now).cert_pem) == certs.not_after(ca.cert_pem)
    assert certs.split_pem(pair.cert_pem + b"\n" + ca.cert_pem) == [pair.cert_pem.strip(), ca.cert_pem.strip()]


def test_read_and_write_dir(tmp_path: Path):
    ca = certs.new_ca("ca", 3600)
    pair = certs.issue(ca, ["localhost"], 3600)
    certs.write_dir(tmp_path / "tls", pair)
    assert certs.read_dir(tmp_path / "tls") == pair
    assert (tmp_path / "tls" / "tls.key").stat().st_mode & 0o077 == 0


def test_reloader_yields_a_fresh_context_when_the_files_change(tmp_path: Path):
    reloader = certs.ReloadingTLS(tmp_path)
    assert reloader.context() is None and "no certificate" in (reloader.problem or "")
    ca = certs.new_ca("ca", 3600)
    certs.write_dir(tmp_path, certs.issue(ca, ["localhost"], 3600))
    first = reloader.context()
    assert isinstance(first, ssl.SSLContext) and reloader.problem is None
    assert reloader.context() is first  # unchanged files: the same context
    certs.write_dir(tmp_path, certs.issue(ca, ["localhost"], 3600))
    second = reloader.context()
    assert isinstance(second, ssl.SSLContext) and second is not first
    (tmp_path / "tls.key").write_bytes(b"not a key")  # half-replaced: the previous context stays
    assert reloader.context() is second


def test_the_controller_process_loads_cryptography_only_to_make_a_certificate():
    """cryptography is some 10 MB of the controller's memory: importing what `python -m daemonjob`
    imports loads none of it (a self-signed metrics certificate or the webhook's own load it)."""
    code = (
        "import sys, daemonjob.cli, daemonjob.machinery.server.serving\n"
        "print(sorted(m for m in sys.modules if m.startswith('cryptography'))[:3])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
