"""TLS from files: a `tls.crt`/`tls.key` pair on disk and the server context reloaded from it.

What serving TLS needs, with the ssl module alone. Making and reading certificates
(`certs.py`) needs the cryptography package, some 10 MB of memory, which a process that
serves provided files, or no TLS, never loads.
"""

from __future__ import annotations

import os
import ssl
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

__all__ = [
    "KeyPair",
    "read_dir",
    "write_dir",
    "TLSProvider",
    "ReloadingTLS",
    "TLS_CERT",
    "TLS_KEY",
    "require_client_certificate",
]

TLS_CERT, TLS_KEY = "tls.crt", "tls.key"  # the file names of a kubernetes.io/tls Secret


@dataclass(frozen=True)
class KeyPair:
    cert_pem: bytes
    key_pem: bytes


def read_dir(cert_dir: str | Path) -> KeyPair:
    """The `tls.crt`/`tls.key` pair in a directory (OSError when missing)."""
    d = Path(cert_dir)
    return KeyPair((d / TLS_CERT).read_bytes(), (d / TLS_KEY).read_bytes())


def write_dir(cert_dir: str | Path, pair: KeyPair) -> None:
    """Write `tls.crt`/`tls.key` into a directory, the key readable by its owner only."""
    d = Path(cert_dir)
    d.mkdir(parents=True, exist_ok=True)
    (d / TLS_CERT).write_bytes(pair.cert_pem)
    key = d / TLS_KEY
    key.touch(mode=0o600, exist_ok=True)
    key.write_bytes(pair.key_pem)


def require_client_certificate(ctx: ssl.SSLContext, client_ca: Path) -> None:
    """Have `ctx` ask every client for a certificate and refuse the handshake without one that
    `client_ca` (PEM, one or more CAs) signed."""
    ctx.verify_mode = ssl.CERT_REQUIRED
    ctx.load_verify_locations(cafile=str(client_ca))


class TLSProvider(Protocol):
    """What a TLS server asks for each handshake: the context to use now, and why there is none."""

    problem: str | None

    def context(self) -> ssl.SSLContext | None: ...


class ReloadingTLS:
    """The server side of TLS from `tls.crt`/`tls.key` in a directory, reloaded when they change.

    Each new connection looks at the files (two stat calls: change time, inode, size, so a
    mounted Secret's symlink swap counts) and loads them again when they changed; a pair that
    does not load (a key replaced before its certificate) keeps the previous context until the
    next look.
    """

    def __init__(self, cert_dir: str | Path, client_ca: str | Path | None = None) -> None:
        self.cert_dir = Path(cert_dir)
        self.client_ca = Path(client_ca) if client_ca is not None else None
        self._lock = threading.Lock()
        self._stamp: tuple[tuple[int, int, int], ...] | None = None
        self._context: ssl.SSLContext | None = None
        self.problem: str | None = f"no certificate loaded from {self.cert_dir} yet"
        self.context()

    def context(self) -> ssl.SSLContext | None:
        crt, key = self.cert_dir / TLS_CERT, self.cert_dir / TLS_KEY
        files = (crt, key) if self.client_ca is None else (crt, key, self.client_ca)
        try:
            stamp = tuple((st.st_mtime_ns, st.st_ino, st.st_size) for st in map(os.stat, files))
        except OSError as exc:
            if self._context is None:
                where = self.client_ca if exc.filename == str(self.client_ca) else self.cert_dir
                self.problem = f"no certificate in {where}: {exc.strerror}"
            return self._context
        with self._lock:
            if stamp != self._stamp:
                ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
                ctx.minimum_version = ssl.TLSVersion.TLSv1_2
                where = self.cert_dir
                try:
                    ctx.load_cert_chain(crt, key)
                    if self.client_ca is not None:
                        where = self.client_ca
                        require_client_certificate(ctx, self.client_ca)
                    self._context, self._stamp, self.problem = ctx, stamp, None
                except (ssl.SSLError, OSError) as exc:
                    if self._context is None:
                        self.problem = f"the certificate in {where} does not load: {exc}"
            return self._context
