"""Pure parts of `kubectl daemonjob`: the node view, durations, manifests, log selection."""

from __future__ import annotations

import argparse
import io
import re
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from daemonjob.domain.shared.apinames import ANNOTATION_NODE, LABEL_NAME, LABEL_REVISION
from daemonjob.kubectl.cli import parse
from daemonjob.kubectl.cluster.client import PluginError
from daemonjob.kubectl.commands.create import build_manifest, parse_selector
from daemonjob.kubectl.commands.logs import requests_for
from daemonjob.kubectl.commands.status import schedule_line
from daemonjob.kubectl.commands.wait import Progress, Rate, _Bar, progress_of
from daemonjob.kubectl.complete import FILTER_DIRS, NO_FILE, NO_SPACE, complete
from daemonjob.kubectl.formats.output import plain_table, print_table, shorten
from daemonjob.kubectl.formats.timefmt import human_duration, parse_duration
from daemonjob.kubectl.views.nodes import build_view
from daemonjob.testing.doubles.builders import daemonjob
from daemonjob.testing.sim.kubelet_logs import select_log

REV = "abc123"


def dj(**spec: Any) -> dict[str, Any]:
    """dj in ns, its status up to date at revision REV."""
    return daemonjob(
        "dj",
        "ns",
        resource_version=None,
        template={"spec": {"template": {"spec": {"containers": [{"name": "c"}]}}}},
        status={"currentRevision": REV, "observedGeneration": 1},
        **spec,
    )


