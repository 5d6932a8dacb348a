"""Writes of a DaemonJob's records on one Node besides the cordon and the release
(nodework.py): marking a record kept (keepFailedCordoned), removing a deleted DaemonJob's
drain outcome. Each decided on a fresh read and guarded by its resourceVersion, as every
Node write of node maintenance is."""

from __future__ import annotations

from daemonjob.controller.nodework.nodecontrol import NodeControl
from daemonjob.domain.shared.noderecord import ANNOTATION_MAINTENANCE, DrainOutcome, NodeRecord, record_of
from daemonjob.machinery.client.conflicts import retry_on_conflict
from daemonjob.machinery.client.kube import ApiError

__all__ = ["forget_outcome", "keep_node"]


def keep_node(control: NodeControl, name: str, record: NodeRecord) -> bool:
    """Write `record` (marked kept) over the same cordon's record on node `name`; False when
    the node no longer carries that cordon's record, or carries it marked already."""

    def attempt() -> bool:  # a conflict (the Node changed since read) is decided again on a fresh read
        try:
            node = control.get_node(name)
        except ApiError as exc:
            if exc.not_found:
                return False
            raise
        held = record_of(node)
        if held is None or held.kept or not held.same_cordon(record):
            return False
        patch = {"metadata": {"annotations": {ANNOTATION_MAINTENANCE: record.text()}}}
        control.patch_node(name, patch, (node.get("metadata") or {}).get("resourceVersion") or "")
        return True

    return retry_on_conflict(attempt, gave_up=f"node {name} kept changing; keeping it cordoned is retried")


def forget_outcome(control: NodeControl, name: str, outcome: DrainOutcome) -> bool:
    """Remove a deleted DaemonJob's drain outcome from node `name`; False when it is not there."""
    try:
        node = control.get_node(name)
    except ApiError as exc:
        if exc.not_found:
            return False
        raise
    if outcome.annotation not in ((node.get("metadata") or {}).get("annotations") or {}):
        return False
    patch = {"metadata": {"annotations": {outcome.annotation: None}}}
    control.patch_node(name, patch, (node.get("metadata") or {}).get("resourceVersion") or "")
    return True
