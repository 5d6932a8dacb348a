"""etcd's v3 JSON gateway, for what the test bed asks of etcd itself (no etcdctl here)."""

from __future__ import annotations

import base64
import json
from typing import Any

import urllib3

__all__ = ["compact"]


def compact(port: int) -> int:
    """Compact etcd's history up to its current revision; returns that revision.

    A watch that reaches etcd from an older resourceVersion then fails with 410 Gone, as
    after a long disconnection.
    """
    http = urllib3.PoolManager()
    base = f"http://127.0.0.1:{port}/v3/kv"

    def post(path: str, body: dict[str, object]) -> dict[str, Any]:
        r = http.request(
            "POST",
            f"{base}/{path}",
            body=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
            timeout=10.0,
            retries=False,
        )
        if r.status != 200:
            raise RuntimeError(f"etcd {path}: HTTP {r.status}: {r.data[:300]!r}")
        return json.loads(r.data)

    revision = int(post("range", {"key": base64.b64encode(b"/").decode(), "limit": 1})["header"]["revision"])
    post("compaction", {"revision": revision, "physical": True})
    return revision
