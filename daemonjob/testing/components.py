"""The control plane's components as the local cluster starts them: their options and command lines."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from daemonjob.testing.children import free_port

__all__ = ["ClusterOptions", "apiserver_args", "controller_manager_args", "etcd_args", "scheduler_args"]

SERVICE_ACCOUNT_ISSUER = "https://kubernetes.default.svc.cluster.local"


@dataclass
class ClusterOptions:
    node_monitor_grace_period: str = "16s"
    node_monitor_period: str = "1s"
    node_lifecycle: bool = True
    controllers: str = "*"
    kcm_qps: int = 100
    kcm_burst: int = 200
    scheduler_qps: int = 200
    scheduler_burst: int = 400
    extra_apiserver_args: Sequence[str] = ()
    # Resources served without the API server's watch cache, e.g. "jobs.batch": their watches
    # read etcd directly, so after compact_etcd() an older resourceVersion gets 410 Gone.
    uncached_resources: Sequence[str] = ()
    audit: bool = False  # AUDIT_POLICY's records in LocalCluster.audit_log_path (daemonjob.testing.audit)
    users: Sequence[str] = ()  # static-token users with the controller's RBAC: LocalCluster.kubeconfig_for(user)


def etcd_args(data: Path, port: int) -> list[str]:
    return [
        f"--data-dir={data}",
        f"--listen-client-urls=http://127.0.0.1:{port}",
        f"--advertise-client-urls=http://127.0.0.1:{port}",
        f"--listen-peer-urls=http://127.0.0.1:{free_port()}",
        "--quota-backend-bytes=4294967296",
        "--log-level=warn",
    ]


def apiserver_args(p: Path, etcd_port: int, port: int) -> list[str]:
    """kube-apiserver's flags but the watch cache's, the audit's and the options' extra ones."""
    return [
        f"--etcd-servers=http://127.0.0.1:{etcd_port}",
        "--bind-address=127.0.0.1",
        "--advertise-address=127.0.0.1",
        f"--secure-port={port}",
        "--insecure-port=0",
        f"--cert-dir={p}",
        f"--tls-cert-file={p / 'apiserver.crt'}",
        f"--tls-private-key-file={p / 'apiserver.key'}",
        f"--client-ca-file={p / 'ca.crt'}",
        f"--token-auth-file={p / 'tokens.csv'}",
        f"--service-account-key-file={p / 'sa.pub'}",
        f"--service-account-signing-key-file={p / 'sa.key'}",
        f"--service-account-issuer={SERVICE_ACCOUNT_ISSUER}",
        "--service-cluster-ip-range=10.96.0.0/16",
        "--authorization-mode=RBAC",
        # As kubeadm and kind run it: a privileged container is the namespace's policy to
        # refuse (Pod Security), not the whole cluster's.
        "--allow-privileged=true",
        # Pods need no API token here; the admission would race namespace creation.
        "--disable-admission-plugins=ServiceAccount",
        "--max-requests-inflight=1000",
        "--max-mutating-requests-inflight=500",
        "--profiling=false",
        # Simulated nodes' kubelet endpoint (logs) is on their InternalIP, 127.0.0.1.
        "--kubelet-preferred-address-types=InternalIP",
        "--logtostderr=true",
        "--v=0",
    ]


def _client_args(kubeconfig: Path) -> list[str]:
    kc = str(kubeconfig)
    return [
        f"--kubeconfig={kc}",
        f"--authentication-kubeconfig={kc}",
        f"--authorization-kubeconfig={kc}",
        "--leader-elect=false",
        "--secure-port=0",
        "--port=0",
        "--logtostderr=true",
        "--v=0",
    ]


def controller_manager_args(kubeconfig: Path, pki: Path, o: ClusterOptions) -> list[str]:
    controllers = o.controllers if o.node_lifecycle else f"{o.controllers},-nodelifecycle"
    return [
        *_client_args(kubeconfig),
        f"--service-account-private-key-file={pki / 'sa.key'}",
        f"--root-ca-file={pki / 'ca.crt'}",
        f"--controllers={controllers}",
        f"--node-monitor-grace-period={o.node_monitor_grace_period}",
        f"--node-monitor-period={o.node_monitor_period}",
        "--node-startup-grace-period=20s",
        "--pod-eviction-timeout=5s",
        f"--kube-api-qps={o.kcm_qps}",
        f"--kube-api-burst={o.kcm_burst}",
        "--concurrent-gc-syncs=20",
        # The informer-based CronJob controller, the default from Kubernetes 1.21: 1.20's
        # own lists every Job of the cluster from etcd every 10 s, a load that grows with
        # the Jobs kept and that no current cluster carries.
        "--feature-gates=CronJobControllerV2=true",
        "--use-service-account-credentials=false",
    ]


def scheduler_args(kubeconfig: Path, o: ClusterOptions) -> list[str]:
    return [*_client_args(kubeconfig), f"--kube-api-qps={o.scheduler_qps}", f"--kube-api-burst={o.scheduler_burst}"]
