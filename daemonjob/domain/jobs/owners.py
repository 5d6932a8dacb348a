"""Whose a Job is: the controller reference a DaemonJob's Jobs carry, and their owner id.

The owner id ties a Job to its DaemonJob only within the DaemonJob's namespace.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from daemonjob.domain.jobs.contract import meta_of
from daemonjob.domain.shared.apinames import API_VERSION, GROUP, KIND

__all__ = ["controller_ref", "daemonjob_ref", "owner_uid", "owner_id", "job_owner_id", "owner_reference"]

_GROUP_PREFIX = GROUP + "/"


def controller_ref(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The ownerReference marked controller, whoever it names."""
    for ref in meta_of(obj).get("ownerReferences") or ():
        if ref.get("controller"):
            return ref
    return None


def daemonjob_ref(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The controller reference if it names a DaemonJob (any version of the group)."""
    ref = controller_ref(obj)
    if ref is None or ref.get("kind") != KIND:
        return None
    api = ref.get("apiVersion") or ""
    return ref if api.startswith(_GROUP_PREFIX) or api == GROUP else None  # the group, any version


def owner_uid(obj: Mapping[str, Any]) -> str:
    """The uid of the DaemonJob controlling `obj` ("" for none)."""
    ref = daemonjob_ref(obj)
    return (ref.get("uid") or "") if ref is not None else ""


def owner_id(namespace: str, uid: str) -> str:
    """A DaemonJob as the owner of Jobs: "namespace/uid". Owner references are namespace-local
    in Kubernetes, so a Job is a DaemonJob's only in the DaemonJob's namespace; every cache
    index and kept record that ties a Job to its owner keys it by this, never by the uid alone."""
    return f"{namespace}/{uid}"


def job_owner_id(obj: Mapping[str, Any]) -> str:
    """The owner id (`owner_id`) of the DaemonJob controlling `obj` ("" for none): its uid, in
    the Job's own namespace. A Job elsewhere carrying that uid gets another id, tied to nothing."""
    ref = daemonjob_ref(obj)
    if ref is None:
        return ""
    return f"{meta_of(obj).get('namespace') or ''}/{ref.get('uid') or ''}"


def owner_reference(dj: Mapping[str, Any]) -> dict[str, Any]:
    """The controller reference of a DaemonJob's Jobs; blockOwnerDeletion for Foreground deletes."""
    meta = dj.get("metadata") or {}
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "name": meta.get("name"),
        "uid": meta.get("uid"),
        "controller": True,
        "blockOwnerDeletion": True,
    }
