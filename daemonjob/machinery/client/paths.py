"""REST paths of the Kubernetes API, and what a request is (verb, resource) for metrics.

Pure string work, apart from the client (kube.py, which re-exports them) so both stay small.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any
from urllib.parse import quote, urlencode

__all__ = ["micro_time", "path_for", "request_info", "with_query"]


def with_query(path: str, params: Mapping[str, Any] | None) -> str:
    query = {k: _param(v) for k, v in (params or {}).items() if v is not None}
    return path + (f"?{urlencode(query)}" if query else "")


def _param(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def request_info(method: str, path: str) -> tuple[str, str]:
    """(Kubernetes verb, resource[/subresource]) of a request, for bounded-cardinality metrics."""
    parts = [p for p in path.split("?")[0].split("/") if p]
    # /api/v1/[namespaces/ns/]resource[/name[/sub]] or /apis/g/v/[namespaces/ns/]resource/...
    rest = parts[2:] if parts[:1] == ["api"] else parts[3:]
    if len(rest) > 2 and rest[0] == "namespaces":
        rest = rest[2:]
    resource = (rest[0] if rest else "") + ("/" + rest[2] if len(rest) > 2 else "")
    named = len(rest) > 1
    verb = {
        "GET": "get" if named else "list",
        "WATCH": "watch",
        "POST": "create",
        "PUT": "update",
        "PATCH": "patch",
        "DELETE": "delete" if named else "deletecollection",
    }.get(method, method.lower())
    return verb, resource


def micro_time(value: datetime) -> str:
    """metav1.MicroTime as the API serialises it (Leases, Events): UTC, microseconds."""
    return value.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def path_for(
    api_version: str, plural: str, namespace: str | None = None, name: str | None = None, subresource: str | None = None
) -> str:
    """REST path of a resource collection or object."""
    base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
    if namespace:
        base += f"/namespaces/{quote(namespace)}"
    base += f"/{plural}"
    if name:
        base += f"/{quote(name)}"
    if subresource:
        base += f"/{subresource}"
    return base
