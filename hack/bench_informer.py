"""Cache cost of the controller's two big informers: time to sync and memory kept.

Creates N realistic Nodes (labels, taints, conditions, capacity and a long `status.images`
list, which is most of a real Node's bytes) and N node Jobs owned by one DaemonJob, then
starts the Node and Job informers exactly as the controller configures them, in this
process, and reports the time until both have synced and the RSS they added.

The Job controller is off (only the informers are measured), so the Jobs run nothing and
the machine stays quiet; their status is written by hand to look like a finished rollout.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

import benchlib

from daemonjob.controller.runtime.informers import JOB_INDEXERS
from daemonjob.controller.runtime.transforms import job_transform, node_transform
from daemonjob.domain.shared.apinames import ANNOTATION_NODE, API_VERSION, KIND, LABEL_NAME, LABEL_REVISION
from daemonjob.machinery.cache.informer import Handlers, Informer
from daemonjob.machinery.client.kube import ApiError, Kube, path_for
from daemonjob.testing.cluster import ClusterOptions, LocalCluster

NAMESPACE = "bench"
DJ_NAME = "bench"
REVISION = "5f9c2a1b3c"
ZONES = ("eu-west-1a", "eu-west-1b", "eu-west-1c")
IMAGE_REPOS = (
    "registry.k8s.io/kube-proxy",
    "docker.io/calico/node",
    "docker.io/calico/cni",
    "quay.io/prometheus/node-exporter",
    "registry.k8s.io/pause",
    "quay.io/cilium/cilium",
    "ghcr.io/fluxcd/source-controller",
    "docker.io/grafana/agent",
    "registry.example.com/platform/security/falco-driver-loader",
    "registry.example.com/platform/logging/fluent-bit",
    "registry.example.com/data/batch/feature-pipeline-worker",
    "registry.example.com/ml/inference/model-server-gpu",
    "public.ecr.aws/aws-observability/aws-for-fluent-bit",
    "mcr.microsoft.com/oss/kubernetes/azure-cni",
    "gcr.io/google-containers/cluster-proportional-autoscaler",
    "docker.io/bitnami/redis-exporter",
    "registry.example.com/payments/api/checkout-service",
    "registry.example.com/search/indexer/shard-writer",
    "docker.io/library/nginx",
    "quay.io/jetstack/cert-manager-controller",
)


def node_name(i: int) -> str:
    return f"ip-10-{(i >> 16) & 255}-{(i >> 8) & 255}-{i & 255}.eu-west-1.compute.internal"


def node_body(i: int) -> dict[str, Any]:
    """A Node as a cloud kubelet registers it; images make up most of its size, as in real clusters."""
    name = node_name(i)
    zone = ZONES[i % len(ZONES)]
    pool = ("general", "compute", "gpu", "spot")[i % 4]
    images = []
    for j, repo in enumerate(IMAGE_REPOS):
        digest = hashlib.sha256(f"{repo}:{i % 7}:{j}".encode()).hexdigest()
        images.append(
            {
                "names": [f"{repo}@sha256:{digest}", f"{repo}:v1.{j}.{i % 7}-build.{1000 + j}"],
                "sizeBytes": 10_000_000 + 7919 * j,
            }
        )
    now = "2026-11-02T10:00:00Z"
    conditions = [
        {"type": t, "status": s, "reason": r, "message": m, "lastHeartbeatTime": now, "lastTransitionTime": now}
        for t, s, r, m in (
            ("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
            ("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
            ("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
            ("Ready", "True", "KubeletReady", "kubelet is posting ready status. AppArmor enabled"),
        )
    ]
    capacity = {
        "cpu": "16",
        "memory": "65023116Ki",
        "pods": "110",
        "ephemeral-storage": "104845292Ki",
        "hugepages-1Gi": "0",
        "hugepages-2Mi": "0",
        "attachable-volumes-aws-ebs": "25",
    }
    taints = [{"key": "dedicated", "value": pool, "effect": "NoSchedule"}] if pool in ("gpu", "spot") else []
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "beta.kubernetes.io/os": "linux",
                "beta.kubernetes.io/arch": "amd64",
                "node.kubernetes.io/instance-type": "m5.4xlarge",
                "beta.kubernetes.io/instance-type": "m5.4xlarge",
                "topology.kubernetes.io/region": "eu-west-1",
                "topology.kubernetes.io/zone": zone,
                "failure-domain.beta.kubernetes.io/region": "eu-west-1",
                "failure-domain.beta.kubernetes.io/zone": zone,
                "node-role.kubernetes.io/worker": "",
                "example.com/pool": pool,
            },
            "annotations": {
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
            },
        },
        "spec": {
            "providerID": f"aws:///{zone}/i-{i:017x}",
            "podCIDR": f"10.{100 + (i >> 8) % 100}.{i & 255}.0/24",
            "taints": taints,
        },
        "status": {
            "capacity": capacity,
            "allocatable": {**capacity, "cpu": "15890m", "memory": "64006284Ki"},
            "conditions": conditions,
            "addresses": [
                {"type": "InternalIP", "address": f"10.{(i >> 16) & 255}.{(i >> 8) & 255}.{i & 255}"},
                {"type": "Hostname", "address": name},
                {"type": "InternalDNS", "address": name},
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "machineID": hashlib.md5(name.encode()).hexdigest(),
                "systemUUID": f"ec2{i:029x}",
                "bootID": hashlib.md5(f"boot{i}".encode()).hexdigest(),
                "kernelVersion": "5.10.184",
                "osImage": "Amazon Linux 2",
                "containerRuntimeVersion": "containerd://1.6.19",
                "kubeletVersion": "v1.20.2",
                "kubeProxyVersion": "v1.20.2",
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
            "images": images,
        },
    }


def job_body(i: int, owner_uid: str) -> dict[str, Any]:
    """A node Job as the controller builds it: pinned by matchFields, owned, annotated."""
    node = node_name(i)
    name = f"{DJ_NAME}-{node[:36].rstrip('.-')}-{hashlib.sha256(node.encode()).hexdigest()[:10]}".replace(".", "-")
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "labels": {LABEL_NAME: DJ_NAME, LABEL_REVISION: REVISION, "app.kubernetes.io/name": "node-audit"},
            "annotations": {ANNOTATION_NODE: node},
            "ownerReferences": [
                {
                    "apiVersion": API_VERSION,
                    "kind": KIND,
                    "name": DJ_NAME,
                    "uid": owner_uid,
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "completions": 1,
            "parallelism": 1,
            "backoffLimit": 2,
            "template": {
                "metadata": {"labels": {LABEL_NAME: DJ_NAME, LABEL_REVISION: REVISION}},
                "spec": {
                    "restartPolicy": "Never",
                    "affinity": {
                        "nodeAffinity": {
                            "requiredDuringSchedulingIgnoredDuringExecution": {
                                "nodeSelectorTerms": [
                                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
                                ]
                            }
                        }
                    },
                    "tolerations": [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}],
                    "containers": [
                        {
                            "name": "audit",
                            "image": "registry.example.com/platform/security/node-audit:v2.3.1",
                            "command": ["/bin/node-audit", "--report=/var/run/audit/report.json", "--level=full"],
                            "env": [{"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}],
                            "resources": {
                                "requests": {"cpu": "50m", "memory": "64Mi"},
                                "limits": {"cpu": "500m", "memory": "256Mi"},
                            },
                            "volumeMounts": [{"name": "host", "mountPath": "/host", "readOnly": True}],
                        }
                    ],
                    "volumes": [{"name": "host", "hostPath": {"path": "/"}}],
                },
            },
        },
    }


def finished_status() -> dict[str, Any]:
    t0, t1 = "2026-11-02T10:00:00Z", "2026-11-02T10:00:12Z"
    return {
        "startTime": t0,
        "completionTime": t1,
        "succeeded": 1,
        "conditions": [{"type": "Complete", "status": "True", "lastProbeTime": t1, "lastTransitionTime": t1}],
    }


def populate(kube: Kube, n: int, threads: int) -> None:
    nodes_path = path_for("v1", "nodes")
    jobs_path = path_for("batch/v1", "jobs", NAMESPACE)
    benchlib.create_namespace(kube, NAMESPACE)
    benchlib.apply_crd(kube)
    owner = kube.create(
        path_for(API_VERSION, "daemonjobs", NAMESPACE),
        {
            "apiVersion": API_VERSION,
            "kind": KIND,
            "metadata": {"name": DJ_NAME, "namespace": NAMESPACE},
            "spec": {
                "jobTemplate": {
                    "spec": {
                        "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "x"}]}}
                    }
                }
            },
        },
    )
    uid = owner["metadata"]["uid"]

    def create_node(i: int) -> None:
        try:
            kube.create(nodes_path, node_body(i))
        except ApiError as exc:
            if not exc.already_exists:
                raise

    def create_job(i: int) -> None:
        body = job_body(i, uid)
        try:
            kube.create(jobs_path, body)
        except ApiError as exc:
            if not exc.already_exists:
                raise
        kube.patch(
            path_for("batch/v1", "jobs", NAMESPACE, body["metadata"]["name"], "status"), {"status": finished_status()}
        )

    started = time.monotonic()
    benchlib.run_concurrently(create_node, range(n), threads)
    print(f"created {n} nodes in {time.monotonic() - started:.1f}s", flush=True)
    started = time.monotonic()
    benchlib.run_concurrently(create_job, range(n), threads)
    print(f"created {n} jobs (with status) in {time.monotonic() - started:.1f}s", flush=True)


def measure(kube: Kube, timeout: float) -> tuple[float, float, float]:
    """(seconds until both informers synced, MB of RSS they added, seconds of a relist right after)."""
    gc.collect()
    before = benchlib.rss_mb()
    nodes = Informer(kube, "v1", "nodes", transform=node_transform, name="nodes")
    jobs = Informer(
        kube, "batch/v1", "jobs", label_selector=LABEL_NAME, transform=job_transform, name="jobs", indexers=JOB_INDEXERS
    )
    synced_at: dict[str, float] = {}

    def wait(inf: Informer) -> None:
        if inf.wait_for_sync(timeout):
            synced_at[inf.name] = time.monotonic()

    waiters = [threading.Thread(target=wait, args=(inf,), daemon=True) for inf in (nodes, jobs)]
    for w in waiters:
        w.start()
    started = time.monotonic()
    try:
        nodes.start()
        jobs.start()
        for w in waiters:
            w.join(timeout + 1)
        if len(synced_at) != 2:
            raise TimeoutError(f"informers not synced after {timeout}s: {sorted(synced_at)} only")
        seconds = max(synced_at.values()) - started
        for inf in (nodes, jobs):
            print(f"informer {inf.name}: {len(inf.store)} objects, synced in {synced_at[inf.name] - started:.2f}s")
        peak = benchlib.hwm_mb()
        gc.collect()
        after = benchlib.rss_mb()
        print(f"rss before {before:.1f} MB, after {after:.1f} MB (process peak {peak:.1f} MB)")
        relist = relist_seconds(nodes, jobs)
        return seconds, after - before, relist
    finally:
        nodes.stop()
        jobs.stop()


def relist_seconds(*informers: Informer) -> float:
    """A relist of every informer right after its sync: list, trim and compare with the cache.

    Events are real changes made since the sync (e.g. the TTL controller annotating Nodes).
    """
    events: dict[str, int] = {inf.name: 0 for inf in informers}

    def count(name: str) -> Handlers:
        def inc(*_args: Any) -> None:
            events[name] += 1

        return Handlers(on_add=inc, on_update=inc, on_delete=inc)

    for inf in informers:
        inf.stop()
        inf.add_handlers(count(inf.name))
    started = time.monotonic()
    for inf in informers:
        inf._list()
    seconds = time.monotonic() - started
    print(f"relist after the sync: events {events}, {seconds:.2f}s")
    return seconds


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=5000, help="nodes, and Jobs (one per node)")
    p.add_argument("--threads", type=int, default=16, help="concurrent creators")
    p.add_argument("--settle", type=float, default=5.0, help="seconds to let the control plane settle before measuring")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds allowed for the informers to sync")
    p.add_argument(
        "--py-spy",
        type=Path,
        default=None,
        metavar="FILE",
        help="record a py-spy profile of the sync into FILE (speedscope format)",
    )
    args = p.parse_args()

    # Job controller off: the Jobs must not start pods, only the informers are measured.
    cluster = LocalCluster(options=ClusterOptions(node_lifecycle=False, controllers="*,-job"))
    try:
        cluster.start()
        kube = Kube.from_config(str(cluster.kubeconfig))
        populate(kube, args.n, args.threads)
        time.sleep(args.settle)
        with benchlib.PySpy(os.getpid(), args.py_spy):
            seconds, cache_mb, relist = measure(kube, args.timeout)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    finally:
        cluster.stop()
    print(f"sync_seconds={seconds:.2f}")
    print(f"cache_rss_mb={cache_mb:.1f}")
    print(f"relist_seconds={relist:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
