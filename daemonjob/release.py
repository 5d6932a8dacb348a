"""`daemonjob-controller release-nodes`: take node maintenance out of a cluster without leaving
a node behind. Every node carrying a DaemonJob's maintenance record is released (the record
removed, the node uncordoned when the record says the controller cordoned it), whatever
still runs there, and the finalizer `daemonjob.io/node-maintenance` is removed from every
DaemonJob, so no DaemonJob, namespace or CRD deletion waits for a controller that has lost
its node powers.

It must run while the node powers are still granted, before they go: the chart runs it as a
pre-delete hook (and as a pre-upgrade hook when nodeMaintenance.enabled turns false),
`make undeploy` before it deletes the manifests. So that the controller cordons nothing
behind it, it first stops new cordons for `--hold` seconds (an annotation on the controller's
Lease that the controller reads before each cordon, cordonstop.py), waits a moment for a
cordon decided before that, then releases: the powers are removed within that time.

The stop is counted from the API server's time, not this machine's (`server_now`), and it is
written whether or not the controller elects a leader (the Lease is created when there is none;
the chart grants the Lease whenever it runs this). A stop that cannot be written ends the
command with an error before anything is released: a release behind which a running
controller may cordon again would leave a node cordoned with no record.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import structlog

from daemonjob import defaults, logsetup
from daemonjob.controller.nodework.cordonstop import server_now, stop_cordons, stop_for
from daemonjob.controller.nodework.nodecontrol import KubeNodeControl, NodeControl
from daemonjob.controller.nodework.work import release_node
from daemonjob.domain.nodework.maintenance import FINALIZER, has_finalizer
from daemonjob.domain.shared.apinames import API_VERSION, PLURAL
from daemonjob.domain.shared.noderecord import record_of
from daemonjob.domain.shared.timestamps import format_time
from daemonjob.machinery.client.conflicts import retry_on_conflict
from daemonjob.machinery.client.kube import ApiError, ConfigError, Kube, path_for
from daemonjob.machinery.process.podidentity import own_namespace

__all__ = ["Released", "release_all", "main"]

log = structlog.get_logger("daemonjob.release")

HOLD = 120.0  # seconds no cordon may start once asked (long enough for the node powers to be removed)
SETTLE = 5.0  # seconds between the stop and the release: a cordon decided just before the stop lands


@dataclass
class Released:
    nodes: int = 0  # records removed
    uncordoned: int = 0
    finalizers: int = 0  # DaemonJobs whose finalizer was removed


def release_all(
    control: NodeControl, daemonjobs: Callable[[], list[Mapping[str, Any]]], namespace: str | None = None
) -> Released:
    """Release every node held for a DaemonJob (of `namespace` only, when given), then remove
    the finalizer from every DaemonJob; raises the first refusal after trying them all."""
    out = Released()
    errors: list[ApiError] = []
    for node in control.list_nodes():
        record = record_of(node)
        name = (node.get("metadata") or {}).get("name") or ""
        if record is None or (namespace is not None and not record.daemon_job.startswith(f"{namespace}/")):
            continue
        try:
            done = release_node(control, name, record)
        except ApiError as exc:
            errors.append(exc)
            continue
        if done is not None:
            out.nodes += 1
            out.uncordoned += done
            log.info("node released", node=name, daemonjob=record.daemon_job, uncordoned=done)
    for dj in daemonjobs():
        meta = dj.get("metadata") or {}
        try:
            if _drop_finalizer(control, meta.get("namespace") or "", meta.get("name") or "", dj):
                out.finalizers += 1
        except ApiError as exc:
            errors.append(exc)
    if errors:
        raise errors[0]
    return out


def _drop_finalizer(control: NodeControl, namespace: str, name: str, dj: Mapping[str, Any] | None) -> bool:
    given = [dj]  # the first attempt decides on the DaemonJob listed, a retry on a fresh read

    def attempt() -> bool:
        current = given.pop() if given else control.get_daemonjob(namespace, name)
        if current is None or not has_finalizer(current):
            return False
        meta = current.get("metadata") or {}
        kept = [f for f in meta.get("finalizers") or () if f != FINALIZER]
        try:
            control.set_finalizers(namespace, name, kept, meta.get("resourceVersion") or "")
        except ApiError as exc:
            if exc.not_found:
                return False
            raise
        log.info("finalizer removed", namespace=namespace, name=name)
        return True

    return retry_on_conflict(attempt, gave_up=f"DaemonJob {namespace}/{name} kept changing; run release-nodes again")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="daemonjob-controller release-nodes",
        description="Release every node held by node maintenance and remove the DaemonJobs' finalizers, "
        "before the controller's node powers are removed.",
    )
    p.add_argument("--kubeconfig", default=None, help="kubeconfig file (default: in-cluster, else $KUBECONFIG)")
    p.add_argument("--namespace", default=None, help="only the DaemonJobs of this namespace (a namespaced install)")
    p.add_argument(
        "--leader-election-namespace", default=None, help="namespace of the controller's Lease (default: the pod's)"
    )
    p.add_argument("--leader-election-id", default=defaults.LEADER_ELECTION_ID, help="name of the controller's Lease")
    p.add_argument("--hold", type=float, default=HOLD, help="seconds no cordon may start (the stop on the Lease)")
    p.add_argument("--settle", type=float, default=SETTLE, help="seconds between the stop and the release")
    p.add_argument("--log-format", choices=["json", "console"], default="console")
    return p


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    logsetup.configure("info", args.log_format)

    try:
        kube = Kube.from_config(args.kubeconfig)
        lease_ns = own_namespace(args.leader_election_namespace)
        lease = f"{lease_ns}/{args.leader_election_id}"
        try:
            until = stop_for(args.hold, server_now(kube, lease_ns))
            stop_cordons(kube, lease_ns, args.leader_election_id, until)
        except ApiError as exc:
            print(
                f"daemonjob-controller release-nodes: error: cannot stop new cordons on the Lease {lease}: {exc}; "
                "nothing was released (a controller still running could cordon a node behind the release). "
                "Give this account get, update and create on Leases there, or name the controller's Lease "
                "with --leader-election-namespace and --leader-election-id",
                file=sys.stderr,
            )
            return 1
        log.info("no cordon may start", lease=lease, until=format_time(until), seconds=args.hold)
        time.sleep(args.settle)  # a cordon the controller decided before it saw the stop lands meanwhile
        control = KubeNodeControl(kube)

        def daemonjobs() -> list[Mapping[str, Any]]:
            try:
                return list(kube.get(path_for(API_VERSION, PLURAL, args.namespace)).get("items") or ())
            except ApiError as exc:
                if exc.not_found:
                    return []  # no CRD: no DaemonJob
                raise

        done = release_all(control, daemonjobs, args.namespace)
    except (ConfigError, ApiError) as exc:
        print(f"daemonjob-controller release-nodes: error: {exc}", file=sys.stderr)
        return 1
    print(
        f"released {done.nodes} node(s) ({done.uncordoned} uncordoned); "
        f"removed the finalizer {FINALIZER} from {done.finalizers} DaemonJob(s); "
        f"no cordon for {args.hold:.0f}s"
    )
    return 0
