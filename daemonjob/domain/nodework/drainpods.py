"""What a drain evicts from a node, and which PodDisruptionBudget would refuse an eviction now.

`pods_to_evict` is the drain's rule book (`kubectl drain`'s filters): the act layer evicts
what it says, and `kubectl daemonjob plan` shows the same verdicts before anything runs.
`refusing_budgets` reads the budgets as the API server's eviction handler does: a pod
guarded by a budget with no disruption allowed is refused (429), and each eviction it lets
through spends one of its allowed disruptions.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from daemonjob.domain.shared.apinames import LABEL_NAME
from daemonjob.domain.spec.labelrules import InvalidSelector
from daemonjob.domain.spec.maintenancespec import DrainOptions
from daemonjob.domain.spec.selectors import LabelMatcher, compile_label_selector

__all__ = ["MIRROR_ANNOTATION", "PodVerdicts", "pods_to_evict", "Budget", "budgets_of", "refusing_budgets"]

MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
ALWAYS_ALLOW = "AlwaysAllow"  # unhealthyPodEvictionPolicy: an unready pod may always be evicted


@dataclass(frozen=True, slots=True)
class PodVerdicts:
    evict: list[Mapping[str, Any]]
    waiting: list[str]  # namespace/name of the pods that keep the node from being drained
    blocked: list[str]  # why some of them are not evicted at all


def _controller_kind(pod: Mapping[str, Any]) -> str | None:
    for ref in (pod.get("metadata") or {}).get("ownerReferences") or ():
        if ref.get("controller"):
            return ref.get("kind") or ""
    return None


def pods_to_evict(
    pods: Iterable[Mapping[str, Any]],
    drain: DrainOptions,
    dj_namespace: str,
    dj_name: str,
    own_pod: tuple[str, str] | None = None,
) -> PodVerdicts:
    """kubectl drain's filters, with this DaemonJob's own pods, spec's ignorePodSelector and
    `own_pod` (this controller's namespace and name) left alone."""
    evict: list[Mapping[str, Any]] = []
    waiting: list[str] = []
    blocked: list[str] = []
    for pod in pods:
        meta = pod.get("metadata") or {}
        name = f"{meta.get('namespace')}/{meta.get('name')}"
        labels = meta.get("labels") or {}
        if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        if own_pod is not None and (meta.get("namespace"), meta.get("name")) == own_pod:
            continue
        if MIRROR_ANNOTATION in (meta.get("annotations") or {}) or _controller_kind(pod) == "DaemonSet":
            continue
        if meta.get("namespace") == dj_namespace and labels.get(LABEL_NAME) == dj_name:
            continue
        if drain.ignore_pods is not None and drain.ignore_pods(labels):
            continue
        waiting.append(name)
        if meta.get("deletionTimestamp"):
            continue  # on its way out: waited for, not evicted again
        volumes = (pod.get("spec") or {}).get("volumes") or ()
        if not drain.delete_emptydir_data and any("emptyDir" in v for v in volumes):
            blocked.append(f"pod {name} has emptyDir data (drain.deleteEmptyDirData is false)")
            continue
        if not drain.force and _controller_kind(pod) is None:
            blocked.append(f"pod {name} is not managed by a controller, it would not come back (drain.force is false)")
            continue
        evict.append(pod)
    return PodVerdicts(evict, waiting, blocked)


@dataclass(slots=True)
class Budget:
    """A PodDisruptionBudget as the eviction handler reads it: its selector and allowed disruptions."""

    namespace: str
    name: str
    matches: LabelMatcher
    allowed: int
    healthy_enough: bool  # currentHealthy >= desiredHealthy: an unready pod may go
    always_allow_unready: bool
    processed: bool  # the disruption controller has seen its current generation


def budgets_of(objects: Iterable[Mapping[str, Any]]) -> list[Budget]:
    """The budgets that select pods (a null selector selects none; an unreadable one is left out)."""
    out = []
    for pdb in objects:
        meta, spec, status = pdb.get("metadata") or {}, pdb.get("spec") or {}, pdb.get("status") or {}
        if spec.get("selector") is None:
            continue
        try:
            matches = compile_label_selector(spec.get("selector"), "spec.selector")
        except InvalidSelector:
            continue
        out.append(
            Budget(
                str(meta.get("namespace") or ""),
                str(meta.get("name") or ""),
                matches,
                int(status.get("disruptionsAllowed") or 0),
                int(status.get("currentHealthy") or 0) >= int(status.get("desiredHealthy") or 0),
                spec.get("unhealthyPodEvictionPolicy") == ALWAYS_ALLOW,
                int(status.get("observedGeneration") or 0) >= int(meta.get("generation") or 0),
            )
        )
    return out


def _ready(pod: Mapping[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or ()
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def refusing_budgets(pods: Sequence[Mapping[str, Any]], budgets: Sequence[Budget]) -> dict[str, str]:
    """namespace/name of each pod whose eviction a budget would refuse now -> why, evicting
    `pods` in order (each eviction let through spends one disruption of its budgets)."""
    refused: dict[str, str] = {}
    for pod in pods:
        meta = pod.get("metadata") or {}
        namespace, labels = meta.get("namespace") or "", meta.get("labels") or {}
        mine = [b for b in budgets if b.namespace == namespace and b.matches(labels)]
        key = f"{namespace}/{meta.get('name')}"
        if len(mine) > 1:
            names = ", ".join(b.name for b in mine)
            refused[key] = f"more than one PodDisruptionBudget selects the pod ({names}): the eviction fails"
            continue
        if not mine:
            continue
        budget = mine[0]
        if not budget.processed:
            refused[key] = f'PodDisruptionBudget "{budget.name}" is not yet processed by the disruption controller'
        elif not _ready(pod) and (budget.always_allow_unready or budget.healthy_enough):
            continue  # an unready pod does not spend the budget
        elif budget.allowed <= 0:
            refused[key] = f'Cannot evict pod as it would violate the pod\'s disruption budget "{budget.name}"'
        else:
            budget.allowed -= 1
    return refused