def node(name: str, labels: dict[str, str] | None = None, ready: bool = True, **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": labels or {}},
        "spec": spec,
        "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }


def job(
    node_name: str,
    state: str | None,
    rev: str = REV,
    uid: str | None = None,
    created: str = "2026-01-01T00:00:00Z",
    reason: str = "BackoffLimitExceeded",
) -> dict[str, Any]:
    conds = []
    if state == "succeeded":
        conds = [{"type": "Complete", "status": "True", "lastTransitionTime": "2026-01-01T00:01:05Z"}]
    elif state == "failed":
        conds = [
            {
                "type": "Failed",
                "status": "True",
                "reason": reason,
                "message": "Job failed",
                "lastTransitionTime": "2026-01-01T00:00:30Z",
            }
        ]
    return {
        "metadata": {
            "name": f"dj-{node_name}-{rev}",
            "uid": uid or f"uid-{node_name}-{rev}",
            "creationTimestamp": created,
            "labels": {LABEL_NAME: "dj", LABEL_REVISION: rev},
            "annotations": {ANNOTATION_NODE: node_name},
        },
        "status": {
            "startTime": "2026-01-01T00:00:00Z",
            "conditions": conds,
            **({"completionTime": "2026-01-01T00:01:05Z"} if state == "succeeded" else {}),
        },
    }


def pod(job_uid: str, name: str, created: str = "2026-01-01T00:00:01Z", **terminated: Any) -> dict[str, Any]:
    state = {"terminated": terminated} if terminated else {"running": {}}
    return {
        "metadata": {
            "name": name,
            "creationTimestamp": created,
            "ownerReferences": [{"kind": "Job", "controller": True, "uid": job_uid}],
        },
        "spec": {"containers": [{"name": "c"}]},
        "status": {"containerStatuses": [{"name": "c", "state": state}]},
    }


def test_view_gives_each_node_its_state_exit_code_reason_and_message() -> None:
    nodes = [
        node("a"),
        node("b"),
        node("c"),
        node("d"),
        node("e", unschedulable=True),
        node("f", taints=[{"key": "gpu", "effect": "NoSchedule"}]),
        node("g", ready=False, taints=[{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}]),
    ]
    jobs = [job("a", "succeeded"), job("b", "failed"), job("c", None), job("b", "succeeded", rev="old")]
    pods = [
        pod("uid-a-" + REV, "pa", exitCode=0, reason="Completed"),
        pod("uid-b-" + REV, "pb-old", created="2026-01-01T00:00:01Z", exitCode=1, reason="Error"),
        pod(
            "uid-b-" + REV,
            "pb",
            created="2026-01-01T00:00:09Z",
            exitCode=137,
            reason="OOMKilled",
            message="out of memory\nsecond line",
        ),
        pod("uid-c-" + REV, "pc"),
    ]
    view = build_view(dj(), jobs, pods, nodes)
    rows = {r.node: r for r in view.rows}
    assert (rows["a"].state, rows["a"].exit_code, rows["a"].reason, rows["a"].pod) == (
        "succeeded",
        0,
        "Completed",
        "pa",
    )
    assert rows["a"].finished - rows["a"].started == timedelta(seconds=65)
    # the newest pod of the current revision's Job, not the older attempt nor the old revision
    assert (rows["b"].state, rows["b"].exit_code, rows["b"].reason, rows["b"].pod) == ("failed", 137, "OOMKilled", "pb")
    assert rows["b"].message == "out of memory\nsecond line"
    assert (rows["c"].state, rows["c"].exit_code, rows["c"].pod) == ("active", None, "pc")
    assert rows["d"].state == "pending" and rows["d"].job == ""
    assert (rows["e"].state, rows["e"].reason) == ("ineligible", "cordoned")
    assert (rows["f"].state, rows["f"].reason) == ("ineligible", "tainted")
    assert (rows["g"].state, rows["g"].reason) == ("ineligible", "NotReady")
    assert [r.node for r in view.rows] == sorted(rows)
    assert {k: view.counts[k] for k in ("desired", "succeeded", "failed", "active", "pending", "ineligible")} == {
        "desired": 4,
        "succeeded": 1,
        "failed": 1,
        "active": 1,
        "pending": 1,
        "ineligible": 3,
    }


def test_view_hides_unselected_nodes_unless_asked_and_keeps_jobs_of_gone_nodes() -> None:
    d = dj(nodeSelector={"matchLabels": {"pool": "x"}})
    nodes = [node("in", {"pool": "x"}), node("out"), node("was-in")]
    jobs = [job("in", "succeeded"), job("was-in", "succeeded"), job("deleted", "failed")]
    view = build_view(d, jobs, [], nodes)
    rows = {r.node: r for r in view.rows}
    assert set(rows) == {"in", "was-in", "deleted"} and view.hidden_not_selected == 1
    assert rows["was-in"].state == "succeeded" and rows["was-in"].ineligible == "not selected"
    assert rows["deleted"].state == "failed" and rows["deleted"].ineligible == "node gone"
    assert rows["deleted"].reason == "BackoffLimitExceeded"  # no pod left: the Job's reason
    assert view.counts["desired"] == 1
    everything = build_view(d, jobs, [], nodes, all_nodes=True)
    assert {r.node: r.reason for r in everything.rows}["out"] == "not selected"


def _adds_up(counts: dict[str, int]) -> bool:
    return counts["desired"] == sum(counts[k] for k in ("pending", "active", "succeeded", "failed", "terminating"))


def test_counts_with_a_label_selector_describe_exactly_the_rows() -> None:
    # six nodes, three in zone a; Jobs on all six: a -l zone=a view must not count the others' Jobs
    nodes = [node(f"n{i}", {"zone": "a" if i < 3 else "b"}) for i in range(6)]
    jobs = [job(f"n{i}", "failed" if i in (0, 4) else "succeeded") for i in range(6)]
    selected = [n for n in nodes if n["metadata"]["labels"]["zone"] == "a"]
    view = build_view(dj(), jobs, [], selected, nodes_filtered=True)
    assert [r.node for r in view.rows] == ["n0", "n1", "n2"]
    assert {k: view.counts[k] for k in ("desired", "succeeded", "failed")} == {
        "desired": 3,
        "succeeded": 2,
        "failed": 1,
    }
    assert _adds_up(view.counts)
    # unfiltered, a Job whose Node is missing is a node gone: listed, counted as not eligible
    whole = build_view(dj(), jobs, [], selected)
    assert len(whole.rows) == 6 and whole.counts["desired"] == 3 and whole.counts["ineligible"] == 3
    assert _adds_up(whole.counts)


def test_counts_add_up_when_a_node_turned_ineligible() -> None:
    nodes = [node("a"), node("b", unschedulable=True), node("c", unschedulable=True)]
    jobs = [job("a", "succeeded"), job("b", "succeeded"), job("c", None)]
    view = build_view(dj(), jobs, [], nodes)
    # b finished before it was cordoned: not desired; c still runs: desired and active, holding its slot
    assert {k: view.counts[k] for k in ("desired", "succeeded", "active", "ineligible")} == {
        "desired": 2,
        "succeeded": 1,
        "active": 1,
        "ineligible": 1,
    }
    assert _adds_up(view.counts)


def test_view_prefers_deadline_exceeded_and_filters_by_run() -> None:
    d = dj()
    d["status"]["currentRun"] = "r2"
    j_old = job("a", "succeeded")
    j_old["metadata"]["labels"]["daemonjob.io/run"] = "r1"
    j_new = job("a", "failed", reason="DeadlineExceeded", uid="new", created="2026-01-02T00:00:00Z")
    j_new["metadata"]["labels"]["daemonjob.io/run"] = "r2"
    view = build_view(d, [j_old, j_new], [pod("new", "p", exitCode=137, reason="Error")], [node("a")])
    assert view.run == "r2"
    assert (view.rows[0].state, view.rows[0].reason, view.rows[0].exit_code) == ("failed", "DeadlineExceeded", 137)


@pytest.mark.parametrize(
    "seconds, text",
    [
        (-5, "<invalid>"),
        (0, "0s"),
        (59, "59s"),
        (119, "119s"),
        (125, "2m5s"),
        (600, "10m"),
        (179 * 60, "179m"),
        (3 * 3600 + 300, "3h5m"),
        (10 * 3600, "10h"),
        (50 * 3600, "2d2h"),
        (30 * 86400, "30d"),
        (3 * 365 * 86400, "3y"),
    ],
)
def test_human_duration_matches_kubectl(seconds: float, text: str) -> None:
    assert human_duration(seconds) == text


def test_parse_duration() -> None:
    assert parse_duration("90") == 90 and parse_duration("1h30m") == 5400 and parse_duration("500ms") == 0.5
    for bad in ("", "soon", "5x", "-3"):
        with pytest.raises(ValueError):
            parse_duration(bad)


def test_parse_selector_covers_kubectl_syntax() -> None:
    assert parse_selector("a=b,c==d,e!=f,g in (x, y),h notin (z),i,!j") == {
        "matchLabels": {"a": "b", "c": "d"},
        "matchExpressions": [
            {"key": "e", "operator": "NotIn", "values": ["f"]},
            {"key": "g", "operator": "In", "values": ["x", "y"]},
            {"key": "h", "operator": "NotIn", "values": ["z"]},
            {"key": "i", "operator": "Exists"},
            {"key": "j", "operator": "DoesNotExist"},
        ],
    }
    with pytest.raises(PluginError):
        parse_selector("a in (")


def create_args(*argv: str) -> argparse.Namespace:
    return parse(["create", *argv])


def test_create_builds_a_daemonjob_and_refuses_what_the_controller_would() -> None:
    m = build_manifest(
        create_args(
            "x",
            "--image",
            "img:1",
            "-l",
            "pool=gpu",
            "--max-parallel",
            "10%",
            "--schedule",
            "0 3 * * *",
            "--pod-annotation",
            "a=b",
            "--",
            "echo",
            "hi",
        ),
        "ns",
    )
    assert m["metadata"] == {"name": "x", "namespace": "ns"}
    assert m["spec"]["maxParallel"] == "10%" and m["spec"]["schedule"] == "0 3 * * *"
    assert m["spec"]["nodeSelector"] == {"matchLabels": {"pool": "gpu"}}
    template = m["spec"]["jobTemplate"]["spec"]["template"]
    assert template["metadata"] == {"annotations": {"a": "b"}}
    assert template["spec"] == {
        "restartPolicy": "Never",
        "containers": [{"name": "x", "image": "img:1", "command": ["echo", "hi"]}],
    }
    assert build_manifest(create_args("y", "--image", "i", "--max-parallel", "3"), "ns")["spec"]["maxParallel"] == 3
    for bad in (["--max-parallel", "0"], ["--max-parallel", "101%"], ["-l", "Bad Key=1"], ["--pod-annotation", "x"]):
        with pytest.raises(PluginError):
            build_manifest(create_args("z", "--image", "i", *bad), "ns")


def test_logs_ask_only_nodes_that_ran_and_report_those_without_a_pod() -> None:
    view = build_view(
        dj(),
        [job("a", "succeeded"), job("b", "failed")],
        [pod("uid-a-" + REV, "pa")],
        [node("a"), node("b"), node("c")],
    )
    wanted, missing = requests_for(view.rows, None)
    assert [(r.node, c) for r, c in wanted] == [("a", "c")]
    assert [(m.node, "no pod" in m.error) for m in missing] == [("b", True)]
    _, missing = requests_for(view.rows, "other")
    assert {m.node for m in missing} == {"a", "b"}


def test_wait_verdict_needs_the_current_generation_observed() -> None:
    d = dj()
    d["status"].update(
        desiredNodes=3,
        succeededNodes=2,
        failedNodes=1,
        conditions=[{"type": "Failed", "status": "True", "message": "1 of 3 failed"}],
    )
    assert progress_of(d).verdict == "Failed" and progress_of(d).done == 3
    d["metadata"]["generation"] = 2
    assert progress_of(d).verdict is None


def test_plain_table_and_shorten() -> None:
    assert plain_table(["A", "BB"], [["xyz", "1"], ["q", ""]]) == "A     BB\nxyz   1\nq"
    assert shorten("one\ntwo", 20) == "one..." and shorten("x" * 10, 5) == "xx..." and shorten("", 5) == ""


def test_simulated_kubelet_log_query() -> None:
    p = {
        "metadata": {"annotations": {"sim.daemonjob.io/output": "1 {node}\n2\n3"}},
        "spec": {"nodeName": "n"},
        "status": {"startTime": "2026-01-01T00:00:00Z"},
    }
    assert select_log(p, {}) == "1 n\n2\n3\n"
    assert select_log(p, {"tailLines": ["2"]}) == "2\n3\n"
    assert select_log(p, {"timestamps": ["true"], "tailLines": ["1"]}) == "2026-01-01T00:00:00.000000000Z 3\n"
    now = datetime(2026, 1, 1, 0, 1, tzinfo=timezone.utc)
    assert select_log(p, {"sinceSeconds": ["30"]}, now=now) == ""
    assert select_log(p, {"sinceSeconds": ["120"]}, now=now) == "1 n\n2\n3\n"


def test_simulated_output_on_a_failing_node_tells_the_failure() -> None:
    annotations = {
        "sim.daemonjob.io/output": "configuring {node}\nup to date on {node}",
        "sim.daemonjob.io/failure-output": "configuring {node}\nno lock on {node}",
        "sim.daemonjob.io/fail-on": "bad",
        "sim.daemonjob.io/exit-code": "3",
    }

    def on(node_name: str, **extra: str) -> dict[str, Any]:
        return {
            "metadata": {"annotations": {**annotations, **extra}},
            "spec": {"nodeName": node_name},
            "status": {"startTime": "2026-01-01T00:00:00Z"},
        }

    assert select_log(on("bad"), {}) == "configuring bad\nno lock on bad\n"
    assert select_log(on("good"), {}) == "configuring good\nup to date on good\n"
    # without fail-on, the exit code alone decides
    everywhere = on("any", **{"sim.daemonjob.io/fail-on": ""})
    assert select_log(everywhere, {"tailLines": ["1"]}) == "no lock on any\n"
    assert (
        select_log(
            on("any", **{"sim.daemonjob.io/fail-on": "", "sim.daemonjob.io/exit-code": "0"}), {"tailLines": ["1"]}
        )
        == "up to date on any\n"
    )


ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def test_terminal_table_keeps_kubectl_columns_and_colours_the_state() -> None:
    headers = ["NODE", "STATE", "MESSAGE"]
    rows = [["node-01", "succeeded", ""], ["node-04", "failed", "disk full on node-04, a long message that runs on"]]
    out = io.StringIO()
    print_table(headers, rows, state_column=1, stream=out, force_terminal=True)
    text = out.getvalue()
    assert "\x1b[1mNODE" in text  # a bold header
    assert "\x1b[1;31mfailed" in text and "\x1b[32msucceeded" in text  # each state in its colour
    # once the colours are gone: exactly the plain columns, one line per row however narrow the terminal
    assert ANSI.sub("", text) == plain_table(headers, rows) + "\n"
    piped = io.StringIO()
    print_table(headers, rows, state_column=1, stream=piped)
    assert piped.getvalue() == plain_table(headers, rows) + "\n"


def test_progress_bar_renders_done_of_desired_failed_pace_and_time_left() -> None:
    from rich.console import Console

    out = io.StringIO()
    bar = _Bar(Console(file=out, force_terminal=True, width=120))
    rate = Rate(0.0, 0)
    bar.update(Progress(desired=10, succeeded=5, failed=2, active=3, pending=0, verdict=None, message=""), rate, 7.0)
    bar.stop()
    screen = ANSI.sub("", out.getvalue())
    last = [line for line in screen.replace("\r", "\n").splitlines() if line.strip()][-1]
    assert "nodes" in last and "7/10" in last and "2 failed" in last and "3 active" in last
    assert "1.0 nodes/s" in last and "3s left" in last
    assert "\u2501" in last  # the bar itself


def no_cluster(what: str, connection: argparse.Namespace) -> list[str]:
    raise AssertionError(f"no list call expected, asked for {what}")


def test_completion_offers_commands_flags_and_choices_without_a_cluster() -> None:
    names, directive = complete(["st"], no_cluster)
    assert names == ["status\tShow each node's state, Job, exit code, reason and message"] and directive == NO_FILE
    assert {c.split("\t")[0] for c in complete([""], no_cluster)[0]} == {
        "status",
        "wait",
        "rollout",
        "logs",
        "rerun",
        "pause",
        "resume",
        "run-now",
        "promote",
        "release",
        "create",
        "plan",
        "list",
        "results",
        "version",
    }
    assert complete(["rollout", ""], no_cluster)[0] == ["status\tThe same as `wait`"]
    assert complete(["plan", "-f", ""], no_cluster) == ([], 0)  # a file: the shell's own
    assert complete(["status", "x", "--f"], no_cluster)[0] == ["--failed"]
    every = ["wide", "json", "yaml", "name", "jsonpath=", "custom-columns="]
    assert complete(["status", "x", "-o", ""], no_cluster) == (every, NO_FILE)
    assert complete(["status", "x", "--output=j"], no_cluster)[0] == [f"--output={w}" for w in every]
    assert complete(["status", "x", "-o", "js"], no_cluster) == (["json", "jsonpath="], NO_FILE)
    # a template follows: no space after the word
    assert complete(["status", "x", "-o", "jsonp"], no_cluster) == (["jsonpath="], NO_FILE | NO_SPACE)
    assert complete(["create", "x", "--dry-run", ""], no_cluster)[0] == ["none", "client", "server"]
    assert complete(["create", "x", "--concurrency-policy", "R"], no_cluster)[0] == ["Replace"]
    assert complete(["logs", "x", "--output-dir", ""], no_cluster) == ([], FILTER_DIRS)
    assert complete(["create", "x", "--image", ""], no_cluster) == ([], NO_FILE)
    assert complete(["create", "x", "--", "sh", ""], no_cluster) == ([], 0)  # the shell's own (files)
    assert complete(["status", "x", ""], no_cluster) == ([], NO_FILE)  # NAME given already
    assert complete(["run-now", "x", "--w"], no_cluster)[0] == ["--wait"]
    assert complete(["run-now", "x", "--wait", "--ti"], no_cluster)[0] == ["--timeout"]
    assert complete(["pause", "x", ""], no_cluster) == ([], NO_FILE)


def test_completion_names_daemonjobs_and_namespaces_with_one_lookup_in_the_right_place() -> None:
    asked: list[tuple[str, str | None, bool, str | None]] = []

    def lookup(what: str, c: argparse.Namespace) -> list[str]:
        asked.append((what, c.namespace, c.all_namespaces, c.context))
        return {
            "daemonjobs": ["collect", "fine", "oom"],
            "namespaces": ["ops", "default"],
            "contexts": ["dev", "prod"],
        }[what]

    assert complete(["-n", "ops", "logs", "--failed", "f"], lookup) == (["fine"], NO_FILE)
    assert complete(["rollout", "status", "--context", "dev", "-A", ""], lookup)[0] == ["collect", "fine", "oom"]
    assert complete(["status", "--namespace", "o"], lookup)[0] == ["ops"]
    assert complete(["wait", "--context", "p"], lookup)[0] == ["prod"]
    assert asked == [
        ("daemonjobs", "ops", False, None),
        ("daemonjobs", None, True, "dev"),
        ("namespaces", None, False, None),
        ("contexts", None, False, None),
    ]
    for verb in ("pause", "resume", "run-now", "promote", "release"):  # the new verbs take an existing DaemonJob's name
        assert complete([verb, "c"], lookup) == (["collect"], NO_FILE)
        assert complete(["run-now", "--wait", "-n", "ops", "o"], lookup) == (["oom"], NO_FILE)

    def unreachable(what: str, c: argparse.Namespace) -> list[str]:
        raise ConnectionError("no cluster")

    assert complete(["status", ""], unreachable) == ([], NO_FILE)  # nothing offered, no traceback


def test_create_keeps_schedule_time_zone_and_policy_and_refuses_a_bad_one() -> None:
    m = build_manifest(
        create_args(
            "n",
            "--image",
            "i",
            "--schedule",
            "0 3 * * *",
            "--time-zone",
            "Europe/Berlin",
            "--concurrency-policy",
            "Replace",
        ),
        "ns",
    )
    assert {k: m["spec"][k] for k in ("schedule", "timeZone", "concurrencyPolicy")} == {
        "schedule": "0 3 * * *",
        "timeZone": "Europe/Berlin",
        "concurrencyPolicy": "Replace",
    }
    for bad, words in (
        (["--schedule", "0 3 * *"], "5 fields"),
        (["--schedule", "@daily", "--time-zone", "Mars/Base"], "unknown time zone"),
        (["--time-zone", "UTC"], "need --schedule"),
    ):
        with pytest.raises(PluginError, match=words):
            build_manifest(create_args("n", "--image", "i", *bad), "ns")


def test_status_header_names_schedule_last_and_next() -> None:
    now = datetime(2026, 11, 23, 12, 0, tzinfo=timezone.utc)
    d = dj(schedule="0 3 * * *", timeZone="Europe/Berlin")
    d["status"].update(
        lastScheduleTime="2026-11-23T02:00:00Z",
        nextScheduleTime="2026-11-24T02:00:00Z",
        lastSuccessfulTime="2026-11-23T02:05:00Z",
        currentRun="20261123t020000z",
    )
    assert schedule_line(d, now) == (
        "schedule '0 3 * * *' (Europe/Berlin), last schedule 10h ago, next in 14h, last successful run 9h ago"
    )
    never = dj(schedule="@hourly", suspend=True)
    assert schedule_line(never, now) == "schedule '@hourly' (UTC), last schedule never, next: none while suspended"
    assert schedule_line(dj(), now) is None


class FakeKube:
    """The two calls pause/resume/run-now make: GET the DaemonJob, PATCH it (a merge patch)."""

    def __init__(self, dj: dict[str, Any], conflicts: int = 0) -> None:
        self.dj, self.patches, self.conflicts = dj, [], conflicts

    def get(self, path: str, **params: Any) -> dict[str, Any]:
        assert path.endswith("/daemonjobs/dj")
        return self.dj

    def patch(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        from daemonjob.machinery.client.kube import ApiError

        self.patches.append(body)
        if self.conflicts:
            self.conflicts -= 1
            raise ApiError(409, "Conflict", "the object has been modified")
        return self.dj


def _target(kube: FakeKube) -> Any:
    from daemonjob.kubectl.cluster.client import Target

    return Target(kube, "ns")


def test_pause_and_resume_set_suspend_in_kubectl_words(capsys: pytest.CaptureFixture[str]) -> None:
    from daemonjob.kubectl.commands import suspend

    d = dj()
    d["metadata"]["resourceVersion"] = "7"
    kube = FakeKube(d, conflicts=1)
    assert suspend.pause(parse(["pause", "dj"]), _target(kube)) == 0
    assert capsys.readouterr().out == "daemonjob.daemonjob.io/dj paused\n"
    # the resourceVersion read rides along, so an edit in between conflicts and is read again
    assert kube.patches == [{"metadata": {"resourceVersion": "7"}, "spec": {"suspend": True}}] * 2
    d["spec"]["suspend"] = True
    with pytest.raises(PluginError, match='daemonjobs.daemonjob.io "dj" is already paused'):
        suspend.pause(parse(["pause", "dj"]), _target(kube))
    assert suspend.resume(parse(["resume", "dj"]), _target(kube)) == 0
    assert capsys.readouterr().out == "daemonjob.daemonjob.io/dj resumed\n"
    assert kube.patches[-1]["spec"] == {"suspend": False}
    d["spec"]["suspend"] = False
    with pytest.raises(PluginError, match="is not paused"):
        suspend.resume(parse(["resume", "dj"]), _target(kube))


def test_promote_names_the_current_run_or_revision(capsys: pytest.CaptureFixture[str]) -> None:
    from daemonjob.kubectl.commands import promote

    d = dj()
    d["status"]["currentRevision"] = "abc123"
    kube = FakeKube(d)
    assert promote.run(parse(["promote", "dj"]), _target(kube)) == 0
    assert kube.patches == [{"metadata": {"annotations": {"daemonjob.io/promote": "abc123"}}}]
    assert capsys.readouterr().out == "daemonjob.daemonjob.io/dj promoted (daemonjob.io/promote=abc123)\n"
    d["status"]["currentRun"] = "20261123t020000z"
    promote.run(parse(["promote", "dj"]), _target(kube))
    assert kube.patches[-1]["metadata"]["annotations"] == {"daemonjob.io/promote": "20261123t020000z"}
    d["metadata"]["annotations"] = {"daemonjob.io/promote": "20261123t020000z"}
    promote.run(parse(["promote", "dj"]), _target(kube))
    assert len(kube.patches) == 2 and "already promoted" in capsys.readouterr().out.splitlines()[-1]
    d["status"] = {}
    with pytest.raises(PluginError, match="nothing to promote"):
        promote.run(parse(["promote", "dj"]), _target(kube))


def test_run_now_writes_a_new_trigger_each_time() -> None:
    from daemonjob.kubectl.commands.runnow import run_now_patch, trigger_value

    t = datetime(2026, 11, 25, 8, 0, 5, 123456, tzinfo=timezone.utc)
    assert trigger_value(t, None) == "20261125t080005z"
    assert trigger_value(t, "20261125t080005z") == "20261125t080005123456z"  # that second was used
    assert run_now_patch("v") == {"metadata": {"annotations": {"daemonjob.io/run-now": "v"}}}
    with pytest.raises(PluginError, match="only with --wait"):
        from daemonjob.kubectl.commands import runnow

        runnow.run(parse(["run-now", "dj", "--timeout", "1m"]), _target(FakeKube(dj())))


def test_run_now_wait_follows_only_the_run_it_started() -> None:
    from daemonjob.kubectl.commands.runnow import REPLACED, RunProgress

    judge = RunProgress("t2")
    d = dj()
    d["status"].update(
        desiredNodes=3,
        succeededNodes=3,
        currentRun="old",
        lastRunNowTrigger="t1",
        conditions=[{"type": "Complete", "status": "True", "message": "old run done"}],
    )
    p = judge(d)  # the old run's verdict is not this run's
    assert p.verdict is None and "waiting for the controller" in p.message and judge.run is None
    d["spec"]["suspend"] = True
    assert "paused" in judge(d).message
    d["status"].update(
        currentRun="now-t2-abc",
        lastRunNowTrigger="t2",
        succeededNodes=1,
        activeNodes=2,
        conditions=[{"type": "Complete", "status": "False"}],
    )
    p = judge(d)
    assert (p.verdict, p.succeeded, p.active, judge.run) == (None, 1, 2, "now-t2-abc")
    d["status"].update(
        succeededNodes=3,
        activeNodes=0,
        conditions=[{"type": "Complete", "status": "True", "message": "all 3 succeeded"}],
    )
    assert (judge(d).verdict, judge(d).message) == ("Complete", "all 3 succeeded")
    d["status"]["currentRun"] = "20261125t090000z"  # a tick came before the wait saw the end
    assert judge(d).verdict == REPLACED


def test_create_reports_every_problem_of_the_rule_book_at_once() -> None:
    with pytest.raises(PluginError) as refused:
        build_manifest(create_args("n" * 64, "--image", "i", "--schedule", "0 25 * * *", "-l", "a=b"), "ns")
    message = str(refused.value)
    assert "metadata.name: Invalid value" in message and "; spec.schedule: Invalid value" in message


def test_status_header_names_the_rollout_gate_in_force() -> None:
    from daemonjob.kubectl.commands.status import header_lines

    d = dj()
    message = (
        "0 of 2 eligible nodes succeeded; outside the rollout window: the next window opens at 2026-11-24T21:00:00Z"
    )
    d["status"]["conditions"] = [
        {"type": "Reconciling", "status": "True", "reason": "WaitingForWindow", "message": message}
    ]
    lines = header_lines(d, build_view(d, [], [], [node("a")]))
    assert "rollout gate: window (WaitingForWindow)" in lines and f"rolling out: {message}" in lines
    d["status"]["conditions"][0]["reason"] = "RollingOut"
    assert not [line for line in header_lines(d, build_view(d, [], [], [node("a")])) if "gate" in line]


def test_status_document_names_the_rollout_gate_in_force() -> None:
    from daemonjob.kubectl.commands.status import document

    d = dj()
    message = 'haltOnAlerts: 1 matching alert(s) firing: NodeNotReady{node="n7"}; no new node is started'
    d["status"]["conditions"] = [
        {"type": "Reconciling", "status": "True", "reason": "HaltedByAlerts", "message": message}
    ]
    view = build_view(d, [], [], [node("a")])
    assert document(d, view, view.rows)["rolloutGate"] == {
        "gate": "alerts",
        "reason": "HaltedByAlerts",
        "message": message,
    }
    d["status"]["conditions"][0]["reason"] = "RollingOut"
    assert document(d, view, view.rows)["rolloutGate"] is None


def test_a_nodes_row_is_its_rerun_job_even_within_the_second_its_predecessor_was_made() -> None:
    first = job("n1", "failed")
    again = job("n1", None, uid="uid-again")
    again["metadata"]["labels"]["daemonjob.io/attempt"] = "1"
    again["metadata"]["name"] += "-again"
    for jobs in ([first, again], [again, first]):
        (row,) = build_view(dj(), jobs, [], [node("n1")]).rows
        assert row.job == again["metadata"]["name"]
