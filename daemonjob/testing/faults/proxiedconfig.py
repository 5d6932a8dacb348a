"""A kubeconfig whose clusters point at a fault proxy, its file paths made absolute."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

__all__ = ["proxied_kubeconfig"]

_PATH_KEYS = {"cluster": ("certificate-authority",), "user": ("client-certificate", "client-key", "tokenFile")}


def proxied_kubeconfig(
    source: str | Path, dest: str | Path, server: str, *, user: str | None = None, token: str | None = None
) -> Path:
    """A copy of `source` whose every cluster points at `server` (the proxy).

    The API server's certificate must name the proxy's address: the local cluster's names
    127.0.0.1, so https://127.0.0.1:<proxy port> verifies. File paths are made absolute (they
    are relative to the kubeconfig's own directory). With `token` (and `user`, its name), the
    current context authenticates with that bearer token instead.
    """
    source = Path(source)
    config: dict[str, Any] = yaml.safe_load(source.read_text())
    base = source.resolve().parent
    for section, key in (("clusters", "cluster"), ("users", "user")):
        for entry in config.get(section) or []:
            body = entry.get(key) or {}
            for field in _PATH_KEYS[key]:
                if body.get(field) and not os.path.isabs(body[field]):
                    body[field] = str(base / body[field])
    for entry in config.get("clusters") or []:
        entry["cluster"]["server"] = server
    if token is not None:
        name = user or "proxied"
        config["users"] = [
            *(u for u in config.get("users") or [] if u.get("name") != name),
            {"name": name, "user": {"token": token}},
        ]
        current = config.get("current-context")
        for ctx in config.get("contexts") or []:
            if ctx.get("name") == current:
                ctx["context"]["user"] = name
    dest = Path(dest)
    dest.write_text(yaml.safe_dump(config, sort_keys=False))
    dest.chmod(0o600)
    return dest
