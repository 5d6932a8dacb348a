"""The chart installed, upgraded and uninstalled with the real helm on a local control plane
of its own (helm owns cluster-scoped objects, the CRD and ClusterRoles, that the session's
cluster shares with other tests), and the controller running with nothing but the
permissions the chart grants its ServiceAccount: its admission webhook with self-managed
certificates, secure metrics, leader election and a rollout.
"""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import urllib3
import yaml
from installtools import CHART, NAMESPACE, ROOT, docs, helm_env, run

from daemonjob.machinery.client.kube import ApiError, Kube, path_for
from daemonjob.testing.cluster import LocalCluster, kubeconfig_text
from daemonjob.testing.doubles.builders import daemonjob, job_template
from daemonjob.testing.process import ControllerProcess
from daemonjob.testing.serviceproxy import ServiceProxy
from daemonjob.testing.sim.kubelet import ANNOTATION_DURATION, NodeSpec, SimKubelet
from daemonjob.testing.waiting import wait_for

pytestmark = pytest.mark.cluster

CRD = "daemonjobs.daemonjob.io"
DJ_API = "daemonjob.io/v1alpha1"
WEBHOOKS = "admissionregistration.k8s.io/v1"
WEBHOOK_CONFIGURATION = "daemonjob-validating-webhook"
WEBHOOK_SECRET = "daemonjob-webhook-tls"


@pytest.fixture(scope="module")
def bed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalCluster, Kube, SimKubelet]]:
    with LocalCluster() as cluster:
        kube = Kube.from_config(str(cluster.kubeconfig))
        with SimKubelet(kube) as kubelet:
            yield cluster, kube, kubelet


def helm(cluster: LocalCluster, home: Path, *args: str, check: bool = True) -> Any:
    return run("helm", *args, f"--kubeconfig={cluster.kubeconfig}", env=helm_env(home), check=check)


def deployment_args(kube: Kube) -> list[str]:
    deploy = kube.get(path_for("apps/v1", "deployments", NAMESPACE, "daemonjob-controller"))
    return deploy["spec"]["template"]["spec"]["containers"][0]["args"]


def service_account_token(kube: Kube, name: str) -> str:
    """The token of a ServiceAccount in NAMESPACE (its token Secret on 1.20)."""

    def token() -> str | None:
        sa = kube.get(path_for("v1", "serviceaccounts", NAMESPACE, name))
        for ref in sa.get("secrets") or []:
            secret = kube.get(path_for("v1", "secrets", NAMESPACE, ref["name"]))
            if secret.get("data", {}).get("token"):
                return base64.b64decode(secret["data"]["token"]).decode()
        return None

    return wait_for(token, timeout=60, what=f"the token Secret of ServiceAccount {name}")


def service_account_kubeconfig(cluster: LocalCluster, kube: Kube, path: Path) -> Path:
    """A kubeconfig with the token of the chart's ServiceAccount."""
    value = service_account_token(kube, "daemonjob-controller")
    path.write_text(kubeconfig_text(cluster.server, cluster.pki / "ca.crt", value, "daemonjob-controller"))
    return path


def metrics_reader_token(kube: Kube) -> str:
    """A scraper's token: a ServiceAccount bound to the chart's daemonjob-metrics-reader."""
    kube.create(path_for("v1", "serviceaccounts", NAMESPACE), {"metadata": {"name": "scraper"}})
    kube.create(
        path_for("rbac.authorization.k8s.io/v1", "clusterrolebindings"),
        {
            "metadata": {"name": "scraper-daemonjob-metrics"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "daemonjob-metrics-reader",
            },
            "subjects": [{"kind": "ServiceAccount", "name": "scraper", "namespace": NAMESPACE}],
        },
    )
    return service_account_token(kube, "scraper")


def scrape(port: int, token: str | None) -> int:
    """The status of GET /metrics over HTTPS (the controller's self-signed certificate, unverified)."""
    http = urllib3.PoolManager(cert_reqs="CERT_NONE")
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", urllib3.exceptions.InsecureRequestWarning)
        return http.request(
            "GET", f"https://127.0.0.1:{port}/metrics", headers=headers, timeout=10, retries=False
        ).status


def point_webhook_at(kube: Kube, client_config: dict[str, Any]) -> None:
    """The test bed has no Service networking: the API server reaches the webhook by URL."""
    path = path_for(WEBHOOKS, "validatingwebhookconfigurations", name=WEBHOOK_CONFIGURATION)
    config = kube.get(path)
    hook = config["webhooks"][0]
    bundle = hook["clientConfig"].get("caBundle")
    hook["clientConfig"] = {**client_config, **({"caBundle": bundle} if bundle else {})}
    kube.put(path, config)


