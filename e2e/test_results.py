"""Per-node results against the real API server: recorded, kept after pods, Jobs and nodes go,
grouped, safe across a SIGKILL, chunked, and read by a user who may only view DaemonJobs."""

from __future__ import annotations

import base64
import csv
import io
import json
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness import OK, Cluster, Nodes, daemonjob, wait_for

from daemonjob.domain.shared.apinames import API_VERSION, LABEL_NAME
from daemonjob.machinery.client.kube import path_for
from daemonjob.testing.clusterpki import kubeconfig_text
from daemonjob.testing.sim.simpod import (
    ANNOTATION_DURATION,
    ANNOTATION_EXIT_CODE,
    ANNOTATION_MESSAGE,
    ANNOTATION_MESSAGES,
    ANNOTATION_OUTPUT,
)

REPORTS = "daemonjobreports"
MANIFESTS = Path(__file__).resolve().parents[1] / "manifests"


def reports(api: Cluster, name: str) -> list[dict[str, Any]]:
    path = path_for(API_VERSION, REPORTS, api.namespace)
    return api.kube.get(path, labelSelector=f"{LABEL_NAME}={name}")["items"]


def recorded(api: Cluster, name: str, revision: str | None = None) -> dict[str, dict[str, Any]]:
    """node -> result, of every kept chunk (of `revision` only, if given); a node recorded twice fails."""
    out: dict[str, dict[str, Any]] = {}
    for report in reports(api, name):
        if revision is not None and report["revision"] != revision:
            continue
        assert report["count"] == len(report["results"])
        for r in report["results"]:
            key = f"{r['node']}@{r['revision']}"
            assert key not in out, f"{key} recorded twice"
            out[key] = r
    return {k.split("@")[0]: v for k, v in out.items()}


def wait_recorded(api: Cluster, name: str, count: int, revision: str | None = None) -> dict[str, dict[str, Any]]:
    return wait_for(
        lambda: got if len(got := recorded(api, name, revision)) >= count else None,
        90,
        f"{count} results of {name}",
    )


def audit(name: str, group: str, messages: dict[str, str], **spec: Any) -> dict[str, Any]:
    body = daemonjob(name, group, OK, **spec)
    pod_meta = body["spec"]["jobTemplate"]["spec"]["template"]["metadata"]
    pod_meta["annotations"] |= {ANNOTATION_MESSAGES: json.dumps(messages), ANNOTATION_DURATION: "0"}
    return body


