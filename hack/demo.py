"""`make demo`: DaemonJob on a local control plane with simulated nodes, start to finish.

Starts etcd, kube-apiserver, the controller-manager and the scheduler, registers a handful
of simulated nodes, runs the controller, applies a DaemonJob and shows its rollout node by
node; then edits the template to show a re-run everywhere, shows the per-node answers of
`kubectl daemonjob status` and `kubectl daemonjob logs` (one node fails on purpose), then
the alerts of a Prometheus that scraped the controller all along (with the shipped rules),
and stops everything it started; on a terminal it first waits for Enter, so that
Prometheus's own UI can be looked at.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from daemonjob.domain.jobs.contract import job_state  # noqa: E402 - imported once sys.path has the checkout
from daemonjob.domain.shared.apinames import ANNOTATION_NODE, LABEL_NAME, LABEL_REVISION  # noqa: E402 - imported once sys.path has the checkout
from daemonjob.machinery.client.kube import ApiError, Kube, path_for  # noqa: E402 - imported once sys.path has the checkout
from daemonjob.testing.cluster import LocalCluster, free_port, stop_pid  # noqa: E402 - imported once sys.path has the checkout
from daemonjob.testing.crd import install_crd  # noqa: E402 - imported once sys.path has the checkout
from daemonjob.testing.prometheus import LocalPrometheus  # noqa: E402 - imported once sys.path has the checkout
from daemonjob.testing.sim.kubelet import NodeSpec, SimKubelet  # noqa: E402 - imported once sys.path has the checkout

NAMESPACE = "demo"
NAME = "node-setup"

# The embedded default: configure every Linux node, two at a time. The sim.daemonjob.io
# annotations tell the simulated nodes how long the container runs, what it prints and how
# it exits: node-04 fails with exit code 3, a termination message and a log that say why.
FAILING_NODE = "node-04"
DAEMONJOB: dict[str, Any] = {
    "apiVersion": "daemonjob.io/v1alpha1",
    "kind": "DaemonJob",
    "metadata": {"name": NAME, "namespace": NAMESPACE},
    "spec": {
        "nodeSelector": {"matchLabels": {"kubernetes.io/os": "linux"}},
        "maxParallel": 2,
        "jobTemplate": {
            "spec": {
                "backoffLimit": 0,
                "template": {
                    "metadata": {
                        "annotations": {
                            "sim.daemonjob.io/duration": "2",
                            "sim.daemonjob.io/output": "configuring {node}\npackages up to date on {node}",
                            "sim.daemonjob.io/failure-output": "configuring {node}\n"
                            "could not get lock /var/lib/dpkg/lock on {node}",
                            "sim.daemonjob.io/fail-on": FAILING_NODE,
                            "sim.daemonjob.io/exit-code": "3",
                            "sim.daemonjob.io/message": "could not get lock /var/lib/dpkg/lock on {node}",
                        }
                    },
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [
                            {
                                "name": "setup",
                                "image": "busybox:1.36",
                                "command": ["sh", "-c", "echo configuring $(hostname); sleep 2"],
                            }
                        ],
                    },
                },
            }
        },
    },
}


class Screen:
    """Redraws in place on a terminal; prints a frame per change otherwise."""

    def __init__(self) -> None:
        self.tty = sys.stdout.isatty()
        self.last = ""

    def show(self, text: str) -> None:
        if text == self.last:
            return
        self.last = text
        if self.tty:
            sys.stdout.write("\033[H\033[J" + text + "\n")
        else:
            sys.stdout.write(text + "\n\n")
        sys.stdout.flush()


def frame(kube: Kube, nodes: list[str], title: str) -> tuple[str, bool]:
    dj = kube.get(path_for("daemonjob.io/v1alpha1", "daemonjobs", NAMESPACE, NAME))
    status = dj.get("status") or {}
    jobs = kube.get(path_for("batch/v1", "jobs", NAMESPACE), labelSelector=f"{LABEL_NAME}={NAME}")["items"]
    rev = status.get("currentRevision", "")
    by_node: dict[str, list[dict[str, Any]]] = {}
    for job in jobs:
        by_node.setdefault(job["metadata"].get("annotations", {}).get(ANNOTATION_NODE, "?"), []).append(job)
    conds = {c["type"]: c for c in status.get("conditions") or []}
    observed = status.get("observedGeneration") == dj["metadata"].get("generation")
    finished = observed and any(conds.get(kind, {}).get("status") == "True" for kind in ("Complete", "Failed"))
    lines = [
        f"DaemonJob {NAMESPACE}/{NAME}: {title}",
        f"revision {rev or '-'}   desired {status.get('desiredNodes', 0)}   active {status.get('activeNodes', 0)}"
        f"   succeeded {status.get('succeededNodes', 0)}   failed {status.get('failedNodes', 0)}"
        f"   pending {status.get('pendingNodes', 0)}   Complete={conds.get('Complete', {}).get('status', '-')}"
        f"   Failed={conds.get('Failed', {}).get('status', '-')}",
        "",
        f"{'NODE':<16} {'CURRENT REVISION':<18} {'EARLIER REVISIONS':<20} JOB",
    ]
    for node in nodes:
        current = [j for j in by_node.get(node, []) if j["metadata"]["labels"].get(LABEL_REVISION) == rev]
        older = [j for j in by_node.get(node, []) if j["metadata"]["labels"].get(LABEL_REVISION) != rev]
        state = job_state(current[0]) if current else "pending"
        old = ",".join(sorted(job_state(j) for j in older)) or "-"
        lines.append(f"{node:<16} {state:<18} {old:<20} {current[0]['metadata']['name'] if current else ''}")
    return "\n".join(lines), finished


def watch_rollout(kube: Kube, nodes: list[str], title: str, timeout: float) -> None:
    screen = Screen()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text, finished = frame(kube, nodes, title)
        screen.show(text)
        if finished:
            return
        time.sleep(0.5)
    raise TimeoutError(f"the rollout did not finish within {timeout}s")


def show_monitoring(prometheus: LocalPrometheus) -> None:
    """The alerts Prometheus evaluated from the controller's metrics, and where to look."""
    wait_until = time.monotonic() + 15  # a scrape and an evaluation after the last change
    while time.monotonic() < wait_until and not prometheus.alerts("DaemonJobNodesFailed"):
        time.sleep(0.5)
    print(f"\nPrometheus with the DaemonJob alerts (manifests/monitoring): {prometheus.page('alerts')}")
    print(f"graphs: {prometheus.page('graph')}  (the dashboard's queries: manifests/monitoring/dashboard.json)")
    for alert in prometheus.alerts():
        labels = alert["labels"]
        print(
            f"  {alert['state']:8} {labels['alertname']} ({labels.get('severity')}): "
            f"{alert['annotations'].get('description', '')}"
        )
    if sys.stdin.isatty():
        input("press Enter to stop everything ... ")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=6)
    parser.add_argument("--timeout", type=float, default=120)
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))

    print("starting a local control plane (first run provisions the binaries) ...", flush=True)
    controller: subprocess.Popen | None = None
    prometheus: LocalPrometheus | None = None
    with LocalCluster() as cluster:
        kube = Kube.from_config(str(cluster.kubeconfig))
        with SimKubelet(kube) as kubelet:
            try:
                names = [f"node-{i:02d}" for i in range(1, args.nodes + 1)]
                kubelet.add_nodes(NodeSpec(n) for n in names)
                kubelet.wait_ready(names)
                kubectl = cluster.kubectl_command()
                install_crd(kubectl, ROOT / "manifests" / "crd.yaml")
                log_path = cluster.workdir / "controller.log"
                metrics_port = free_port()
                with open(log_path, "wb") as log:
                    controller = subprocess.Popen(
                        [
                            sys.executable,
                            "-m",
                            "daemonjob",
                            "--kubeconfig",
                            str(cluster.kubeconfig),
                            "--metrics-bind-address",
                            f"127.0.0.1:{metrics_port}",
                            "--metrics-secure=false",
                            "--webhook-bind-address=0",  # no webhook Service to reach locally
                            "--health-probe-bind-address",
                            f"127.0.0.1:{free_port()}",
                            "--log-format",
                            "json",
                        ],
                        stdout=log,
                        stderr=subprocess.STDOUT,
                    )
                prometheus = LocalPrometheus(
                    cluster.workdir / "prometheus",
                    targets=[f"127.0.0.1:{metrics_port}"],
                    scrape_interval="2s",
                    evaluation_interval="2s",
                ).start()
                kube.create(path_for("v1", "namespaces"), {"metadata": {"name": NAMESPACE}})
                kube.create(path_for("daemonjob.io/v1alpha1", "daemonjobs", NAMESPACE), DAEMONJOB)
                watch_rollout(kube, names, "first run, at most 2 nodes at a time", args.timeout)
                time.sleep(1)
                kube.patch(
                    path_for("daemonjob.io/v1alpha1", "daemonjobs", NAMESPACE, NAME),
                    {"spec": {"jobTemplate": {"metadata": {"annotations": {"demo/rerun": "1"}}}}},
                )
                watch_rollout(kube, names, "template changed: a new revision re-runs everywhere", args.timeout)
                # A fresh discovery cache: the one from before the CRD existed may not know `dj`.
                kubectl += ["--cache-dir", str(cluster.workdir / "kubectl-cache")]
                print("\n$ kubectl get dj -n demo")
                subprocess.run([*kubectl, "get", "dj", "-n", NAMESPACE])
                print("\n$ kubectl get events -n demo --field-selector involvedObject.kind=DaemonJob")
                subprocess.run(
                    [
                        *kubectl,
                        "get",
                        "events",
                        "-n",
                        NAMESPACE,
                        "--sort-by=.metadata.creationTimestamp",
                        "--field-selector",
                        "involvedObject.kind=DaemonJob",
                    ]
                )
                # The plugin as users run it: kubectl finds kubectl-daemonjob on PATH.
                env = {
                    **os.environ,
                    "KUBECONFIG": str(cluster.kubeconfig),
                    "PATH": os.pathsep.join(
                        [str(Path(sys.executable).parent), str(cluster.bin_dir), os.environ.get("PATH", "")]
                    ),
                }
                for words in (["status", NAME], ["logs", NAME]):
                    print(f"\n$ kubectl daemonjob {' '.join(words)} -n {NAMESPACE}", flush=True)
                    subprocess.run(["kubectl", "daemonjob", *words, "-n", NAMESPACE], env=env)
                show_monitoring(prometheus)
                print("\ndemo finished; stopping the controller, Prometheus and the cluster")
            except KeyboardInterrupt:
                print("\ninterrupted; stopping everything", flush=True)
                return 130
            except (ApiError, TimeoutError, RuntimeError, subprocess.CalledProcessError) as exc:
                print(f"demo failed: {exc}", file=sys.stderr)
                if controller is not None:
                    print(f"controller log: {log_path.read_text()[-3000:]}", file=sys.stderr)
                return 1
            finally:
                if controller is not None:
                    stop_pid(controller.pid)
                if prometheus is not None:
                    prometheus.stop()
    return 0


if __name__ == "__main__":
    os.chdir(ROOT)
    sys.exit(main())
