"""The verdict kstatus-aware tools (Flux, kpt, Argo CD, `kubectl wait`) read from a custom resource.

Follows the generic rules of kstatus (`sigs.k8s.io/cli-utils/pkg/kstatus/status`) for a
kind without type-specific rules: a deletion timestamp reads Terminating; an unobserved
generation InProgress; then the first of `Reconciling=True` (InProgress) or `Stalled=True`
(Failed) in the order of `status.conditions`; otherwise Current.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["Verdict", "verdict", "IN_PROGRESS", "FAILED", "CURRENT", "TERMINATING"]

IN_PROGRESS = "InProgress"
FAILED = "Failed"
CURRENT = "Current"
TERMINATING = "Terminating"


@dataclass(frozen=True, slots=True)
class Verdict:
    status: str
    reason: str = ""
    message: str = ""


def verdict(obj: Mapping[str, Any]) -> Verdict:
    meta = obj.get("metadata") or {}
    status = obj.get("status") or {}
    if meta.get("deletionTimestamp"):
        return Verdict(TERMINATING, message="Resource scheduled for deletion")
    generation = meta.get("generation")
    observed = status.get("observedGeneration")
    if generation is not None and observed is not None and observed != generation:
        return Verdict(
            IN_PROGRESS,
            "LatestGenerationNotObserved",
            f"generation is {generation}, but latest observed generation is {observed}",
        )
    for cond in status.get("conditions") or ():
        if cond.get("status") != "True":
            continue
        if cond.get("type") == "Reconciling":
            return Verdict(IN_PROGRESS, cond.get("reason") or "", cond.get("message") or "")
        if cond.get("type") == "Stalled":
            return Verdict(FAILED, cond.get("reason") or "", cond.get("message") or "")
    return Verdict(CURRENT, message="Resource is current")
