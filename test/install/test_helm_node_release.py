"""Node maintenance taken out of a cluster with the real helm, on a local control plane of its
own, while the controller holds nodes: turning `nodeMaintenance.enabled` off, then (enabled
again) `helm uninstall` followed by `kubectl delete crd`. Each time the chart's hook Job
`release-nodes` releases every node before the node powers go, nothing stays cordoned, no
namespace or CRD deletion waits on the finalizer, and no ClusterRoleBinding with node powers
is left.

The test bed runs no containers: the hook's pod is run here as its kubelet would, with the
pod's own arguments and the token of the pod's own ServiceAccount (`HookRunner`), and its
end written into the pod's status (only `--settle` is shortened, to 1 s); the Job controller
and helm take it from there.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from installtools import CHART, NAMESPACE, helm_env, run
from test_helm_cluster import CRD, DJ_API, deployment_args, service_account_kubeconfig

from daemonjob.controller.nodework.cordonstop import STOP_ANNOTATION, stopped_until
from daemonjob.domain.nodework.maintenance import FINALIZER
from daemonjob.domain.shared.noderecord import record_of
from daemonjob.machinery.client.kube import PATCH_MERGE, PATCH_STRATEGIC, ApiError, Kube, path_for
from daemonjob.testing.cluster import LocalCluster
from daemonjob.testing.doubles.builders import daemonjob, job_template
from daemonjob.testing.process import ControllerProcess
from daemonjob.testing.sim.kubelet import ANNOTATION_DURATION, NodeSpec, SimKubelet
from daemonjob.testing.sim.simpod import ANNOTATION_EXIT_CODE, end_status, now_rfc3339
from daemonjob.testing.waiting import wait_for

pytestmark = pytest.mark.cluster

HOOK_LABEL = "app.kubernetes.io/name=daemonjob-release-nodes"
BINDING = path_for("rbac.authorization.k8s.io/v1", "clusterrolebindings", name="daemonjob-node-maintenance")
LEASE = path_for("coordination.k8s.io/v1", "leases", NAMESPACE, "daemonjob-controller")
# the hook's pod stays Running in the simulated kubelet until HookRunner has run it
_ESCAPED = ANNOTATION_DURATION.replace(".", "\\.")  # a dot in a key, as --set reads it
HOOK_POD = ["--set-string", f"nodeMaintenance.releaseHook.podAnnotations.{_ESCAPED}=3600"]


@pytest.fixture(scope="module")
def bed() -> Iterator[tuple[LocalCluster, Kube, SimKubelet]]:
    with LocalCluster() as cluster:
        kube = Kube.from_config(str(cluster.kubeconfig))
        with SimKubelet(kube) as kubelet:
            yield cluster, kube, kubelet


class HookRunner:
    """Runs each pod of the hook Job that the simulated kubelet has started: its container's
    arguments, as `python -m daemonjob`, with its ServiceAccount's token; then writes the end."""

    def __init__(self, cluster: LocalCluster, kube: Kube, tmp: Path) -> None:
        self.cluster, self.kube, self.tmp = cluster, kube, tmp
        self.done: dict[str, subprocess.CompletedProcess[str]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> HookRunner:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(30)

    def _loop(self) -> None:
        while not self._stop.wait(0.5):
            pods = self.kube.get(path_for("v1", "pods", NAMESPACE), labelSelector=HOOK_LABEL)["items"]
            for pod in pods:
                uid = pod["metadata"]["uid"]
                if uid not in self.done and (pod.get("status") or {}).get("phase") == "Running":
                    self._run(pod)

    def _run(self, pod: dict[str, Any]) -> None:
        account = pod["spec"]["serviceAccountName"]
        assert account == "daemonjob-controller"
        kubeconfig = service_account_kubeconfig(self.cluster, self.kube, self.tmp / f"hook-{account}")
        (container,) = pod["spec"]["containers"]
        proc = subprocess.run(
            [sys.executable, "-m", "daemonjob", *container["args"], f"--kubeconfig={kubeconfig}", "--settle=1"],
            capture_output=True,
            text=True,
            timeout=120,
        )
        self.done[pod["metadata"]["uid"]] = proc
        ended = {**pod, "metadata": {**pod["metadata"], "annotations": {ANNOTATION_EXIT_CODE: str(proc.returncode)}}}
        now = now_rfc3339()
        self.kube.patch(
            path_for("v1", "pods", NAMESPACE, pod["metadata"]["name"], "status"),
            {"metadata": {"uid": pod["metadata"]["uid"]}, "status": end_status(ended, now, now)},
            content_type=PATCH_STRATEGIC,
        )

    def outputs(self) -> str:
        return "\n".join(p.stdout + p.stderr for p in self.done.values())


def helm(cluster: LocalCluster, home: Path, *args: str) -> Any:
    return run("helm", *args, f"--kubeconfig={cluster.kubeconfig}", env=helm_env(home))


def held(kube: Kube, node: str) -> bool:
    obj = kube.get(path_for("v1", "nodes", name=node))
    return bool(obj["spec"].get("unschedulable")) and record_of(obj) is not None


def released(kube: Kube, node: str) -> bool:
    obj = kube.get(path_for("v1", "nodes", name=node))
    return not obj["spec"].get("unschedulable") and record_of(obj) is None


def gone(kube: Kube, path: str) -> bool:
    try:
        kube.get(path)
    except ApiError as exc:
        if exc.not_found:
            return True
        raise
    return False


def maintained(name: str, label: str) -> dict[str, Any]:
    """Cordons each node labelled install-test=`label`, its pod running ten minutes."""
    template = job_template(
        pod_annotations={ANNOTATION_DURATION: "600"},
        container={"name": "main", "image": "busybox:1.36", "command": ["true"]},
    )
    body = daemonjob(
        name, manifest=True, template=template, nodeSelector={"matchLabels": {"install-test": label}}, maxParallel=2
    )
    body["spec"]["nodeMaintenance"] = {"cordon": True}
    return body


def controller(kubeconfig: Path, log: Path, kube: Kube, *extra: str, elect: bool = True) -> ControllerProcess:
    """The controller with the Deployment's node maintenance flags as installed now (`extra`
    after them: the last of a flag given twice wins); `elect`: --leader-elect, as the chart's
    leaderElection.enabled (off, the pod's namespace is still where it reads the stop)."""
    mine = ("--node-maintenance-namespaces", "--max-unavailable-nodes", "--protected-node-selector")
    flags = [a for a in deployment_args(kube) if a.startswith(mine)]
    election = ["--leader-elect"] if elect else []
    return ControllerProcess(
        kubeconfig, log, *election, f"--leader-election-namespace={NAMESPACE}", *flags, *extra
    ).start(wait=True)


def finalizers(kube: Kube, ns: str, name: str) -> list[str]:
    return kube.get(path_for(DJ_API, "daemonjobs", ns, name))["metadata"].get("finalizers") or []


def test_maintenance_off_and_uninstall_leave_no_node_cordoned(
    bed: tuple[LocalCluster, Kube, SimKubelet], tmp_path: Path
) -> None:
    cluster, kube, kubelet = bed
    home = tmp_path / "helm"
    label = uuid.uuid4().hex[:8]
    held_nodes = [f"rel-{label}-{i}" for i in range(2)]
    kubelet.add_nodes([NodeSpec(n, labels={"install-test": label}) for n in held_nodes])
    kubelet.add_nodes([NodeSpec(f"rel-{label}-free")])  # where the hook's pod runs
    kubelet.wait_ready([*held_nodes, f"rel-{label}-free"], timeout=60)
    first, second = f"a-{label}", f"b-{label}"
    for ns in (first, second):
        kube.create(path_for("v1", "namespaces"), {"metadata": {"name": ns}})
    common = ["-n", NAMESPACE, "--set", "webhook.enabled=false,replicas=1", *HOOK_POD]
    on = [  # both nodes held at once: no cluster-wide limit in a cluster of three nodes
        "--set",
        f"nodeMaintenance.enabled=true,nodeMaintenance.namespaces={{{first},{second}}}",
        "--set-string",
        "nodeMaintenance.maxUnavailableNodes=100%",
    ]
    helm(cluster, home, "install", "daemonjob", str(CHART), "--create-namespace", *common, *on)
    wait_for(lambda: not gone(kube, path_for("apiextensions.k8s.io/v1", "customresourcedefinitions", name=CRD)))
    kubeconfig = service_account_kubeconfig(cluster, kube, tmp_path / "sa-kubeconfig")

    # 1. nodeMaintenance.enabled turned off while two nodes are held
    proc = controller(kubeconfig, tmp_path / "controller.log", kube)
    try:
        kube.create(path_for(DJ_API, "daemonjobs", first), maintained("held", label))
        wait_for(lambda: all(held(kube, n) for n in held_nodes), timeout=90, what="both nodes held")
        assert FINALIZER in finalizers(kube, first, "held")
        with HookRunner(cluster, kube, tmp_path) as hook:
            helm(cluster, home, "upgrade", "daemonjob", str(CHART), *common, "--set", "nodeMaintenance.enabled=false")
        assert len(hook.done) == 1 and "released 2 node(s) (2 uncordoned)" in hook.outputs(), hook.outputs()
        assert all(released(kube, n) for n in held_nodes)
        assert finalizers(kube, first, "held") == []
        assert gone(kube, BINDING), "a ClusterRoleBinding with node powers outlived node maintenance"
        assert stopped_until(kube.get(LEASE)) is not None, "cordons were not stopped while the nodes were released"
        assert not any(a.startswith("--node-maintenance-namespaces") for a in deployment_args(kube))
    finally:
        proc.stop()
    proc = controller(kubeconfig, tmp_path / "controller-off.log", kube)  # the rolled-out pod: no flag, no powers
    try:
        wait_for(
            lambda: any(
                c.get("reason") == "NodeMaintenanceNotAllowed"
                for c in (kube.get(path_for(DJ_API, "daemonjobs", first, "held")).get("status") or {}).get("conditions")
                or ()
            ),
            timeout=60,
            what="the DaemonJob Stalled NodeMaintenanceNotAllowed",
        )
        assert all(released(kube, n) for n in held_nodes)
        kube.delete(path_for("v1", "namespaces", name=first))
        wait_for(lambda: gone(kube, path_for("v1", "namespaces", name=first)), timeout=120, what="the namespace gone")
    finally:
        proc.stop()

    # 2. enabled again (the stop on cordons lifted by hand rather than waited out), then
    # helm uninstall while a node is held, then the CRD deleted
    kube.patch(LEASE, {"metadata": {"annotations": {STOP_ANNOTATION: None}}}, content_type=PATCH_MERGE)
    helm(cluster, home, "upgrade", "daemonjob", str(CHART), *common, *on)
    proc = controller(kubeconfig, tmp_path / "controller-on.log", kube)
    try:
        kube.create(path_for(DJ_API, "daemonjobs", second), maintained("held", label))
        wait_for(lambda: all(held(kube, n) for n in held_nodes), timeout=90, what="both nodes held again")
        with HookRunner(cluster, kube, tmp_path) as hook:
            helm(cluster, home, "uninstall", "daemonjob", "-n", NAMESPACE)
        assert len(hook.done) == 1 and "released 2 node(s) (2 uncordoned)" in hook.outputs(), hook.outputs()
    finally:
        proc.stop()
    assert all(released(kube, n) for n in held_nodes)
    assert finalizers(kube, second, "held") == []
    assert gone(kube, BINDING)
    crd = path_for("apiextensions.k8s.io/v1", "customresourcedefinitions", name=CRD)
    kube.delete(crd)
    wait_for(lambda: gone(kube, crd), timeout=120, what="the CRD gone")
    assert all(released(kube, n) for n in held_nodes)


def test_without_leader_election_uninstall_runs_the_hook_and_leaves_no_node_cordoned(
    bed: tuple[LocalCluster, Kube, SimKubelet], tmp_path: Path
) -> None:
    """leaderElection.enabled=false: the hook takes the flags release-nodes accepts, writes its
    stop on a Lease no leader ever created (the chart grants it with the hook), and releases."""
    cluster, kube, kubelet = bed
    home = tmp_path / "helm"
    label = uuid.uuid4().hex[:8]
    held_nodes = [f"nle-{label}-{i}" for i in range(2)]
    kubelet.add_nodes([NodeSpec(n, labels={"install-test": label}) for n in held_nodes])
    kubelet.wait_ready(held_nodes, timeout=60)
    ns = f"c-{label}"
    kube.create(path_for("v1", "namespaces"), {"metadata": {"name": ns}})
    if not gone(kube, LEASE):  # an earlier test's leader left it
        kube.delete(LEASE)
    values = "webhook.enabled=false,replicas=1,leaderElection.enabled=false"
    common = ["-n", NAMESPACE, "--set", values, *HOOK_POD]
    on = ["--set", f"nodeMaintenance.enabled=true,nodeMaintenance.namespaces={{{ns}}}"]
    on += ["--set-string", "nodeMaintenance.maxUnavailableNodes=100%"]
    helm(cluster, home, "upgrade", "--install", "daemonjob", str(CHART), "--create-namespace", *common, *on)
    wait_for(lambda: not gone(kube, path_for("apiextensions.k8s.io/v1", "customresourcedefinitions", name=CRD)))
    assert "--leader-elect" not in deployment_args(kube)
    kubeconfig = service_account_kubeconfig(cluster, kube, tmp_path / "sa-kubeconfig")
    proc = controller(kubeconfig, tmp_path / "controller.log", kube, elect=False)
    try:
        kube.create(path_for(DJ_API, "daemonjobs", ns), maintained("held", label))
        wait_for(lambda: all(held(kube, n) for n in held_nodes), timeout=90, what="both nodes held")
        assert gone(kube, LEASE), "a controller electing no leader wrote a Lease"
        with HookRunner(cluster, kube, tmp_path) as hook:
            helm(cluster, home, "uninstall", "daemonjob", "-n", NAMESPACE)
        assert len(hook.done) == 1 and "released 2 node(s) (2 uncordoned)" in hook.outputs(), hook.outputs()
    finally:
        proc.stop()
    assert all(released(kube, n) for n in held_nodes)
    assert finalizers(kube, ns, "held") == []
    lease = kube.get(LEASE)
    assert stopped_until(lease) is not None and not (lease.get("spec") or {}).get("holderIdentity")
    assert gone(kube, BINDING)
    crd = path_for("apiextensions.k8s.io/v1", "customresourcedefinitions", name=CRD)
    kube.delete(crd)
    wait_for(lambda: gone(kube, crd), timeout=120, what="the CRD gone")
