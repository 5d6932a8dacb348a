"""How long `kubectl daemonjob status` takes on a big DaemonJob: prints the figure.

Fabricates N realistic Nodes, N node Jobs of one DaemonJob and one pod per Job, all with
finished statuses written directly (the Job controller is off, so nothing runs), a few
failed with an exit code and a termination message; then runs the plugin's `status -o json`
and its table output as a user would, in a fresh process, and reports the wall time.

`--hold` keeps the populated cluster up after measuring (until SIGTERM or Ctrl-C) and prints
its kubeconfig; `--kubeconfig PATH` then measures that cluster again without rebuilding it
(building 5000 nodes takes minutes; a measurement takes seconds).
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

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_informer
import benchlib

from daemonjob.domain.shared.apinames import API_VERSION, LABEL_NAME
from daemonjob.machinery.client.kube import ApiError, Kube, path_for
from daemonjob.testing.cluster import ClusterOptions, LocalCluster

NS, NAME, REVISION = bench_informer.NAMESPACE, bench_informer.DJ_NAME, bench_informer.REVISION
FAIL_EVERY = 100  # one node in a hundred failed
T0, T1 = "2026-11-02T10:00:00Z", "2026-11-02T10:00:12Z"


def failed(i: int) -> bool:
    return i % FAIL_EVERY == 7


def job_status(i: int) -> dict[str, Any]:
    if failed(i):
        return {
            "startTime": T0,
            "failed": 1,
            "conditions": [
                {
                    "type": "Failed",
                    "status": "True",
                    "reason": "BackoffLimitExceeded",
                    "message": "Job has reached the specified backoff limit",
                    "lastProbeTime": T1,
                    "lastTransitionTime": T1,
                }
            ],
        }
    return bench_informer.finished_status()


def pod_body(i: int, job: dict[str, Any]) -> dict[str, Any]:
    meta = job["metadata"]
    template = job["spec"]["template"]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{meta['name'][:50]}-x7k2p",
            "namespace": NS,
            "labels": {**template["metadata"]["labels"], "job-name": meta["name"], "controller-uid": meta["uid"]},
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "name": meta["name"],
                    "uid": meta["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {**template["spec"], "nodeName": bench_informer.node_name(i)},
    }


def pod_status(i: int) -> dict[str, Any]:
    code = 3 if failed(i) else 0
    terminated = {
        "exitCode": code,
        "reason": "Error" if code else "Completed",
        "startedAt": T0,
        "finishedAt": T1,
        "containerID": f"containerd://{i:064x}",
    }
    if code:
        terminated["message"] = "audit: /var/lib/kubelet: permission denied"
    return {
        "phase": "Failed" if code else "Succeeded",
        "startTime": T0,
        "hostIP": "10.0.0.1",
        "podIP": "10.244.0.1",
        "containerStatuses": [
            {
                "name": "audit",
                "ready": False,
                "restartCount": 0,
                "started": False,
                "image": "registry.example.com/platform/security/node-audit:v2.3.1",
                "imageID": "",
                "state": {"terminated": terminated},
            }
        ],
    }


def populate(kube: Kube, n: int, threads: int) -> None:
    bench_informer.populate(kube, n, threads)  # nodes, the DaemonJob and finished Jobs
    dj_path = path_for(API_VERSION, "daemonjobs", NS, NAME)
    dj = kube.get(dj_path)
    kube.patch(
        f"{dj_path}/status",
        {
            "status": {
                "observedGeneration": dj["metadata"]["generation"],
                "currentRevision": REVISION,
                "desiredNodes": n,
            }
        },
    )
    jobs = {
        j["metadata"]["name"]: j
        for j in kube.get(path_for("batch/v1", "jobs", NS), labelSelector=f"{LABEL_NAME}={NAME}")["items"]
    }
    by_index = {}
    for i in range(n):
        name = bench_informer.job_body(i, "")["metadata"]["name"]
        by_index[i] = jobs[name]

    def make_pod(i: int) -> None:
        job = by_index[i]
        if failed(i):
            kube.patch(path_for("batch/v1", "jobs", NS, job["metadata"]["name"], "status"), {"status": job_status(i)})
        body = pod_body(i, job)
        try:
            kube.create(path_for("v1", "pods", NS), body)
        except ApiError as exc:
            if not exc.already_exists:
                raise
        kube.patch(path_for("v1", "pods", NS, body["metadata"]["name"], "status"), {"status": pod_status(i)})

    started = time.monotonic()
    benchlib.run_concurrently(make_pod, range(n), threads)
    print(f"created {n} pods (with status) in {time.monotonic() - started:.1f}s", flush=True)


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, subprocess.CompletedProcess[bytes]]:
    started = time.monotonic()
    out = subprocess.run(argv, env=env, capture_output=True)
    return time.monotonic() - started, out


def measure(kubeconfig: Path, nodes: int, runs: int) -> int:
    env = {**os.environ, "KUBECONFIG": str(kubeconfig)}
    plugin = [str(Path(sys.executable).parent / "kubectl-daemonjob"), "status", NAME, "-n", NS]
    for fmt in ("json", "table"):
        times = []
        for _ in range(runs):
            seconds, out = timed([*plugin, *(["-o", "json"] if fmt == "json" else [])], env)
            if out.returncode not in (0, 2):
                print(out.stderr.decode(), file=sys.stderr)
                return 1
            times.append(seconds)
        rows = out.stdout.count(b"\n")
        print(
            f"status {fmt}: {nodes} nodes, {rows} output lines, exit {out.returncode}: "
            f"best {min(times):.2f}s, median {sorted(times)[len(times) // 2]:.2f}s of {runs} runs "
            "(a fresh process each: start-up, 1 DaemonJob get + 3 concurrent lists, building the view)",
            flush=True,
        )
    return 0


def _stop_on_sigterm(*_: object) -> None:
    raise KeyboardInterrupt


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--threads", type=int, default=16)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--hold", action="store_true", help="keep the populated cluster up after measuring, until SIGTERM or Ctrl-C"
    )
    parser.add_argument(
        "--kubeconfig", type=Path, help="measure a cluster already populated by a --hold run instead of building one"
    )
    args = parser.parse_args()
    if args.kubeconfig:
        return measure(args.kubeconfig, args.nodes, args.runs)
    signal.signal(signal.SIGTERM, _stop_on_sigterm)  # the cluster's processes are stopped on the way out
    with LocalCluster(options=ClusterOptions(node_lifecycle=False, controllers="*,-job")) as cluster:
        kube = Kube.from_config(str(cluster.kubeconfig))
        populate(kube, args.nodes, args.threads)
        code = measure(cluster.kubeconfig, args.nodes, args.runs)
        if args.hold:
            print(
                f"holding the cluster: {sys.argv[0]} --nodes {args.nodes} --kubeconfig {cluster.kubeconfig}", flush=True
            )
            try:
                signal.pause()
            except KeyboardInterrupt:
                pass
    return code


if __name__ == "__main__":
    sys.exit(main())