def webhook_refuses(kube: Kube, ns: str) -> bool:
    """A dry-run create of a DaemonJob with a bad schedule is refused by the chart's webhook."""
    bad = one_second("bad-schedule", "none")
    bad["spec"]["schedule"] = "bad"
    try:
        kube.create(path_for(DJ_API, "daemonjobs", ns), bad, dryRun="All")
    except ApiError as exc:
        return 'admission webhook "validate.daemonjob.io" denied the request' in exc.message
    return False


def webhook_secret(kube: Kube) -> dict[str, str]:
    return kube.get(path_for("v1", "secrets", NAMESPACE, WEBHOOK_SECRET)).get("data") or {}


def one_second(name: str, label: str) -> dict[str, Any]:
    """On the nodes labelled install-test=`label`, its pods running one second."""
    template = job_template(
        pod_annotations={ANNOTATION_DURATION: "1"},
        container={"name": "main", "image": "busybox:1.36", "command": ["true"]},
    )
    return daemonjob(name, manifest=True, template=template, nodeSelector={"matchLabels": {"install-test": label}})


def complete(kube: Kube, ns: str, name: str) -> bool:
    status = kube.get(path_for(DJ_API, "daemonjobs", ns, name)).get("status") or {}
    return any(c["type"] == "Complete" and c["status"] == "True" for c in status.get("conditions") or [])


