"""Connection and namespace as kubectl resolves them, the exit statuses, and the few reads every command shares.

`--kubeconfig`, `--context` and `-n` win; otherwise KUBECONFIG (several files merged) or
~/.kube/config, the context's namespace, then "default"; in a pod, its service account.
kubectl's other global flags (--as, --server, --token...) are applied in connection.py.
"""

from __future__ import annotations

import gc
import os
import re
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import urllib3
from kubernetes import config as k8s_config

from daemonjob.domain.shared.apinames import API_VERSION, LABEL_NAME, PLURAL
from daemonjob.kubectl.cluster import connection
from daemonjob.machinery.client.kube import ApiError, ConfigError, Kube, path_for

RESOURCE = f"{PLURAL}.daemonjob.io"
KIND_RESOURCE = "daemonjob.daemonjob.io"  # kubectl's `kind.group/name` in what a write prints
IN_CLUSTER_NAMESPACE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

# Exit statuses, the same for every command (listed in `kubectl daemonjob --help`).
EXIT_OK = 0
EXIT_ERROR = 1  # no such DaemonJob, no cluster, refused by the API server, a timeout, cancelled
EXIT_USAGE = 2  # the command line: an unknown command or flag, a bad or missing value, flags that do not go together
EXIT_FAILED = 3  # the DaemonJob has failed nodes (status, results) or its rollout or run failed (wait, run-now --wait)


class PluginError(Exception):
    """A problem said in one line on stderr, with the command's exit status."""

    def __init__(self, message: str, code: int = EXIT_ERROR) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


@dataclass
class Target:
    """Where a command acts; `kube` is None only for `create --dry-run=client`, which needs no server."""

    client: Kube | None
    namespace: str
    all_namespaces: bool = False

    @property
    def kube(self) -> Kube:
        if self.client is None:
            raise PluginError("no cluster connection")
        return self.client


def context_namespace(kubeconfig: str | None, context: str | None) -> str:
    """The namespace of the kubeconfig context in use, else "default"."""
    try:
        contexts, active = k8s_config.list_kube_config_contexts(config_file=kubeconfig)
    except Exception:  # in a pod, or no kubeconfig: the loader has already said why
        if os.path.exists(IN_CLUSTER_NAMESPACE):
            with open(IN_CLUSTER_NAMESPACE) as f:
                return f.read().strip() or "default"
        return "default"
    chosen = next((c for c in contexts if c.get("name") == context), None) if context else active
    return ((chosen or {}).get("context") or {}).get("namespace") or "default"


def connect(conn: connection.Connection, namespace: str | None, all_namespaces: bool = False) -> Target:
    try:
        kube = connection.connect(conn)
    except ConfigError as exc:
        raise PluginError(str(exc)) from None
    kube.configuration.connection_pool_maxsize = max(kube.configuration.connection_pool_maxsize, 32)
    return Target(kube, namespace or context_namespace(conn.kubeconfig, conn.context), all_namespaces)


def describe_connection_error(kube: Kube, exc: urllib3.exceptions.HTTPError) -> str:
    text = str(getattr(exc, "reason", None) or exc)
    errno = re.search(r"\[Errno -?\d+\] ([^')]*)", text)
    return f"cannot reach the API server at {kube.host}: {errno.group(1) if errno else text}"


def api_error_line(exc: ApiError) -> str:
    """kubectl's wording: `Error from server (NotFound): ...`."""
    reason = exc.reason or str(exc.status)
    return f"Error from server ({reason}): {exc.message or exc}"


def get_daemonjob(target: Target, name: str) -> dict[str, Any]:
    """The DaemonJob; with -A, the one of that name in whichever namespace holds it."""
    if target.all_namespaces:
        items = target.kube.get(path_for(API_VERSION, PLURAL), fieldSelector=f"metadata.name={name}")["items"]
        if not items:
            raise PluginError(f'Error from server (NotFound): {RESOURCE} "{name}" not found in any namespace')
        if len(items) > 1:
            where = ", ".join(sorted(i["metadata"]["namespace"] for i in items))
            raise PluginError(f'{RESOURCE} "{name}" exists in several namespaces ({where}): choose one with -n')
        target.namespace = items[0]["metadata"]["namespace"]
        return items[0]
    try:
        return target.kube.get(path_for(API_VERSION, PLURAL, target.namespace, name))
    except ApiError as exc:
        if exc.not_found:
            raise PluginError(
                f'Error from server (NotFound): {RESOURCE} "{name}" not found in namespace "{target.namespace}"'
            ) from None
        raise


def _read_params(cached: bool) -> dict[str, Any]:
    """`resourceVersion=0` lets the API server answer from its watch cache instead of a quorum
    read of etcd: much cheaper for a big list, and at most a moment behind (what a status view
    shows is already stale by the time it is read). Writes decided from a list use cached=False."""
    return {"resourceVersion": "0"} if cached else {}


def list_jobs(target: Target, name: str, cached: bool = False) -> list[dict[str, Any]]:
    return target.kube.get(
        path_for("batch/v1", "jobs", target.namespace), labelSelector=f"{LABEL_NAME}={name}", **_read_params(cached)
    )["items"]


def list_pods(target: Target, name: str, cached: bool = False) -> list[dict[str, Any]]:
    """Every pod of the DaemonJob's Jobs in one request: the controller labels the pod template too."""
    return target.kube.get(
        path_for("v1", "pods", target.namespace), labelSelector=f"{LABEL_NAME}={name}", **_read_params(cached)
    )["items"]


def list_nodes(target: Target, selector: str | None = None, cached: bool = False) -> list[dict[str, Any]]:
    params: Mapping[str, Any] = {"labelSelector": selector} if selector else {}
    return target.kube.get(path_for("v1", "nodes"), **params, **_read_params(cached))["items"]


@contextmanager
def bulk_decoding() -> Iterator[None]:
    """No cyclic garbage collection while big lists decode, then freeze what they made.

    5000 Nodes, Jobs and pods decode into millions of objects; the collector, run every few
    hundred allocations, would walk them again and again (at 5000 nodes it multiplied the
    decode time by six). API objects hold no cycles, so nothing is lost; frozen, they are
    also left out of every later collection of this short-lived process.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if enabled:
            gc.enable()


@dataclass
class Snapshot:
    """A DaemonJob with its Jobs, their pods and the Nodes, read together."""

    daemonjob: dict[str, Any]
    jobs: list[dict[str, Any]]
    pods: list[dict[str, Any]]
    nodes: list[dict[str, Any]]


def read_snapshot(target: Target, name: str, node_selector: str | None = None, cached: bool = False) -> Snapshot:
    """The four reads at once, on separate connections: the API server encodes the three big
    lists in parallel, and the wall time is the slowest list rather than their sum. With -A
    the DaemonJob is found first, since its namespace scopes the lists."""
    if target.all_namespaces:
        get_daemonjob(target, name)  # sets target.namespace
    with bulk_decoding(), ThreadPoolExecutor(max_workers=4, thread_name_prefix="read") as pool:
        dj = pool.submit(get_daemonjob, target, name)
        jobs = pool.submit(list_jobs, target, name, cached)
        pods = pool.submit(list_pods, target, name, cached)
        nodes = pool.submit(list_nodes, target, node_selector, cached)
        # the DaemonJob first: "not found" wins over whatever the lists say
        return Snapshot(dj.result(), jobs.result(), pods.result(), nodes.result())
