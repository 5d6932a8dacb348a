"""`kubectl daemonjob ...` through kubectl itself, against DaemonJobs run by the controller.

One namespace, four nodes (one cordoned) and three DaemonJobs are set up once for the
module: `collect` fails on one node with exit code 3 and a message, `oom` is OOMKilled on
another, `fine` succeeds everywhere. The plugin's answers are compared with the API server's.
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from daemonjob.controller.wiring.controller import Controller
from daemonjob.domain.jobs.contract import job_node, job_state
from daemonjob.domain.shared.apinames import LABEL_NAME
from daemonjob.machinery.client.kube import Kube, path_for
from daemonjob.testing.cluster import LocalCluster
from daemonjob.testing.doubles.builders import daemonjob, job_template
from daemonjob.testing.sim.kubelet import ANNOTATION_DURATION, NodeSpec, SimKubelet
from daemonjob.testing.waiting import wait_for

DJ_API = "daemonjob.io/v1alpha1"


class Env:
    def __init__(self, cluster: LocalCluster, kube: Kube, ns: str, nodes: list[str]) -> None:
        self.cluster, self.kube, self.ns, self.nodes = cluster, kube, ns, nodes
        self.eligible = nodes[:3]
        self.cordoned = nodes[3]
        path = os.pathsep.join([str(Path(sys.executable).parent), str(cluster.bin_dir), os.environ.get("PATH", "")])
        self.environ = {**os.environ, "PATH": path, "KUBECONFIG": str(cluster.kubeconfig)}

    def kubectl(self, *args: str, ns: bool = True, input: str | None = None) -> subprocess.CompletedProcess[str]:
        cut = args.index("--") if "--" in args else len(args)  # after `--` is the container's command
        argv = ["kubectl", *args[:cut], *(["-n", self.ns] if ns else []), *args[cut:]]
        return subprocess.run(argv, env=self.environ, capture_output=True, text=True, timeout=120, input=input)

    def kubectl_tty(self, *args: str, columns: int = 100, timeout: float = 120) -> tuple[int, str]:
        """Run `kubectl ...` with a terminal as stdout and stderr, as a user at a shell would."""
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
        environ = {k: v for k, v in self.environ.items() if k not in ("COLUMNS", "LINES", "NO_COLOR", "TERM")}
        proc = subprocess.Popen(
            ["kubectl", *args, "-n", self.ns],
            env={**environ, "TERM": "xterm-256color"},
            stdin=subprocess.DEVNULL,
            stdout=slave,
            stderr=slave,
            close_fds=True,
        )
        os.close(slave)
        chunks, deadline = [], time.monotonic() + timeout
        try:
            while time.monotonic() < deadline:
                if select.select([master], [], [], 0.2)[0]:
                    try:
                        data = os.read(master, 65536)
                    except OSError:  # EIO: the process closed the terminal
                        break
                    if not data:
                        break
                    chunks.append(data)
                elif proc.poll() is not None:
                    break
            code = proc.wait(timeout=max(deadline - time.monotonic(), 1))
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            os.close(master)
        return code, b"".join(chunks).decode("utf-8", "replace")

    def jobs(self, name: str) -> list[dict[str, Any]]:
        return self.kube.get(path_for("batch/v1", "jobs", self.ns), labelSelector=f"{LABEL_NAME}={name}")["items"]


def simulated(name: str, label: str, annotations: dict[str, str]) -> dict[str, Any]:
    """On the nodes labelled plugin-test=`label`, its pods done at once unless `annotations`
    (the simulated kubelet's) say otherwise."""
    template = job_template(
        pod_annotations={ANNOTATION_DURATION: "0", **annotations}, container={"name": "main", "image": "busybox:1.36"}
    )
    return daemonjob(name, manifest=True, template=template, nodeSelector={"matchLabels": {"plugin-test": label}})


def finished(kube: Kube, ns: str, name: str) -> bool:
    dj = kube.get(path_for(DJ_API, "daemonjobs", ns, name))
    st = dj.get("status") or {}
    return st.get("observedGeneration") == dj["metadata"]["generation"] and any(
        c["type"] in ("Complete", "Failed") and c["status"] == "True" for c in st.get("conditions") or []
    )


@pytest.fixture(scope="module")
def env(cluster: LocalCluster, kube: Kube, kubelet: SimKubelet, installed_crd: None) -> Iterator[Env]:
    ns = f"plugin-{uuid.uuid4().hex[:6]}"
    kube.create(path_for("v1", "namespaces"), {"metadata": {"name": ns}})
    nodes = [f"{ns}-n{i}" for i in range(4)]
    labels = {"plugin-test": ns}
    kubelet.add_nodes([NodeSpec(n, labels=labels, unschedulable=(i == 3)) for i, n in enumerate(nodes)])
    kubelet.wait_ready(nodes, timeout=60)
    ctl = Controller.for_kube(Kube.from_config(str(cluster.kubeconfig)), namespace=ns, workers=2)
    ctl.start_informers()
    assert ctl.wait_synced(30)
    ctl.start_workers()
    e = Env(cluster, kube, ns, nodes)
    try:
        output = "hello from {node}\nsecond line of {node}"
        for body in (
            simulated(
                "collect",
                ns,
                {
                    "sim.daemonjob.io/output": output,
                    "sim.daemonjob.io/fail-on": nodes[0],
                    "sim.daemonjob.io/exit-code": "3",
                    "sim.daemonjob.io/message": "disk full on {node}",
                },
            ),
            simulated("oom", ns, {"sim.daemonjob.io/fail-on": nodes[1], "sim.daemonjob.io/reason": "OOMKilled"}),
            simulated("fine", ns, {"sim.daemonjob.io/output": "ok"}),
        ):
            kube.create(path_for(DJ_API, "daemonjobs", ns), body)
        for name in ("collect", "oom", "fine"):
            wait_for(lambda name=name: finished(kube, ns, name), timeout=60, what=f"{name} finished")
        yield e
    finally:
        ctl.stop()
        kube.delete(path_for("v1", "namespaces", name=ns))
        for n in nodes:
            kubelet.delete_node(n)


def status_json(env: Env, name: str, *extra: str) -> tuple[int, dict[str, Any]]:
    out = env.kubectl("daemonjob", "status", name, "-o", "json", *extra)
    assert out.stdout, out.stderr
    return out.returncode, json.loads(out.stdout)


def test_status_shows_each_node_as_the_api_server_has_it(env: Env) -> None:
    code, doc = status_json(env, "collect")
    assert code == 3, "failed nodes give a non-zero exit"
    rows = {r["node"]: r for r in doc["nodes"]}
    assert set(rows) == set(env.nodes)
    failing, ok = env.eligible[0], env.eligible[1:]
    assert (rows[failing]["state"], rows[failing]["exit_code"], rows[failing]["reason"]) == ("failed", 3, "Error")
    assert rows[failing]["message"] == f"disk full on {failing}"
    for n in ok:
        assert (rows[n]["state"], rows[n]["exit_code"], rows[n]["reason"]) == ("succeeded", 0, "Completed")
    assert rows[env.cordoned]["state"] == "ineligible" and rows[env.cordoned]["reason"] == "cordoned"
    jobs = {job_node(j): j for j in env.jobs("collect")}
    for n in env.eligible:
        assert rows[n]["job"] == jobs[n]["metadata"]["name"]
        assert rows[n]["state"] == job_state(jobs[n])
    assert doc["counts"]["failed"] == 1 and doc["counts"]["succeeded"] == 2 and doc["counts"]["desired"] == 3

    table = env.kubectl("daemonjob", "status", "collect")
    assert table.returncode == 3  # a shown node failed
    lines = table.stdout.splitlines()
    header = next(line for line in lines if line.startswith("NODE"))
    assert header.split() == [
        "NODE",
        "STATE",
        "JOB",
        "ATTEMPT",
        "STARTED",
        "DURATION",
        "EXIT",
        "CODE",
        "REASON",
        "MESSAGE",
    ]
    failed_line = next(line for line in lines if line.startswith(failing))
    assert "failed" in failed_line and " 3 " in failed_line and "Error" in failed_line and "disk full" in failed_line
    assert "1 failed" in table.stdout and "failed:" in table.stdout  # counts and the Failed condition in words

    only_failed = env.kubectl("daemonjob", "status", "collect", "--failed", "-o", "json")
    assert [r["node"] for r in json.loads(only_failed.stdout)["nodes"]] == [failing]
    fine = env.kubectl("daemonjob", "status", "fine", "--node", ok[0])
    assert fine.returncode == 0, fine.stderr
    assert [line.split()[0] for line in fine.stdout.splitlines()[-1:]] == [ok[0]]


def test_status_reports_oomkilled(env: Env) -> None:
    code, doc = status_json(env, "oom")
    assert code == 3
    row = next(r for r in doc["nodes"] if r["node"] == env.eligible[1])
    assert (row["state"], row["exit_code"], row["reason"]) == ("failed", 137, "OOMKilled")


def test_output_formats_agree_with_the_document_and_with_kubectl_get(env: Env) -> None:
    code, doc = status_json(env, "collect")
    failed = [r["node"] for r in doc["nodes"] if r["state"] == "failed"]
    assert failed  # collect fails on one node
    names = env.kubectl("daemonjob", "status", "collect", "--failed", "-o", "name")
    assert (names.returncode, names.stdout) == (3, "".join(f"node/{n}\n" for n in failed)), names.stderr
    columns = env.kubectl(
        "daemonjob", "status", "collect", "-o", "custom-columns=NODE:.node,STATE:.state", "--no-headers"
    )
    assert [line.split() for line in columns.stdout.splitlines()] == [[r["node"], r["state"]] for r in doc["nodes"]]
    template = 'jsonpath={range .nodes[*]}{.node}={.state}{"\\n"}{end}'
    assert env.kubectl("daemonjob", "status", "collect", "-o", template).stdout == "".join(
        f"{r['node']}={r['state']}\n" for r in doc["nodes"]
    )
    # list: -l selects DaemonJobs, and -o name, jsonpath and custom-columns print as kubectl get's own
    path = path_for(DJ_API, "daemonjobs", env.ns, "collect")
    env.kube.patch(path, {"metadata": {"labels": {"output-test": "yes"}}})
    try:
        for fmt in (
            "name",
            'jsonpath={range .items[*]}{.metadata.name}{"\\t"}{.status.failedNodes}{"\\n"}{end}',
            "jsonpath={.items[*].metadata.name}",
            "custom-columns=NAME:.metadata.name,FAILED:.status.failedNodes,NONE:.spec.nothing",
        ):
            ours = env.kubectl("daemonjob", "list", "-l", "output-test=yes", "-o", fmt)
            theirs = env.kubectl("get", "daemonjobs.daemonjob.io", "-l", "output-test=yes", "-o", fmt)
            assert ours.returncode == theirs.returncode == 0, (ours.stderr, theirs.stderr)
            assert ours.stdout == theirs.stdout, fmt
        assert "collect" in ours.stdout and "fine" not in ours.stdout
    finally:
        env.kube.patch(path, {"metadata": {"labels": {"output-test": None}}})


def test_kubectl_logs_reaches_the_simulated_kubelet(env: Env) -> None:
    job = next(j for j in env.jobs("collect") if job_node(j) == env.eligible[1])
    out = env.kubectl("logs", f"job/{job['metadata']['name']}")
    assert out.returncode == 0, out.stderr
    assert out.stdout == f"hello from {env.eligible[1]}\nsecond line of {env.eligible[1]}\n"


def test_logs_prefix_every_line_and_write_a_file_per_node(env: Env, tmp_path: Path) -> None:
    out = env.kubectl("daemonjob", "logs", "collect")
    assert out.returncode == 0, out.stderr
    expected = sorted(f"[{n}] {text} {n}" for n in env.eligible for text in ("hello from", "second line of"))
    assert sorted(out.stdout.splitlines()) == expected

    tail = env.kubectl("daemonjob", "logs", "collect", "--failed", "--tail", "1")
    assert tail.stdout.splitlines() == [f"[{env.eligible[0]}] second line of {env.eligible[0]}"]

    out = env.kubectl("daemonjob", "logs", "collect", "--output-dir", str(tmp_path))
    assert out.returncode == 0, out.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(f"{n}.log" for n in env.eligible)
    for n in env.eligible:
        assert (tmp_path / f"{n}.log").read_text() == f"hello from {n}\nsecond line of {n}\n"


def test_logs_report_a_node_whose_pod_is_gone(env: Env) -> None:
    job = next(j for j in env.jobs("fine") if job_node(j) == env.eligible[2])
    pods = env.kube.get(path_for("v1", "pods", env.ns), labelSelector=f"job-name={job['metadata']['name']}")["items"]
    for pod in pods:
        env.kube.delete(path_for("v1", "pods", env.ns, pod["metadata"]["name"]), {"gracePeriodSeconds": 0})
    wait_for(
        lambda: (
            not env.kube.get(path_for("v1", "pods", env.ns), labelSelector=f"job-name={job['metadata']['name']}")[
                "items"
            ]
        ),
        what="pod gone",
    )
    out = env.kubectl("daemonjob", "logs", "fine")
    assert out.returncode == 0
    assert sorted(out.stdout.splitlines()) == sorted(f"[{n}] ok" for n in env.eligible[:2])
    assert f"{env.eligible[2]}: no log" in out.stderr


def test_wait_exits_zero_on_complete_and_non_zero_on_failed(env: Env) -> None:
    ok = env.kubectl("daemonjob", "wait", "fine", "--timeout", "30s")
    assert ok.returncode == 0, ok.stderr
    assert "successfully rolled out" in ok.stdout and "3/3 nodes done" in ok.stdout
    failed = env.kubectl("daemonjob", "rollout", "status", "collect", "--timeout", "30s")
    assert failed.returncode == 3
    assert "failed" in failed.stderr and env.eligible[0] in failed.stderr


def test_rerun_failed_reruns_exactly_the_failed_nodes(env: Env) -> None:
    before = {job_node(j): j["metadata"]["uid"] for j in env.jobs("collect")}
    names = {j["metadata"]["name"] for j in env.jobs("collect")}
    out = env.kubectl("daemonjob", "rerun", "collect", "--failed", "--yes")
    assert out.returncode == 0, out.stderr
    assert env.eligible[0] in out.stdout and "deleted" in out.stdout

    def rerun_done() -> bool:
        now = {job_node(j): j for j in env.jobs("collect")}
        return (
            set(now) == set(before)
            and now[env.eligible[0]]["metadata"]["uid"] != before[env.eligible[0]]
            and job_state(now[env.eligible[0]]) == "failed"
        )

    wait_for(rerun_done, timeout=60, what="the failed node re-ran")
    after = {job_node(j): j["metadata"]["uid"] for j in env.jobs("collect")}
    assert {n for n in after if after[n] != before[n]} == {env.eligible[0]}
    (again,) = [j for j in env.jobs("collect") if job_node(j) == env.eligible[0]]
    assert again["metadata"]["name"] not in names, "the re-run Job has a name of its own"
    assert again["metadata"]["labels"]["daemonjob.io/attempt"] == "1"


def test_rerun_everything_makes_a_new_revision(env: Env) -> None:
    path = path_for(DJ_API, "daemonjobs", env.ns, "fine")
    revision = env.kube.get(path)["status"]["currentRevision"]
    out = env.kubectl("daemonjob", "rerun", "fine", "--all")  # no terminal to ask on: the scope is said
    assert out.returncode == 0, out.stderr
    dj = env.kube.get(path)
    assert "daemonjob.io/rerun-at" in dj["spec"]["jobTemplate"]["metadata"]["annotations"]
    wait_for(
        lambda: env.kube.get(path).get("status", {}).get("currentRevision") != revision,
        timeout=30,
        what="a new revision",
    )


def test_create_dry_run_yields_a_daemonjob_the_api_server_accepts(env: Env) -> None:
    out = env.kubectl(
        "daemonjob",
        "create",
        "adhoc",
        "--image",
        "busybox:1.36",
        "--node-selector",
        f"plugin-test={env.ns}",
        "--max-parallel",
        "50%",
        "--dry-run=client",
        "-o",
        "yaml",
        "--",
        "sh",
        "-c",
        "uname -a",
    )
    assert out.returncode == 0, out.stderr
    manifest = yaml.safe_load(out.stdout)
    assert manifest["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["command"] == [
        "sh",
        "-c",
        "uname -a",
    ]
    applied = env.kubectl("apply", "-f", "-", input=out.stdout)
    assert applied.returncode == 0, applied.stderr
    stored = env.kube.get(path_for(DJ_API, "daemonjobs", env.ns, "adhoc"))
    assert stored["spec"]["nodeSelector"] == {"matchLabels": {"plugin-test": env.ns}}
    assert stored["spec"]["maxParallel"] == "50%"
    wait_for(lambda: finished(env.kube, env.ns, "adhoc"), timeout=60, what="adhoc finished")


@pytest.mark.parametrize(
    "argv, words, code",
    [
        (["daemonjob", "status", "no-such-dj"], "not found", 1),
        (["daemonjob", "logs", "no-such-dj"], "not found", 1),
        (["daemonjob", "status", "collect", "--node-selector", "a in ("], "unable to parse", 1),
        (
            ["daemonjob", "create", "bad", "--image", "x", "--node-selector", "a in (", "--dry-run=client"],
            "invalid selector",
            2,
        ),
        (["daemonjob", "wait", "fine", "--timeout", "soon"], "invalid duration", 2),  # a usage error
        (["daemonjob", "release", "fine", "--node", "no-such-node"], 'nodes "no-such-node" not found', 1),
        (["daemonjob", "release", "no-such-dj", "--all"], "not found", 1),
    ],
)
def test_bad_input_gives_one_clear_line(env: Env, argv: list[str], words: str, code: int) -> None:
    out = env.kubectl(*argv)
    assert out.returncode == code
    assert len(out.stderr.strip().splitlines()) == 1 and words in out.stderr, out.stderr


def test_release_refuses_a_node_the_daemonjob_does_not_hold_and_writes_nothing(env: Env) -> None:
    out = env.kubectl("daemonjob", "release", "fine", "--node", env.eligible[0], "--dry-run=server")
    assert out.returncode == 1 and out.stderr.strip() == (
        f'error: node "{env.eligible[0]}" is not held by daemonjob "fine": nothing to release'
    ), out.stderr
    out = env.kubectl("daemonjob", "release", "fine", "--all")
    assert out.returncode == 0 and "keeps no node cordoned" in out.stdout, out.stderr
    stored = env.kube.get(path_for(DJ_API, "daemonjobs", env.ns, "fine"))
    assert "daemonjob.io/release" not in (stored["metadata"].get("annotations") or {})


def test_no_cluster_gives_one_clear_line(env: Env, tmp_path: Path) -> None:
    config = tmp_path / "kubeconfig"
    config.write_text(env.cluster.kubeconfig.read_text().replace(env.cluster.server, "https://127.0.0.1:9"))
    out = subprocess.run(
        ["kubectl", "daemonjob", "--kubeconfig", str(config), "status", "collect"],
        env=env.environ,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 1
    assert out.stderr.strip().splitlines() == [
        "error: cannot reach the API server at https://127.0.0.1:9: Connection refused"
    ]


ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def test_status_on_a_terminal_colours_states_in_kubectl_columns(env: Env) -> None:
    code, screen = env.kubectl_tty("daemonjob", "status", "collect", columns=80)
    assert code == 3, screen
    assert "\x1b[1;31mfailed" in screen and "\x1b[32msucceeded" in screen
    lines = ANSI.sub("", screen).replace("\r\n", "\n").splitlines()
    header = next(line for line in lines if line.startswith("NODE"))
    assert header.split() == [
        "NODE",
        "STATE",
        "JOB",
        "ATTEMPT",
        "STARTED",
        "DURATION",
        "EXIT",
        "CODE",
        "REASON",
        "MESSAGE",
    ]
    failing = env.eligible[0]
    row = next(line for line in lines if line.startswith(failing))  # one line per node, never folded at 80 columns
    assert row.split()[1] == "failed" and " 3 " in row and f"disk full on {failing}" in row
    assert {line.split()[0] for line in lines[lines.index(header) + 1 :] if line.strip()} == set(env.nodes)


def test_wait_on_a_terminal_draws_a_progress_bar_to_the_end(env: Env, kube: Kube) -> None:
    body = simulated("slow", env.ns, {"sim.daemonjob.io/duration": "2", "sim.daemonjob.io/output": "x"})
    kube.create(path_for(DJ_API, "daemonjobs", env.ns), body)
    code, screen = env.kubectl_tty("daemonjob", "wait", "slow", "--timeout", "60s", columns=120)
    assert code == 0, screen
    text = ANSI.sub("", screen).replace("\r", "\n")
    frames = [line for line in text.splitlines() if line.strip().startswith("nodes")]
    assert frames, screen
    assert "3/3" in frames[-1] and "0 failed" in frames[-1] and "\u2501" in frames[-1]
    assert 'daemonjob "slow" successfully rolled out' in text

    code, screen = env.kubectl_tty("daemonjob", "rollout", "status", "collect", "--timeout", "30s")
    text = ANSI.sub("", screen)
    assert code == 3 and "1 failed" in text and 'daemonjob "collect" failed' in text


def test_create_with_a_schedule_keeps_it_through_kubectl_apply(env: Env) -> None:
    out = env.kubectl(
        "daemonjob",
        "create",
        "nightly",
        "--image",
        "busybox:1.36",
        "--node-selector",
        f"plugin-test={env.ns}",
        "--schedule",
        "30 3 * * *",
        "--time-zone",
        "Europe/Berlin",
        "--concurrency-policy",
        "Replace",
        "--dry-run=client",
        "-o",
        "yaml",
        "--",
        "true",
    )
    assert out.returncode == 0, out.stderr
    applied = env.kubectl("apply", "-f", "-", input=out.stdout)
    assert applied.returncode == 0, applied.stderr
    stored = env.kube.get(path_for(DJ_API, "daemonjobs", env.ns, "nightly"))["spec"]
    assert (stored["schedule"], stored["timeZone"], stored["concurrencyPolicy"]) == (
        "30 3 * * *",
        "Europe/Berlin",
        "Replace",
    )
    status = env.kubectl("daemonjob", "status", "nightly")
    assert status.returncode == 0, status.stderr
    assert "schedule '30 3 * * *' (Europe/Berlin), last schedule never" in status.stdout
    doc = json.loads(env.kubectl("daemonjob", "status", "nightly", "-o", "json").stdout)
    assert (doc["schedule"], doc["timeZone"], doc["lastScheduleTime"]) == ("30 3 * * *", "Europe/Berlin", None)


def test_completion_executable_names_the_daemonjobs(env: Env) -> None:
    def complete(*words: str) -> list[str]:
        out = subprocess.run(
            ["kubectl_complete-daemonjob", *words], env=env.environ, capture_output=True, text=True, timeout=60
        )
        assert out.returncode == 0, out.stderr
        return out.stdout.splitlines()

    names = sorted(d["metadata"]["name"] for d in env.kube.get(path_for(DJ_API, "daemonjobs", env.ns))["items"])
    assert {"collect", "fine", "oom"} <= set(names)
    assert complete("-n", env.ns, "status", "") == [*names, ":4"]
    assert complete("logs", "-n", env.ns, "co") == [*(n for n in names if n.startswith("co")), ":4"]
    assert complete("-n", env.ns, "run-now", "") == complete("pause", "-n", env.ns, "") == [*names, ":4"]
    assert env.ns in complete("status", "-n", "")
    assert complete("status", "--kubeconfig", "/nonexistent", "") == [":4"]  # no cluster: nothing, quietly


def test_status_with_a_label_selector_counts_only_the_matching_nodes(env: Env) -> None:
    failing = env.eligible[0]
    env.kube.patch(path_for("v1", "nodes", name=failing), {"metadata": {"labels": {"zone": "a"}}})
    try:
        code, doc = status_json(env, "collect", "--node-selector", "zone=a")
        assert code == 3
        assert [r["node"] for r in doc["nodes"]] == [failing]
        counts = doc["counts"]
        assert (counts["desired"], counts["failed"], counts["succeeded"], counts["active"], counts["pending"]) == (
            1,
            1,
            0,
            0,
            0,
        )
        assert doc["nodeSelector"] == "zone=a"
        # -l, the deprecated alias: the same nodes, and a warning on stderr
        table = env.kubectl("daemonjob", "status", "collect", "-l", "zone=a")
        assert "-l/--selector is deprecated" in table.stderr and "--node-selector" in table.stderr
        assert "1 desired, 0 succeeded, 1 failed, 0 active, 0 pending (of the nodes matching zone=a" in table.stdout
        rows = [
            line.split()[0]
            for line in table.stdout.splitlines()[
                table.stdout.splitlines().index(
                    next(line for line in table.stdout.splitlines() if line.startswith("NODE"))
                )
                + 1 :
            ]
            if line.strip()
        ]
        assert rows == [failing]
        # the other nodes, by a selector that excludes the failing one: counts and rows agree again
        code, doc = status_json(env, "collect", "--node-selector", "zone!=a")
        assert code == 0 and failing not in {r["node"] for r in doc["nodes"]}
        c = doc["counts"]
        assert c["desired"] == c["succeeded"] + c["failed"] + c["active"] + c["pending"] + c["terminating"] == 2
        assert c["ineligible"] == 1 and len(doc["nodes"]) == 3  # the cordoned node is listed, not desired
    finally:
        env.kube.patch(path_for("v1", "nodes", name=failing), {"metadata": {"labels": {"zone": None}}})


def test_pause_holds_new_jobs_and_resume_lets_the_rollout_go_on(env: Env, kube: Kube) -> None:
    path = path_for(DJ_API, "daemonjobs", env.ns, "held")
    kube.create(path_for(DJ_API, "daemonjobs", env.ns), simulated("held", env.ns, {"sim.daemonjob.io/output": "x"}))
    wait_for(lambda: finished(kube, env.ns, "held"), timeout=60, what="held finished")
    out = env.kubectl("daemonjob", "pause", "held")
    assert (out.returncode, out.stdout) == (0, "daemonjob.daemonjob.io/held paused\n"), out.stderr
    assert kube.get(path)["spec"]["suspend"] is True
    again = env.kubectl("daemonjob", "pause", "held")
    assert again.returncode == 1 and again.stderr == 'error: daemonjobs.daemonjob.io "held" is already paused\n'

    before = {j["metadata"]["uid"] for j in env.jobs("held")}
    assert env.kubectl("daemonjob", "rerun", "held", "--all").returncode == 0  # a new revision, while paused
    generation = kube.get(path)["metadata"]["generation"]
    wait_for(
        lambda: kube.get(path).get("status", {}).get("observedGeneration") == generation,
        timeout=30,
        what="the controller observed the new revision",
    )
    assert {j["metadata"]["uid"] for j in env.jobs("held")} == before, "a paused DaemonJob started a Job"
    status = env.kubectl("daemonjob", "status", "held")
    assert "suspended: no new node is started" in status.stdout and "3 pending" in status.stdout
    # a run asked for while paused waits for the resume: --wait says so when it gives up
    waited = env.kubectl("daemonjob", "run-now", "held", "--wait", "--timeout", "2s")
    assert waited.returncode == 1, waited.stderr
    assert 'timed out after 2s waiting for the run of daemonjob "held"' in waited.stderr
    assert "paused: the run starts once it is resumed" in waited.stderr

    out = env.kubectl("daemonjob", "resume", "held")
    assert (out.returncode, out.stdout) == (0, "daemonjob.daemonjob.io/held resumed\n"), out.stderr
    assert kube.get(path)["spec"]["suspend"] is False
    done = env.kubectl("daemonjob", "wait", "held", "--timeout", "60s")
    assert done.returncode == 0, done.stderr
    status = kube.get(path)["status"]
    assert status["lastRunNowTrigger"] == kube.get(path)["metadata"]["annotations"]["daemonjob.io/run-now"]
    new = [
        j
        for j in env.jobs("held")
        if j["metadata"]["uid"] not in before
        and j["metadata"]["labels"].get("daemonjob.io/run") == status["currentRun"]
    ]
    assert sorted(job_node(j) for j in new) == sorted(env.eligible)  # the run asked for while paused
    assert env.kubectl("daemonjob", "resume", "held").stderr.endswith('"held" is not paused\n')


def test_run_now_wait_follows_the_run_it_started(env: Env, kube: Kube) -> None:
    out = env.kubectl("daemonjob", "run-now", "fine", "--wait", "--timeout", "60s")
    assert out.returncode == 0, out.stderr
    trigger = kube.get(path_for(DJ_API, "daemonjobs", env.ns, "fine"))["metadata"]["annotations"][
        "daemonjob.io/run-now"
    ]
    assert f"daemonjob.daemonjob.io/fine run requested (daemonjob.io/run-now={trigger})" in out.stdout
    status = kube.get(path_for(DJ_API, "daemonjobs", env.ns, "fine"))["status"]
    assert status["lastRunNowTrigger"] == trigger
    run = status["currentRun"]
    assert f'daemonjob "fine" run {run} succeeded' in out.stdout
    ran = [j for j in env.jobs("fine") if j["metadata"]["labels"].get("daemonjob.io/run") == run]
    assert sorted(job_node(j) for j in ran) == sorted(env.eligible)
    assert all(job_state(j) == "succeeded" for j in ran)

    failed = env.kubectl("daemonjob", "run-now", "collect", "--wait", "--timeout", "60s")
    assert failed.returncode == 3, failed.stderr
    assert 'daemonjob "collect" run now-' in failed.stderr and env.eligible[0] in failed.stderr

    plain = env.kubectl("daemonjob", "run-now", "fine")  # without --wait: the request only
    assert plain.returncode == 0 and plain.stdout.startswith("daemonjob.daemonjob.io/fine run requested")