def test_install_rollout_upgrade_uninstall(bed: tuple[LocalCluster, Kube, SimKubelet], tmp_path: Path) -> None:
    cluster, kube, kubelet = bed
    home = tmp_path / "helm"
    # A copy of the chart (links resolved) whose CRD gains a printer column on upgrade.
    chart = tmp_path / "chart"
    shutil.copytree(CHART, chart, symlinks=False)

    helm(cluster, home, "install", "daemonjob", str(chart), "-n", NAMESPACE, "--create-namespace")
    crd = kube.get(path_for("apiextensions.k8s.io/v1", "customresourcedefinitions", name=CRD))
    assert crd["metadata"]["annotations"]["meta.helm.sh/release-name"] == "daemonjob"
    assert crd["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    assert "--log-level=debug" not in deployment_args(kube)
    pdb = kube.get(path_for("policy/v1beta1", "poddisruptionbudgets", NAMESPACE, "daemonjob-controller"))
    assert pdb["spec"]["minAvailable"] == 1

    # The controller as a local process with the chart's ServiceAccount token: only the
    # chart's RBAC applies. It keeps the webhook's certificate in the chart's Secret and its
    # CA in the chart's configuration, serves the webhook (reached by URL through a Service
    # stand-in) and secure metrics, takes the Lease and completes a rollout.
    wait_for(
        lambda: (
            kube.get(path_for("apiextensions.k8s.io/v1", "customresourcedefinitions", name=CRD))
            .get("status", {})
            .get("acceptedNames", {})
            .get("kind")
        ),
        timeout=30,
        what="the CRD served",
    )
    kubeconfig = service_account_kubeconfig(cluster, kube, tmp_path / "sa-kubeconfig")
    label = uuid.uuid4().hex[:8]
    nodes = [f"inst-{label}-{i}" for i in range(2)]
    kubelet.add_nodes([NodeSpec(n, labels={"install-test": label}) for n in nodes])
    kubelet.wait_ready(nodes, timeout=60)
    ns = f"t-{label}"
    kube.create(path_for("v1", "namespaces"), {"metadata": {"name": ns}})
    assert webhook_secret(kube) == {"tls.crt": "", "tls.key": ""}
    scraper = metrics_reader_token(kube)
    controller = ControllerProcess(
        kubeconfig,
        tmp_path / "controller.log",
        "--leader-elect",
        f"--leader-election-namespace={NAMESPACE}",
        "--log-format",
        "json",
        "--metrics-secure=true",
        "--webhook-cert-dir",
        str(tmp_path / "webhook-certs"),
        f"--webhook-service-namespace={NAMESPACE}",
        "--webhook-cert-extra-names=127.0.0.1",
        webhook=True,
    )
    with ServiceProxy(lambda: [controller.webhook_port] if controller.running() else []) as proxy:
        point_webhook_at(kube, {"url": f"https://127.0.0.1:{proxy.port}/validate-daemonjob"})
        try:
            controller.start()
            controller.wait_ready()
            wait_for(
                lambda: webhook_refuses(kube, ns),
                timeout=60,
                what="the API server to call the webhook",
                describe=controller.log_tail,
            )
            assert webhook_secret(kube)["tls.crt"]
            assert scrape(controller.metrics_port, scraper) == 200
            assert scrape(controller.metrics_port, None) == 401
            kube.create(path_for(DJ_API, "daemonjobs", ns), one_second("rollout", label))
            wait_for(
                lambda: complete(kube, ns, "rollout"),
                timeout=90,
                what="the rollout to complete",
                describe=controller.log_tail,
            )
            lease = kube.get(path_for("coordination.k8s.io/v1", "leases", NAMESPACE, "daemonjob-controller"))
            assert lease["spec"]["holderIdentity"]
            assert "forbidden" not in controller.log_text().lower()
        finally:
            controller.stop()
            for n in nodes:
                kubelet.delete_node(n)
            point_webhook_at(
                kube,
                {
                    "service": {
                        "name": "daemonjob-webhook",
                        "namespace": NAMESPACE,
                        "path": "/validate-daemonjob",
                        "port": 443,
                    }
                },
            )
    certificate = webhook_secret(kube)

    # Upgrade: a changed value reaches the Deployment; the CRD is upgraded with the release.
    crd_doc = chart / "files" / "crd.yaml"
    source = yaml.safe_load(crd_doc.read_text())
    columns = source["spec"]["versions"][0].setdefault("additionalPrinterColumns", [])
    columns.append({"name": "Upgraded", "type": "string", "jsonPath": ".metadata.uid", "priority": 1})
    crd_doc.write_text(yaml.safe_dump(source))
    helm(cluster, home, "upgrade", "daemonjob", str(chart), "-n", NAMESPACE, "--set", "logLevel=debug")
    assert "--log-level=debug" in deployment_args(kube)
    assert webhook_secret(kube) == certificate  # the controller's certificate survives the upgrade
    crd = kube.get(path_for("apiextensions.k8s.io/v1", "customresourcedefinitions", name=CRD))
    assert "Upgraded" in [c["name"] for c in crd["spec"]["versions"][0]["additionalPrinterColumns"]]

    # Uninstall: everything of the release goes, but the CRD (and so the DaemonJobs) stays.
    helm(cluster, home, "uninstall", "daemonjob", "-n", NAMESPACE, "--wait")
    with pytest.raises(ApiError) as gone:
        kube.get(path_for("apps/v1", "deployments", NAMESPACE, "daemonjob-controller"))
    assert gone.value.not_found
    with pytest.raises(ApiError) as gone:
        kube.get(path_for("rbac.authorization.k8s.io/v1", "clusterroles", name="daemonjob-controller"))
    assert gone.value.not_found
    kube.get(path_for("apiextensions.k8s.io/v1", "customresourcedefinitions", name=CRD))
    kube.get(path_for(DJ_API, "daemonjobs", ns, "rollout"))


def test_kustomize_build_with_monitoring_applies(bed: tuple[LocalCluster, Kube, SimKubelet], tmp_path: Path) -> None:
    """kubectl 1.33's kustomize (5.6) builds manifests/ with the monitoring component, as
    `make deploy MONITORING=1` does, and the API server takes every object."""
    cluster, kube, _ = bed
    overlay = tmp_path / "overlay"
    overlay.mkdir()
    subprocess.run(
        ["bash", str(ROOT / "hack" / "deploy-overlay.sh"), str(overlay)],
        check=True,
        timeout=60,
        env={**os.environ, "IMG": "registry.example.com/daemonjob-controller:0.1.0", "MONITORING": "1"},
    )
    built = docs(run("kubectl", "kustomize", str(overlay)).stdout)
    kinds = {d["kind"] for d in built}
    assert {"ServiceMonitor", "PrometheusRule", "ConfigMap", "Deployment", "PodDisruptionBudget"} <= kinds
    for doc in built:
        if doc["kind"] == "PodDisruptionBudget":  # this API server (1.20) predates policy/v1
            doc["apiVersion"] = "policy/v1beta1"
    kubeconfig = f"--kubeconfig={cluster.kubeconfig}"
    run("kubectl", kubeconfig, "apply", "-f", str(Path(__file__).parent / "data" / "monitoring-api-standins.yaml"))
    run(
        "kubectl",
        kubeconfig,
        "wait",
        "--for=condition=Established",
        "--timeout=60s",
        "crd/servicemonitors.monitoring.coreos.com",
        "crd/prometheusrules.monitoring.coreos.com",
    )
    run("kubectl", kubeconfig, "apply", "-f", "-", stdin=yaml.safe_dump_all(built))
    deploy = kube.get(path_for("apps/v1", "deployments", NAMESPACE, "daemonjob-controller"))
    assert (
        deploy["spec"]["template"]["spec"]["containers"][0]["image"]
        == "registry.example.com/daemonjob-controller:0.1.0"
    )
    rule = kube.get(path_for("monitoring.coreos.com/v1", "prometheusrules", NAMESPACE, "daemonjob-controller"))
    assert rule["spec"]["groups"]
    kube.get(path_for("monitoring.coreos.com/v1", "servicemonitors", NAMESPACE, "daemonjob-controller"))
    dashboard = kube.get(path_for("v1", "configmaps", NAMESPACE, "daemonjob-dashboard"))
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
