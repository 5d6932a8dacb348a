"""The nodes held by node maintenance, read from the Nodes' records rather than from any
DaemonJob: a gauge per held node (what the cordoned-too-long alert reads, so it still fires
once the DaemonJob and its own series are gone) and whether a node's Job still runs."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector, CollectorRegistry

from daemonjob.controller.runtime.informers import MAINTENANCE_INDEX, NODE_INDEX
from daemonjob.domain.jobs.contract import ACTIVE, TERMINATING, job_finish_time, job_state
from daemonjob.domain.shared.apinames import LABEL_NAME
from daemonjob.domain.shared.noderecord import record_of
from daemonjob.domain.shared.timestamps import parse_time
from daemonjob.machinery.cache.informer import SharedInformer

__all__ = ["HeldNodesCollector", "job_runs_on", "register_held_nodes", "split_key"]

HELD_SINCE = "daemonjob_node_held_since_timestamp_seconds"


def split_key(daemon_job: str) -> tuple[str, str]:
    """A record's `daemonJob` (namespace/name) as its two parts."""
    namespace, _, name = daemon_job.partition("/")
    return namespace, name


def job_runs_on(jobs: SharedInformer, node: str, namespace: str, name: str) -> bool:
    """A Job of DaemonJob namespace/name (owned or orphaned: the label names it) may still run
    on `node`, as cached."""
    for job in jobs.store.by_index(NODE_INDEX, node):
        meta = job.get("metadata") or {}
        if meta.get("namespace") != namespace or (meta.get("labels") or {}).get(LABEL_NAME) != name:
            continue
        state = job_state(job)
        if state == ACTIVE or (state == TERMINATING and job_finish_time(job) is None):
            return True
    return False


class HeldNodesCollector(Collector):
    """One series per node carrying a DaemonJob's maintenance record, read at each scrape
    from the Node cache: the Unix time since which the record holds it (its `since`), labelled
    with the node and the DaemonJob the record names. A series goes when the record goes."""

    def __init__(self, nodes: SharedInformer) -> None:
        self.nodes = nodes

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            HELD_SINCE,
            "Unix time since which a node has been held by a DaemonJob's node maintenance (from the "
            "daemonjob.io/maintenance record on the Node, whether or not the DaemonJob still exists).",
            labels=["node", "namespace", "name", "cordoned"],
        )
        for node in self.nodes.store.indexed(MAINTENANCE_INDEX):
            record = record_of(node)
            since = parse_time(record.since) if record is not None else None
            if record is None or since is None:
                continue
            namespace, name = split_key(record.daemon_job)
            family.add_metric(
                [node["metadata"]["name"], namespace, name, "true" if record.cordoned else "false"], since.timestamp()
            )
        yield family


def register_held_nodes(registry: CollectorRegistry, nodes: SharedInformer) -> None:
    try:
        registry.register(HeldNodesCollector(nodes))
    except ValueError:
        pass  # Metrics shared with another controller (tests): the same nodes, counted once
