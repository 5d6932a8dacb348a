"""The controller's settings of node maintenance, one value instead of a handful of arguments:
where it may be used, the cluster's disruption budget every cordon keeps, what the orphan
sweep covers and what stops cordons. The flags (cli.py) fill it; tests build their own."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass, replace

from daemonjob import defaults
from daemonjob.controller.nodework.disruption import ClusterDisruption
from daemonjob.domain.nodework.disruption import protected_matcher
from daemonjob.machinery.cache.informer import SharedInformer

__all__ = ["NodeMaintenanceOptions"]


def cordons_go() -> str | None:
    """Nothing stops cordons: no release-nodes asked (cordonstop.py)."""
    return None


@dataclass(frozen=True, slots=True)
class NodeMaintenanceOptions:
    """`namespaces`: --node-maintenance-namespaces, where a DaemonJob may use it (elsewhere it
    is Stalled); `max_unavailable_nodes`, `protected_node_selector`: the cluster's disruption
    budget (None: no limit; an empty selector: no protected set); `sweep_namespace`: where the
    orphan sweep looks (None: everywhere); `cordons_stopped`: why no cordon may start now
    (cordonstop.py), None when they may."""

    namespaces: frozenset[str] = frozenset(defaults.NODE_MAINTENANCE_NAMESPACES)
    max_unavailable_nodes: int | str | None = defaults.MAX_UNAVAILABLE_NODES
    protected_node_selector: str = defaults.PROTECTED_NODE_SELECTOR
    sweep_namespace: str | None = None
    cordons_stopped: Callable[[], str | None] = cordons_go

    @classmethod
    def from_flags(cls, args: argparse.Namespace, cordons_stopped: Callable[[], str | None]) -> NodeMaintenanceOptions:
        """From the controller's flags (cli.py, budgetflags.py)."""
        return cls(
            args.node_maintenance_namespaces,
            args.max_unavailable_nodes,
            args.protected_node_selector,
            cordons_stopped=cordons_stopped,
        )

    def swept_in(self, namespace: str | None) -> NodeMaintenanceOptions:
        """These options with the sweep in `namespace` unless one is set: a namespaced
        controller sweeps its own namespace only."""
        return self if self.sweep_namespace is not None else replace(self, sweep_namespace=namespace)

    def budget(
        self, nodes: SharedInformer, wake: Callable[[str], None], timer: Callable[[], float]
    ) -> ClusterDisruption:
        """The cluster's disruption budget they set, kept over the Node cache `nodes`."""
        return ClusterDisruption(
            nodes,
            wake,
            timer,
            max_unavailable=self.max_unavailable_nodes,
            protected=protected_matcher(self.protected_node_selector),
            protected_selector=self.protected_node_selector,
        )
