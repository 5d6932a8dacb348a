"""A person's release of nodes kept cordoned (keepFailedCordoned): the DaemonJob annotation
`daemonjob.io/release`, which `kubectl daemonjob release` writes and the controller acts on.

Its value maps each node to the `since` of the record it releases (the cordon it ends), so a
request never carries over to a later cordon of the same node and the controller never has
to clear it: once the node is released, the entry matches nothing. The plugin drops the
entries that match nothing when it writes the annotation again.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

__all__ = ["ANNOTATION_RELEASE", "release_requests", "release_text"]

ANNOTATION_RELEASE = "daemonjob.io/release"  # on a DaemonJob: {"node": "<since of its record>"}


def release_requests(dj: Mapping[str, Any]) -> dict[str, str]:
    """Node -> the `since` of the record to release; an unreadable value asks for nothing."""
    text = ((dj.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION_RELEASE)
    try:
        body = json.loads(text) if isinstance(text, str) else None
    except ValueError:
        return {}
    if not isinstance(body, Mapping):
        return {}
    return {k: v for k, v in body.items() if isinstance(k, str) and isinstance(v, str)}


def release_text(requests: Mapping[str, str]) -> str:
    return json.dumps(dict(sorted(requests.items())), separators=(",", ":"))
