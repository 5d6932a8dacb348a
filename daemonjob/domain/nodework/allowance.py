"""Who may have nodes cordoned and drained: the namespaces --node-maintenance-namespaces names.

A cordon or a drain reaches every pod on the node, whoever owns it, so writing Nodes is the
cluster operator's to hand out, never a right that comes with creating a DaemonJob. The
webhook refuses a DaemonJob that asks for it elsewhere, and the controller sets Stalled
with the same problem for one that got in (written before the flag changed, or while the
webhook was away) and writes no Node for it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from daemonjob.domain.spec.maintenancespec import PATH
from daemonjob.domain.spec.spec import DaemonJobSpec
from daemonjob.domain.spec.validate import Problem, read_spec

__all__ = ["NODE_MAINTENANCE_NOT_ALLOWED", "FLAG", "maintenance_refusal", "refusal_message"]

NODE_MAINTENANCE_NOT_ALLOWED = "NodeMaintenanceNotAllowed"  # the Stalled reason, and the Event's
FLAG = "--node-maintenance-namespaces"


def refusal_message(namespace: str, allowed_namespaces: frozenset[str]) -> str:
    """Why a DaemonJob of `namespace` may not have nodes written, naming where it may."""
    allowed = ", ".join(sorted(allowed_namespaces)) if allowed_namespaces else f"none, {FLAG} is empty"
    return (
        f'{PATH}: Forbidden: node maintenance is not allowed in namespace "{namespace}" '
        f"(the controller allows it in: {allowed})"
    )


def maintenance_refusal(
    dj: Mapping[str, Any], allowed_namespaces: frozenset[str], spec: DaemonJobSpec | None = None
) -> Problem | None:
    """The problem of a DaemonJob that asks for node maintenance (cordon or drain) outside
    `allowed_namespaces`, or None (it asks for none, or may). `spec`: its spec as read (read here if None)."""
    if not (spec if spec is not None else read_spec(dj)).asks_maintenance:
        return None
    metadata = dj.get("metadata")
    namespace = (metadata.get("namespace") if isinstance(metadata, Mapping) else None) or ""
    if namespace in allowed_namespaces:
        return None
    return Problem(NODE_MAINTENANCE_NOT_ALLOWED, refusal_message(namespace, allowed_namespaces))
