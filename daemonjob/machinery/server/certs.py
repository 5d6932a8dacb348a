"""X.509 for the servers: a self-signed CA, serving certificates it issues, what a PEM says.

P-256 keys, SANs for DNS names and IP addresses (Go clients check the SAN, never the CN),
validity starting an hour back for clocks that lag (cert-controller does the same).
The pair on disk and the TLS context reloaded from it are in `tls.py` (re-exported here):
serving needs only those, and the cryptography package costs some 10 MB of memory, so a
process loads this module only once it makes or reads a certificate.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Sequence
from datetime import datetime, timedelta, timezone

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from daemonjob.machinery.server.tls import TLS_CERT, TLS_KEY, KeyPair, ReloadingTLS, TLSProvider, read_dir, write_dir

__all__ = [
    "KeyPair",
    "new_ca",
    "issue",
    "not_after",
    "split_pem",
    "issued_by",
    "covers",
    "read_dir",
    "write_dir",
    "TLSProvider",
    "ReloadingTLS",
    "TLS_CERT",
    "TLS_KEY",
]

_BACKDATE = timedelta(hours=1)
_PEM_RE = re.compile(rb"-----BEGIN CERTIFICATE-----.+?-----END CERTIFICATE-----\n?", re.S)


def _now(now: datetime | None) -> datetime:
    return now if now is not None else datetime.now(timezone.utc)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def new_ca(common_name: str, validity: float, now: datetime | None = None) -> KeyPair:
    """A self-signed CA valid `validity` seconds."""
    start = _now(now)
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start - _BACKDATE)
        .not_valid_after(start + timedelta(seconds=validity))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return KeyPair(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))


def _san(name: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(name))
    except ValueError:
        return x509.DNSName(name)


def issue(
    ca: KeyPair, names: Sequence[str], validity: float, now: datetime | None = None, *, client: bool = False
) -> KeyPair:
    """A serving certificate for `names` (DNS names or IP addresses), signed by `ca`; with
    `client`, a client certificate instead (the first name its common name)."""
    start = _now(now)
    ca_cert = x509.load_pem_x509_certificate(ca.cert_pem)
    ca_key = serialization.load_pem_private_key(ca.key_pem, password=None)
    if not isinstance(ca_key, (ec.EllipticCurvePrivateKey, rsa.RSAPrivateKey)):
        raise ValueError(f"a CA key of type {type(ca_key).__name__} cannot sign (EC or RSA only)")
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0])]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start - _BACKDATE)
        .not_valid_after(min(start + timedelta(seconds=validity), ca_cert.not_valid_after_utc))
        .add_extension(x509.SubjectAlternativeName([_san(n) for n in names]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH if client else ExtendedKeyUsageOID.SERVER_AUTH]),
            critical=False,
        )
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    return KeyPair(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))


def _load(pem: bytes) -> x509.Certificate:
    try:
        return x509.load_pem_x509_certificate(pem)
    except ValueError as exc:
        raise ValueError(f"not a PEM certificate: {exc}") from None


def not_after(pem: bytes) -> datetime:
    """The end of validity of the first certificate in `pem` (ValueError if none)."""
    return _load(pem).not_valid_after_utc


def split_pem(bundle: bytes) -> list[bytes]:
    """The certificates of a PEM bundle, each stripped."""
    return [m.group(0).strip() for m in _PEM_RE.finditer(bundle or b"")]


def issued_by(cert_pem: bytes, ca_pem: bytes) -> bool:
    """Whether `ca_pem`'s key signed `cert_pem`."""
    try:
        _load(cert_pem).verify_directly_issued_by(_load(ca_pem))
        return True
    except (ValueError, TypeError, InvalidSignature):
        return False


def covers(cert_pem: bytes, names: Sequence[str]) -> bool:
    """Whether every name is among the certificate's SANs."""
    try:
        san = _load(cert_pem).extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except (ValueError, x509.ExtensionNotFound):
        return False
    have = {str(v) for v in san.get_values_for_type(x509.DNSName)}
    have |= {str(v) for v in san.get_values_for_type(x509.IPAddress)}
    return all(str(_san(n).value) in have for n in names)