def test_an_audit_records_each_nodes_fact_and_status_names_the_odd_one(
    api: Cluster, nodes: Nodes, group: str, controller: Any
) -> None:
    names = nodes(4)
    facts = {n: json.dumps({"kernel": "6.1.0-18", "node": n}) for n in names}
    facts[names[2]] = json.dumps({"kernel": "6.1.0-17", "node": names[2]})
    api.apply(audit("kernels", group, facts))
    revision = api.wait_complete("kernels", 4)["status"]["currentRevision"]
    got = wait_recorded(api, "kernels", 4)
    assert {n: r["message"] for n, r in got.items()} == facts
    assert all(r["exitCode"] == 0 and r["state"] == "succeeded" and r["revision"] == revision for r in got.values())
    assert all(r["startTime"] <= r["finishTime"] and r["job"] and r["pod"] for r in got.values())
    status = wait_for(
        lambda: s if (s := api.status("kernels").get("results") or {}).get("recorded") == 4 else None,
        60,
        "status.results to count 4 nodes",
    )
    assert status["outcomes"] == 4 and status["revision"] == revision  # every message names its node
    api.patch("kernels", {"results": {"groupBy": ".kernel"}})  # status.results by the JSON field

    def by_kernel() -> dict[str, Any] | None:
        s = api.status("kernels").get("results") or {}
        return s if s.get("outcomes") == 2 else None

    grouped = wait_for(by_kernel, 60, "status.results grouped by .kernel")
    assert [(g["message"], g["count"]) for g in grouped["groups"]] == [("6.1.0-18", 3), ("6.1.0-17", 1)]
    assert grouped["summary"] == f"2 outcomes; odd ones: {names[2]}"
    assert api.status("kernels")["currentRevision"] == revision  # not a template change: nothing re-runs
    (only,) = reports(api, "kernels")
    owner = only["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["controller"]) == ("DaemonJob", "kernels", True)


def test_results_outlive_pods_jobs_and_nodes(
    api: Cluster, nodes: Nodes, group: str, controller: Any, kubectl: Callable[..., Any]
) -> None:
    """historyLimit 0: the first revision's Jobs are deleted once the second ran; its results stay."""
    names = nodes(3)
    api.apply(audit("keep", group, {n: f"fact of {n}" for n in names}, historyLimit=0))
    first = api.wait_complete("keep", 3)["status"]["currentRevision"]
    wait_recorded(api, "keep", 3, first)
    kubectl("delete", "pods", "-n", api.namespace, "-l", f"{LABEL_NAME}=keep", "--wait=true")
    api.patch("keep", {"jobTemplate": {"metadata": {"annotations": {"edit": "2"}}}})
    second = wait_for(
        lambda: s["currentRevision"] if (s := api.status("keep")).get("currentRevision") != first else None,
        60,
        "a new revision",
    )
    api.wait_complete("keep", 3)
    wait_for(
        lambda: all(j["metadata"]["labels"].get("daemonjob.io/revision") == second for j in api.jobs("keep")),
        90,
        "history cleanup of the first revision's Jobs",
    )
    kept = recorded(api, "keep", first)
    assert {n: r["message"] for n, r in kept.items()} == {n: f"fact of {n}" for n in names}
    wait_recorded(api, "keep", 3, second)
    kubectl("delete", "node", names[0])
    wait_for(
        lambda: (
            names[0]
            not in {n for j in api.jobs("keep") for n in [j["metadata"]["annotations"].get("daemonjob.io/node")]}
        ),
        60,
        "the deleted node's Job to go",
    )
    assert names[0] in recorded(api, "keep", second) and names[0] in recorded(api, "keep", first)


def test_a_4_kib_message_and_a_failures_log_tail_are_recorded(
    api: Cluster, nodes: Nodes, group: str, controller: Any
) -> None:
    names = nodes(2)
    long = "k" * 5000  # the kubelet would cut it at 4096 bytes; the record keeps at most that
    api.apply(audit("long", group, {names[0]: long, names[1]: long}))
    api.wait_complete("long", 2)
    assert {len(r["message"]) for r in wait_recorded(api, "long", 2).values()} == {4096}

    body = daemonjob("tail", group, OK, backoff_limit=0)
    pod_meta = body["spec"]["jobTemplate"]["spec"]["template"]["metadata"]
    lines = "".join(f"line {i}\n" for i in range(200))
    pod_meta["annotations"] |= {ANNOTATION_EXIT_CODE: "2", ANNOTATION_OUTPUT: lines + "ERROR: disk full"}
    pod_meta["annotations"].pop(ANNOTATION_MESSAGE, None)
    api.apply(body)
    got = wait_recorded(api, "tail", 2)
    assert all(r["state"] == "failed" and r["exitCode"] == 2 for r in got.values())
    assert all(r["message"].rstrip().endswith("ERROR: disk full") and "line 199" in r["message"] for r in got.values())
    assert all("line 0\n" not in r["message"] for r in got.values())  # the tail only
    job = api.jobs("tail")[0]
    assert job["spec"]["template"]["spec"]["containers"][0]["terminationMessagePolicy"] == "FallbackToLogsOnError"


def test_a_sigkilled_controller_loses_no_result_and_records_the_rest(
    api: Cluster, nodes: Nodes, group: str, controller: Any
) -> None:
    names = nodes(10)
    body = audit("crash", group, {n: f"fact of {n}" for n in names}, maxParallel=2)
    body["spec"]["jobTemplate"]["spec"]["template"]["metadata"]["annotations"][ANNOTATION_DURATION] = "1"
    api.apply(body)
    before = wait_for(lambda: got if len(got := recorded(api, "crash")) >= 2 else None, 120, "the first results")
    controller.kill(signal.SIGKILL)
    controller.restart()
    api.wait_complete("crash", 10, timeout=180)
    after = wait_recorded(api, "crash", 10)
    assert set(after) == set(names)
    assert all(after[n] == r for n, r in before.items())  # nothing recorded before was lost or changed


def viewer_kubeconfig(api: Cluster, kubectl: Callable[..., Any], directory: Path) -> Path:
    """A ServiceAccount of the test's namespace bound to daemonjob-view only, as a kubeconfig."""
    kubectl("apply", "-f", str(MANIFESTS / "aggregate-roles.yaml"))
    ns = api.namespace
    kubectl("create", "serviceaccount", "viewer", "-n", ns)
    kubectl(
        "create", "rolebinding", "viewer", "-n", ns, "--clusterrole=daemonjob-view", f"--serviceaccount={ns}:viewer"
    )

    def token() -> str | None:
        for ref in api.kube.get(path_for("v1", "serviceaccounts", ns, "viewer")).get("secrets") or ():
            data = api.kube.get(path_for("v1", "secrets", ns, ref["name"])).get("data") or {}
            if data.get("token"):
                return base64.b64decode(data["token"]).decode()
        return None

    cfg = api.kube.configuration
    path = directory / "viewer.kubeconfig"
    path.write_text(kubeconfig_text(cfg.host, Path(cfg.ssl_ca_cert), wait_for(token, 30, "a token"), "viewer"))
    return path


def plugin(kubeconfig: Path, namespace: str, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [str(Path(sys.executable).parent / "kubectl-daemonjob"), "--kubeconfig", str(kubeconfig), "-n", namespace]
    return subprocess.run([*argv, *args], capture_output=True, text=True, timeout=120, check=False)


def test_results_grouped_by_a_json_field_for_a_user_who_may_only_view(
    api: Cluster,
    nodes: Nodes,
    group: str,
    controller: Any,
    kubectl: Callable[..., Any],
    tmp_path: Path,
    admin_kubeconfig: Path,
) -> None:
    """`results --group-by .kernel` answers which nodes differ, read by a daemonjob-view user
    who may read no pod and no Job, after the pods are gone."""
    names = nodes(5)
    facts = {n: json.dumps({"kernel": "6.1.0-18", "node": n}) for n in names}
    odd = sorted(names)[3]
    facts[odd] = json.dumps({"kernel": "6.1.0-17", "node": odd})
    failing = audit("audit", group, facts)
    annotations = failing["spec"]["jobTemplate"]["spec"]["template"]["metadata"]["annotations"]
    annotations |= {"sim.daemonjob.io/fail-on": sorted(names)[0], ANNOTATION_EXIT_CODE: "4"}
    failing["spec"]["jobTemplate"]["spec"]["backoffLimit"] = 0
    api.apply(failing)
    wait_recorded(api, "audit", 5)
    kubectl("delete", "pods", "-n", api.namespace, "-l", f"{LABEL_NAME}=audit", "--wait=true")
    viewer = viewer_kubeconfig(api, kubectl, tmp_path)
    who = f"--as=system:serviceaccount:{api.namespace}:viewer"
    for verb, resource, allowed in (
        ("list", "daemonjobreports.daemonjob.io", "yes"),
        ("list", "pods", "no"),
        ("list", "jobs.batch", "no"),
    ):
        assert kubectl("auth", "can-i", verb, resource, "-n", api.namespace, who, check=False).stdout.strip() == allowed

    out = plugin(viewer, api.namespace, "results", "audit", "--group-by", ".kernel", "-o", "json")
    assert out.returncode == 3, out.stderr  # a shown node failed
    doc = json.loads(out.stdout)
    groups = [(g["message"], g["count"], sorted(g["nodes"])) for g in doc["groups"]]
    assert groups == [("6.1.0-18", 4, sorted(n for n in names if n != odd)), ("6.1.0-17", 1, [odd])]
    assert len(doc["results"]) == 5

    table = plugin(viewer, api.namespace, "results", "audit", "--group-by", ".kernel")
    lines = table.stdout.splitlines()
    assert lines[0].startswith("5 nodes, 2 outcomes by .kernel") and "6.1.0-17" in lines[-1] and odd in lines[-1]

    failed = plugin(viewer, api.namespace, "results", "audit", "--failed", "-o", "csv")
    rows = list(csv.DictReader(io.StringIO(failed.stdout)))
    assert [(r["node"], r["exitCode"], r["state"]) for r in rows] == [(sorted(names)[0], "4", "failed")]
    one = plugin(viewer, api.namespace, "results", "audit", "--node", odd)
    assert one.returncode == 0 and odd in one.stdout and "6.1.0-17" in one.stdout

    status = plugin(admin_kubeconfig, api.namespace, "status", "audit", "-o", "json")
    rows_by_node = {r["node"]: r for r in json.loads(status.stdout)["nodes"]}
    assert rows_by_node[odd]["pod"] == "" and "6.1.0-17" in rows_by_node[odd]["message"]  # the pod is gone


def test_the_controller_reads_pods_but_never_writes_or_watches_them(
    kubectl: Callable[..., Any], controller: Any
) -> None:
    """Results need get and list; nothing more on pods comes from them. (The webhook's dry run
    of a node Job's pod may `create` pods, dryRun=All only, through daemonjob-webhook-dry-run:
    test/integration/test_manifests.py checks that grant.)"""
    who = "--as=system:serviceaccount:daemonjob-system:daemonjob-controller"
    for verb, allowed in (
        ("list", "yes"),
        ("get", "yes"),
        ("watch", "no"),
        ("delete", "no"),
        ("patch", "no"),
        ("update", "no"),
    ):
        assert kubectl("auth", "can-i", verb, "pods", "-n", "default", who, check=False).stdout.strip() == allowed, verb


def test_results_cross_a_chunk_boundary(
    api: Cluster, nodes: Nodes, group: str, spawn_controller: Callable[..., Any]
) -> None:
    """4 KiB messages on 24 nodes fill more than one report object of 64 KiB
    (--result-chunk-bytes; at the default of 900 KiB that takes some 210 nodes)."""
    spawn_controller(extra_args=["--result-chunk-bytes", str(64 * 1024)])
    names = nodes(24)
    api.apply(audit("wide", group, {n: n + ":" + "x" * (4096 - len(n) - 1) for n in names}))
    api.wait_complete("wide", len(names), timeout=180)
    got = wait_recorded(api, "wide", len(names))
    assert set(got) == set(names) and all(len(r["message"]) == 4096 for r in got.values())
    chunks = reports(api, "wide")
    assert sorted(r["chunk"] for r in chunks) == list(range(len(chunks))) and len(chunks) >= 2
    assert all(len(json.dumps(r["results"])) <= 64 * 1024 for r in chunks)

    def summed() -> dict[str, Any] | None:
        s = api.status("wide").get("results") or {}
        return s if s.get("recorded") == len(names) else None

    status = wait_for(summed, 60, "status.results")
    assert status["outcomes"] == len(names) and len(status["groups"]) == 5 and status["otherNodes"] == len(names) - 5
