"""`make deploy NODE_MAINTENANCE=1` then `make undeploy`, the real targets, on a local control
plane of their own while the controller holds two nodes cordoned: the undeploy releases every
node before the node powers go, so nothing stays cordoned or keeps its maintenance record, no
DaemonJob keeps the finalizer (the CRD's deletion, which waits for every DaemonJob, completes),
the ClusterRoleBinding with node powers is gone and the daemonjob-system namespace's deletion
completes.

What differs from a real cluster:
- The API server is 1.20, which serves PodDisruptionBudgets as policy/v1beta1 only: KUBECTL is
  a wrapper (`served_kubectl`) that renders what `-k DIR` or `-f -` gives it and sends the
  manifests' policy/v1 PodDisruptionBudget as policy/v1beta1, the same object.
- The test bed runs no containers and has no Service networking: the controller is a local
  process with the token of the manifests' ServiceAccount (its Deployment's pod is simulated
  and does nothing), and the ValidatingWebhookConfiguration is deleted after the deploy (its
  Service has no endpoint, and its failurePolicy is Fail).
- Both nodes are held at once: the controller runs with --max-unavailable-nodes=100% after the
  component's 10% (a cluster of three nodes).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from installtools import NAMESPACE, ROOT, bin_dir
from test_helm_cluster import CRD, DJ_API, WEBHOOK_CONFIGURATION, WEBHOOKS, service_account_kubeconfig
from test_helm_node_release import BINDING, controller, finalizers, gone, held, maintained, released

from daemonjob.domain.nodework.maintenance import FINALIZER
from daemonjob.machinery.client.kube import Kube, path_for
from daemonjob.testing.cluster import LocalCluster
from daemonjob.testing.sim.kubelet import NodeSpec, SimKubelet
from daemonjob.testing.waiting import wait_for

pytestmark = pytest.mark.cluster

MAINTAINED_NS = "ops"  # the component's sample value of --node-maintenance-namespaces
CRD_PATH = path_for("apiextensions.k8s.io/v1", "customresourcedefinitions", name=CRD)
NAMESPACE_PATH = path_for("v1", "namespaces", name=NAMESPACE)

WRAPPER = '''#!{python}
"""kubectl for a 1.20 API server: the manifests of `-k DIR` or `-f -`, their policy/v1
PodDisruptionBudget sent as policy/v1beta1 (1.20 serves no other)."""
import subprocess, sys, yaml
KUBECTL = {kubectl!r}
args = sys.argv[1:]
if "-k" in args:
    i = args.index("-k")
    text = subprocess.run([KUBECTL, "kustomize", args[i + 1]], check=True, capture_output=True, text=True).stdout
    args[i : i + 2] = ["-f", "-"]
elif "-" in args and args[args.index("-") - 1] == "-f":
    text = sys.stdin.read()
else:
    sys.exit(subprocess.run([KUBECTL, *args]).returncode)
docs = [d for d in yaml.safe_load_all(text) if d]
for doc in docs:
    if doc["kind"] == "PodDisruptionBudget" and doc["apiVersion"] == "policy/v1":
        doc["apiVersion"] = "policy/v1beta1"
sys.exit(subprocess.run([KUBECTL, *args], input=yaml.safe_dump_all(docs), text=True).returncode)
'''


@pytest.fixture(scope="module")
def bed() -> Iterator[tuple[LocalCluster, Kube, SimKubelet]]:
    with LocalCluster() as cluster:
        kube = Kube.from_config(str(cluster.kubeconfig))
        with SimKubelet(kube) as kubelet:
            yield cluster, kube, kubelet


def served_kubectl(path: Path) -> Path:
    path.write_text(WRAPPER.format(python=sys.executable, kubectl=str(bin_dir() / "kubectl")))
    path.chmod(0o755)
    return path


def make(target: str, cluster: LocalCluster, kubectl: Path, *args: str, timeout: float = 180) -> str:
    """`make <target>` in the repository against the local cluster; its output. A deletion that
    hangs (kubectl waits for it) fails here, every process of the target ended."""
    proc = subprocess.Popen(
        ["make", "--no-print-directory", "-C", str(ROOT), target, f"KUBECTL={kubectl}", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "KUBECONFIG": str(cluster.kubeconfig)},
        start_new_session=True,
    )
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        raise AssertionError(f"make {target} did not end within {timeout:.0f}s:\n{out}") from None
    assert proc.returncode == 0, f"make {target} exited {proc.returncode}:\n{out}"
    return out


def test_undeploy_releases_held_nodes_before_removing_the_manifests(
    bed: tuple[LocalCluster, Kube, SimKubelet], tmp_path: Path
) -> None:
    cluster, kube, kubelet = bed
    kubectl = served_kubectl(tmp_path / "kubectl")
    label = uuid.uuid4().hex[:8]
    held_nodes = [f"und-{label}-{i}" for i in range(2)]
    kubelet.add_nodes([NodeSpec(n, labels={"install-test": label}) for n in held_nodes])
    kubelet.add_nodes([NodeSpec(f"und-{label}-free")])
    kubelet.wait_ready([*held_nodes, f"und-{label}-free"], timeout=60)

    make("deploy", cluster, kubectl, "NODE_MAINTENANCE=1")
    kube.delete(path_for(WEBHOOKS, "validatingwebhookconfigurations", name=WEBHOOK_CONFIGURATION))
    assert not gone(kube, BINDING)
    wait_for(
        lambda: kube.get(CRD_PATH).get("status", {}).get("acceptedNames", {}).get("kind"),
        timeout=30,
        what="the CRD served",
    )
    kube.create(path_for("v1", "namespaces"), {"metadata": {"name": MAINTAINED_NS}})
    kubeconfig = service_account_kubeconfig(cluster, kube, tmp_path / "sa-kubeconfig")
    proc = controller(kubeconfig, tmp_path / "controller.log", kube, "--max-unavailable-nodes=100%")
    try:
        kube.create(path_for(DJ_API, "daemonjobs", MAINTAINED_NS), maintained("held", label))
        wait_for(lambda: all(held(kube, n) for n in held_nodes), timeout=90, what="both nodes held")
        assert FINALIZER in finalizers(kube, MAINTAINED_NS, "held")

        out = make("undeploy", cluster, kubectl)
    finally:
        proc.stop()  # its pod ends with the Deployment
    assert "released 2 node(s) (2 uncordoned); removed the finalizer" in out, out
    assert "from 1 DaemonJob(s)" in out, out
    assert all(released(kube, n) for n in held_nodes), "a node stayed cordoned or kept its maintenance record"
    assert gone(kube, BINDING), "the ClusterRoleBinding with node powers outlived the undeploy"
    # kubectl waited for both deletions; the CRD's waits for every DaemonJob and its finalizer
    wait_for(lambda: gone(kube, NAMESPACE_PATH), timeout=60, what="the namespace daemonjob-system gone")
    wait_for(lambda: gone(kube, CRD_PATH), timeout=60, what="the CRD gone")
    subprocess.run(
        [str(kubectl), f"--kubeconfig={cluster.kubeconfig}", "delete", "--ignore-not-found", "crd", CRD],
        check=True,
        timeout=60,
    )
    assert all(released(kube, n) for n in held_nodes)
