"""A node's turn after its Job (nodecheck.py, gates/health.py): the reboot it expects and the
health check, read from the objects alone; the next node waits; verdicts stick."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

from daemonjob.controller.nodework.turnchecks import daemon_set_pods
from daemonjob.controller.runtime.transforms import node_transform
from daemonjob.domain.gates.health import (
    GATE_HEALTH,
    JOB_FAILED,
    JOB_FAILED_BEFORE_REBOOT,
    NODE_NOT_BACK,
    NODE_UNHEALTHY,
    WAITING_FOR_NODE_HEALTH,
)
from daemonjob.domain.jobs.jobbody import build_job
from daemonjob.domain.jobs.jobview import JobView
from daemonjob.domain.jobs.turnverdict import FAILED_CHECK, PASSED, Verdict
from daemonjob.domain.nodework.maintenance import MaintenanceInput
from daemonjob.domain.nodework.nodecheck import DaemonSetPod, HealthInput
from daemonjob.domain.nodework.releasing import JOB_SUCCEEDED
from daemonjob.domain.results.noderesult import result_of
from daemonjob.domain.shared.apinames import ANNOTATION_BOOT_ID, ANNOTATION_NODE_CHECK
from daemonjob.domain.shared.noderecord import ANNOTATION_MAINTENANCE, NodeRecord
from daemonjob.domain.shared.timestamps import format_time
from daemonjob.domain.spec.validate import validate
from daemonjob.machinery.cache.frozen import thaw
from daemonjob.testing.doubles.builders import NS, daemonjob, job, job_template, node, revision_of
from daemonjob.testing.doubles.decisions import Given, decide_over

NOW = datetime(2026, 11, 25, 12, 0, 0, tzinfo=timezone.utc)
T = format_time


def rebooting(**spec: Any) -> dict[str, Any]:
    return daemonjob(maxParallel=1, nodeMaintenance={"reboot": "Expected", "rebootTimeout": "10m"}, **spec)


def booted(name: str, boot: str, ready: str = "True", since: datetime = NOW - timedelta(hours=1)) -> dict[str, Any]:
    n = node(name)
    n["status"] = {
        "conditions": [{"type": "Ready", "status": ready, "lastTransitionTime": T(since)}],
        "nodeInfo": {"bootID": boot},
    }
    return n


def checked_job(
    dj: dict[str, Any],
    name: str,
    boot: str,
    state: str = "active",
    *,
    created: datetime,
    finished: datetime | None = None,
) -> dict[str, Any]:
    j = job(dj, name, state, created=T(created), finished=T(finished) if finished else None)
    j["metadata"]["annotations"][ANNOTATION_BOOT_ID] = boot
    return j


def with_verdict(j: dict[str, Any], verdict: Verdict) -> dict[str, Any]:
    j["metadata"]["annotations"][ANNOTATION_NODE_CHECK] = verdict.text()
    return j


def reconciling(d: Any) -> dict[str, Any]:
    return next(c for c in d.status["conditions"] if c["type"] == "Reconciling")


# -- the spec ------------------------------------------------------------------------------


def test_reboot_needs_restart_policy_never_and_a_known_value() -> None:
    on_failure = job_template(pod_spec={"restartPolicy": "OnFailure"})
    problems = validate(daemonjob(template=on_failure, nodeMaintenance={"reboot": "Expected"})).problems
    assert any("restartPolicy: Never" in p.message for p in problems)
    problems = validate(daemonjob(nodeMaintenance={"reboot": "Sometimes"})).problems
    assert any("reboot: Unsupported value" in p.message for p in problems)
    problems = validate(daemonjob(healthCheck={"daemonSets": ["cilium"], "timeout": "0s"})).problems
    assert {p.message.split(":")[0] for p in problems} == {"spec.healthCheck.timeout", "spec.healthCheck.daemonSets[0]"}
    assert validate(rebooting(healthCheck={"daemonSets": ["kube-system/cilium"]})).problems == []


# -- the Job of a reboot -------------------------------------------------------------------


def test_a_reboot_job_records_the_boot_id_and_never_runs_twice() -> None:
    d = decide_over(Given(rebooting(), [], [booted("a", "boot-1"), booted("b", "boot-1")], NOW))
    assert [c.node for c in d.creates] == ["a"]
    body = d.creates[0].body
    assert body["metadata"]["annotations"][ANNOTATION_BOOT_ID] == "boot-1"
    spec = body["spec"]
    assert spec["backoffLimit"] == 0
    assert spec["podReplacementPolicy"] == "Failed"
    assert spec["podFailurePolicy"]["rules"][0]["action"] == "FailJob"
    keys = {(t["key"], t["effect"]) for t in spec["template"]["spec"]["tolerations"]}
    assert {("node.kubernetes.io/unreachable", "NoExecute"), ("node.kubernetes.io/not-ready", "NoExecute")} <= keys


def test_without_checks_a_job_carries_no_boot_id() -> None:
    d = decide_over(Given(daemonjob(), [], [booted("a", "boot-1")], NOW))
    assert ANNOTATION_BOOT_ID not in d.creates[0].body["metadata"]["annotations"]


# -- the reboot ----------------------------------------------------------------------------


def test_while_the_node_reboots_it_holds_its_slot_whatever_became_of_the_job() -> None:
    dj = rebooting()
    started = NOW - timedelta(minutes=3)
    failed = checked_job(dj, "a", "boot-1", "failed", created=started, finished=NOW - timedelta(minutes=2))
    down = booted("a", "boot-1", ready="Unknown", since=NOW - timedelta(minutes=2))
    down["spec"]["taints"] = [{"key": "node.kubernetes.io/unreachable", "effect": "NoSchedule"}]  # not eligible now
    d = decide_over(Given(dj, [failed], [down, booted("b", "boot-1")], NOW))
    assert d.creates == [] and d.marks == []
    assert d.status["activeNodes"] == 1 and d.status["failedNodes"] == 0
    cond = reconciling(d)
    assert cond["reason"] == WAITING_FOR_NODE_HEALTH and "node a to reboot" in cond["message"]
    assert d.gate == GATE_HEALTH
    assert d.requeue_at == started + timedelta(minutes=10)  # the reboot's timeout


def test_back_with_a_new_boot_id_and_ready_the_turn_passes_and_the_next_node_starts() -> None:
    dj = rebooting()
    failed = checked_job(dj, "a", "boot-1", "failed", created=NOW - timedelta(minutes=3))
    back = booted("a", "boot-2", since=NOW - timedelta(seconds=5))
    d = decide_over(Given(dj, [failed], [back, booted("b", "boot-1")], NOW))
    assert [(m.node, m.verdict.verdict) for m in d.marks] == [("a", PASSED)]
    assert d.creates == []  # the slot frees once the verdict is seen
    passed = with_verdict(failed, Verdict(PASSED))
    d = decide_over(Given(dj, [passed], [back, booted("b", "boot-1")], NOW))
    assert [c.node for c in d.creates] == ["b"] and d.status["succeededNodes"] == 1


def test_ready_again_with_the_same_boot_id_is_not_a_reboot() -> None:
    dj = rebooting()
    ok = checked_job(dj, "a", "boot-1", "succeeded", created=NOW - timedelta(minutes=3))
    d = decide_over(Given(dj, [ok], [booted("a", "boot-1"), booted("b", "boot-1")], NOW))
    assert d.marks == [] and d.creates == []


def test_a_node_not_back_in_time_fails_named_and_the_budget_spends_it() -> None:
    dj = rebooting(maxFailedNodes=0)
    stuck = checked_job(dj, "a", "boot-1", created=NOW - timedelta(minutes=11))
    down = booted("a", "boot-1", ready="Unknown", since=NOW - timedelta(minutes=9))
    down["spec"]["taints"] = [{"key": "node.kubernetes.io/unreachable", "effect": "NoSchedule"}]  # not eligible
    d = decide_over(Given(dj, [stuck], [down, booted("b", "boot-1")], NOW))
    [mark] = d.marks
    assert mark.verdict.verdict == FAILED_CHECK and mark.verdict.reason == NODE_NOT_BACK
    assert "node a did not come back" in mark.verdict.message
    assert mark.event is not None and mark.event.reason == NODE_NOT_BACK
    failed = with_verdict(stuck, mark.verdict)
    d = decide_over(Given(dj, [failed], [down, booted("b", "boot-1")], NOW))
    assert d.creates == [] and d.status["failedNodes"] == 1 and d.status["failedNodeNames"] == ["a"]


def test_a_job_that_failed_with_the_node_never_down_fails_the_turn() -> None:
    dj = rebooting()
    failed = checked_job(
        dj, "a", "boot-1", "failed", created=NOW - timedelta(minutes=3), finished=NOW - timedelta(minutes=2)
    )
    d = decide_over(Given(dj, [failed], [booted("a", "boot-1"), booted("b", "boot-1")], NOW))
    assert [m.verdict.reason for m in d.marks] == [JOB_FAILED_BEFORE_REBOOT]


def test_a_verdict_sticks_when_the_node_goes_not_ready_later() -> None:
    dj = rebooting()
    passed = with_verdict(checked_job(dj, "a", "boot-1", "failed", created=NOW - timedelta(hours=2)), Verdict(PASSED))
    d = decide_over(Given(dj, [passed], [booted("a", "boot-2", ready="False"), booted("b", "boot-1")], NOW))
    assert d.marks == [] and [c.node for c in d.creates] == ["b"]


# -- the health check ----------------------------------------------------------------------

HEALTH = {"timeout": "5m", "settle": "30s", "daemonSets": ["kube-system/cilium"]}


def pod(ready: bool, since: datetime) -> DaemonSetPod:
    return DaemonSetPod("kube-system/cilium", "kube-system/cilium-x", ready, since)


def test_health_waits_for_the_daemonset_pod_then_for_settle_then_passes() -> None:
    dj = daemonjob(maxParallel=1, healthCheck=HEALTH)
    done = checked_job(
        dj, "a", "boot-1", "succeeded", created=NOW - timedelta(minutes=2), finished=NOW - timedelta(minutes=1)
    )
    nodes = [booted("a", "boot-1"), booted("b", "boot-1")]
    unread = decide_over(Given(dj, [done], nodes, NOW))
    assert unread.health_reads == ["a"] and unread.creates == [] and unread.marks == []
    assert "not read yet" in reconciling(unread)["message"]
    not_ready = decide_over(Given(dj, [done], nodes, NOW, health=HealthInput({"a": (pod(False, NOW),)})))
    assert "pod kube-system/cilium-x of DaemonSet kube-system/cilium not Ready" in reconciling(not_ready)["message"]
    assert not_ready.requeue_at == NOW - timedelta(minutes=1) + timedelta(minutes=5)
    settling = decide_over(Given(dj, [done], nodes, NOW, health=HealthInput({"a": (pod(True, NOW),)})))
    assert settling.marks == [] and settling.requeue_at == NOW + timedelta(seconds=30)
    assert "to stay healthy for 30s" in reconciling(settling)["message"]
    later = NOW + timedelta(seconds=30)
    settled = decide_over(Given(dj, [done], nodes, later, health=HealthInput({"a": (pod(True, NOW),)})))
    assert [m.verdict.verdict for m in settled.marks] == [PASSED]


def test_health_not_passing_in_time_fails_the_node_naming_what_was_wrong() -> None:
    dj = daemonjob(maxParallel=1, healthCheck=HEALTH)
    done = checked_job(
        dj, "a", "boot-1", "succeeded", created=NOW - timedelta(minutes=9), finished=NOW - timedelta(minutes=6)
    )
    tainted = booted("a", "boot-1")
    tainted["spec"]["taints"] = [{"key": "node.kubernetes.io/unreachable", "effect": "NoSchedule"}]
    d = decide_over(Given(dj, [done], [tainted], NOW, health=HealthInput({"a": (pod(False, NOW),)})))
    [mark] = d.marks
    assert mark.verdict.reason == NODE_UNHEALTHY
    assert "node a not healthy 5m after its Job" in mark.verdict.message
    assert "tainted node.kubernetes.io/unreachable" in mark.verdict.message
    assert "cilium-x" in mark.verdict.message


def test_a_job_finished_before_the_health_check_was_asked_for_is_not_checked() -> None:
    dj = daemonjob(maxParallel=1, healthCheck=HEALTH)
    old = job(dj, "a", "succeeded", created=T(NOW - timedelta(days=1)))  # no boot ID: not a checked turn
    d = decide_over(Given(dj, [old], [booted("a", "boot-1"), booted("b", "boot-1")], NOW))
    assert d.marks == [] and [c.node for c in d.creates] == ["b"]


# -- with node maintenance -----------------------------------------------------------------


def _held(name: str, dj: dict[str, Any], boot: str, ready: str = "True") -> tuple[dict[str, Any], NodeRecord]:
    meta = dj["metadata"]
    record = NodeRecord(f"{NS}/{meta['name']}", meta["uid"], revision_of(dj), None, True, T(NOW - timedelta(minutes=5)))
    n = booted(name, boot, ready=ready, since=NOW - timedelta(minutes=1))
    n["spec"]["unschedulable"] = True
    n["metadata"]["annotations"] = {ANNOTATION_MAINTENANCE: record.text()}
    return n, record


def test_a_cordoned_node_stays_cordoned_while_it_reboots_and_is_released_once_passed() -> None:
    dj = daemonjob(maxParallel=1, nodeMaintenance={"cordon": True, "reboot": "Expected"})
    failed = checked_job(dj, "a", "boot-1", "failed", created=NOW - timedelta(minutes=3))
    down, record = _held("a", dj, "boot-1", ready="Unknown")
    mi = MaintenanceInput({"a": record}, {}, frozenset({NS}))
    d = decide_over(Given(dj, [failed], [down, booted("b", "boot-1")], NOW, maintenance=mi))
    assert d.node_work is not None and d.node_work.releases == [] and d.node_work.cordons == []
    assert d.creates == []
    back, _ = _held("a", dj, "boot-2")
    passed = with_verdict(failed, Verdict(PASSED))
    d = decide_over(Given(dj, [passed], [back, booted("b", "boot-1")], NOW, maintenance=mi))
    assert [(r.node, r.why) for r in d.node_work.releases] == [("a", JOB_SUCCEEDED)]


def test_a_failed_verdict_keeps_the_node_cordoned_with_keep_failed_cordoned() -> None:
    dj = daemonjob(maxParallel=1, nodeMaintenance={"cordon": True, "reboot": "Expected", "keepFailedCordoned": True})
    stuck = checked_job(dj, "a", "boot-1", created=NOW - timedelta(hours=1))
    down, record = _held("a", dj, "boot-1", ready="Unknown")
    failed = with_verdict(stuck, Verdict(FAILED_CHECK, NODE_NOT_BACK, "node a did not come back"))
    mi = MaintenanceInput({"a": record}, {}, frozenset({NS}))
    d = decide_over(Given(dj, [failed], [down, booted("b", "boot-1")], NOW, maintenance=mi))
    assert d.node_work.releases == [] and d.node_work.status["keptCordonedNodes"] == ["a"]


# -- the cache and the act layer's reads ---------------------------------------------------


def test_the_node_cache_keeps_ready_and_the_boot_id_but_not_heartbeats() -> None:
    def server_node(heartbeat: str) -> dict[str, Any]:
        return {
            "metadata": {"name": "a", "resourceVersion": heartbeat},
            "spec": {},
            "status": {
                "conditions": [
                    {"type": "Ready", "status": "True", "lastHeartbeatTime": heartbeat, "lastTransitionTime": "t0"},
                    {"type": "DiskPressure", "status": "False", "lastHeartbeatTime": heartbeat},
                ],
                "nodeInfo": {"bootID": "boot-1", "kubeletVersion": "v1.20.2"},
                "images": [{"names": ["x"]}],
            },
        }

    assert node_transform(server_node("h1")) == node_transform(server_node("h2"))
    assert thaw(node_transform(server_node("h1"))["status"]) == {
        "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "t0"}],
        "nodeInfo": {"bootID": "boot-1"},
    }


def test_daemon_set_pods_are_told_by_their_controller_reference() -> None:
    def p(name: str, owner: str, kind: str = "DaemonSet", ready: str = "True") -> dict[str, Any]:
        return {
            "metadata": {
                "name": name,
                "namespace": "kube-system",
                "ownerReferences": [{"kind": kind, "name": owner, "controller": True}],
            },
            "status": {"conditions": [{"type": "Ready", "status": ready, "lastTransitionTime": T(NOW)}]},
        }

    found = daemon_set_pods(
        [p("cilium-1", "cilium", ready="False"), p("other-1", "other"), p("rs-1", "cilium", kind="ReplicaSet")],
        (("kube-system", "cilium"),),
    )
    assert found == (DaemonSetPod("kube-system/cilium", "kube-system/cilium-1", False, NOW),)


def test_kubectl_daemonjob_status_shows_a_turns_verdict_not_the_jobs_state() -> None:
    from daemonjob.kubectl.views.nodes import job_row

    dj = rebooting()
    lost = checked_job(dj, "a", "boot-1", "failed", created=NOW - timedelta(minutes=3))
    assert job_row("a", lost, None).state == "active"  # its reboot is awaited
    passed = job_row("a", with_verdict(lost, Verdict(PASSED)), None)
    assert passed.state == "succeeded"
    ok = checked_job(dj, "b", "boot-1", "succeeded", created=NOW - timedelta(minutes=3))
    row = job_row("b", with_verdict(ok, Verdict(FAILED_CHECK, NODE_UNHEALTHY, "node b not healthy")), None)
    assert (row.state, row.reason, row.message) == ("failed", NODE_UNHEALTHY, "node b not healthy")


def test_the_act_layer_writes_verdicts_and_reads_daemonset_pods_only_of_checked_nodes() -> None:
    import structlog

    from daemonjob.controller.nodework.turnchecks import TurnChecks
    from daemonjob.controller.passes.observe import Observation
    from daemonjob.domain.rollout.inputs import ConfigMapsRead
    from daemonjob.testing.doubles.fakes import FakeJobControl
    from daemonjob.testing.doubles.nodefakes import FakeNodeControl

    dj = daemonjob(maxParallel=1, healthCheck=HEALTH)
    done = checked_job(
        dj, "a", "boot-1", "succeeded", created=NOW - timedelta(minutes=2), finished=NOW - timedelta(minutes=1)
    )
    agent = {
        "metadata": {
            "name": "cilium-x",
            "namespace": "kube-system",
            "ownerReferences": [{"kind": "DaemonSet", "name": "cilium", "controller": True}],
        },
        "status": {"conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": T(NOW)}]},
    }
    jobs = FakeJobControl(objects={f"{NS}/{done['metadata']['name']}": done})
    nodes = FakeNodeControl(pods={"a": [agent]})
    checks = TurnChecks(jobs, nodes)
    observed = Observation(f"{NS}/audit", dj, dj, {}, ConfigMapsRead(), None, structlog.get_logger())
    given = [booted("a", "boot-1"), booted("b", "boot-1")]
    first = decide_over(Given(dj, [done], given, NOW, health=checks.input(dj["metadata"]["uid"])))
    acted = checks.carry(observed, first)
    assert first.health_reads == ["a"] and acted.look_again == 0.0  # read now, decided again at once
    kept = checks.input(dj["metadata"]["uid"]).pods
    assert kept == {"a": (DaemonSetPod("kube-system/cilium", "kube-system/cilium-x", True, NOW),)}
    later = NOW + timedelta(seconds=31)
    settled = decide_over(Given(dj, [done], given, later, health=checks.input(dj["metadata"]["uid"])))
    acted = checks.carry(observed, settled)
    assert [c.verb for c in jobs.calls] == ["relabel"] and acted.look_again is None
    written = jobs.objects[f"{NS}/{done['metadata']['name']}"]["metadata"]["annotations"][ANNOTATION_NODE_CHECK]
    assert Verdict.parse(written) == Verdict(PASSED)
    assert checks.input(dj["metadata"]["uid"]).pods == {}  # no longer checked: forgotten


def test_after_reads_a_checked_turn_by_its_verdict() -> None:
    from daemonjob.domain.jobs.turnverdict import turn_succeeded

    dj = rebooting()
    lost = checked_job(dj, "a", "boot-1", "failed", created=NOW)
    assert not turn_succeeded(lost)
    assert turn_succeeded(with_verdict(lost, Verdict(PASSED)))
    done = checked_job(dj, "b", "boot-1", "succeeded", created=NOW)
    assert not turn_succeeded(done)  # its node's health is not known yet
    assert not turn_succeeded(with_verdict(done, Verdict(FAILED_CHECK, NODE_UNHEALTHY)))
    assert turn_succeeded(job(daemonjob(), "c", "succeeded"))


# -- a turn's verdict is what counts (retries, maxFailedNodes, failedNodes, results) ------


def _failed_turn(dj: dict[str, Any], attempt: int, minutes_ago: int) -> dict[str, Any]:
    """Node a's Job of `attempt`: it succeeded, its node never passed the health check."""
    body = build_job(dj, "a", revision_of(dj), attempt=attempt, boot_id="boot-1")
    created, finished = NOW - timedelta(minutes=minutes_ago), NOW - timedelta(minutes=minutes_ago - 1)
    body["metadata"].update(creationTimestamp=T(created), uid=f"uid-{body['metadata']['name']}")
    done = {"type": "Complete", "status": "True", "lastTransitionTime": T(finished)}
    body["status"] = {"startTime": T(created), "completionTime": T(finished), "conditions": [done]}
    unhealthy = Verdict(FAILED_CHECK, NODE_UNHEALTHY, "node a not healthy 5m after its Job: Ready is False")
    return with_verdict(body, unhealthy)


def test_a_failed_health_check_counts_as_a_failure_and_retries_end_at_the_limit() -> None:
    dj = daemonjob(maxParallel=1, maxFailedNodes=0, healthCheck=HEALTH, retry={"limit": 1, "backoff": "10s"})
    nodes = [booted("a", "boot-1"), booted("b", "boot-1")]
    first = decide_over(Given(dj, [_failed_turn(dj, 0, 30)], nodes, NOW))
    assert first.creates == [] and first.status["nodeAttempts"]["nodes"] == [{"node": "a", "attempt": 1}], (
        "one retry left: a's next attempt is recorded (then created), b waits"
    )
    assert first.status["failedNodes"] == 0
    [retrying] = first.status["retryingNodes"]
    assert (retrying["failures"], retrying["retriesLeft"]) == (1, 1)
    both = [_failed_turn(dj, 0, 30), _failed_turn(dj, 1, 20)]
    second = decide_over(Given(dj, both, nodes, NOW))
    assert second.creates == [], "two turns failed with retry.limit 1: no third, and b never starts"
    assert second.status["failedNodes"] == 1 and second.status["failedNodeNames"] == ["a"]
    assert not second.status.get("retryingNodes")
    failed = next(c for c in second.status["conditions"] if c["type"] == "Failed")
    assert failed["status"] == "True"


def test_a_reboot_job_failed_by_its_reboot_that_passed_is_no_failure_for_retries() -> None:
    dj = rebooting(retry={"limit": 1, "backoff": "10s"})
    passed = checked_job(
        dj, "a", "boot-1", "failed", created=NOW - timedelta(minutes=30), finished=NOW - timedelta(minutes=29)
    )
    passed = with_verdict(passed, Verdict(PASSED))
    d = decide_over(Given(dj, [passed], [booted("a", "boot-2"), booted("b", "boot-1")], NOW))
    assert d.status["succeededNodes"] == 1 and d.status["failedNodes"] == 0
    assert [c.node for c in d.creates] == ["b"]


def test_a_checked_jobs_failure_gets_its_verdict_and_a_result_follows_the_verdict() -> None:
    dj = daemonjob(maxParallel=1, healthCheck=HEALTH)
    failed = checked_job(
        dj, "a", "boot-1", "failed", created=NOW - timedelta(minutes=3), finished=NOW - timedelta(minutes=2)
    )
    d = decide_over(Given(dj, [failed], [booted("a", "boot-1"), booted("b", "boot-1")], NOW))
    [mark] = d.marks
    assert (mark.verdict.verdict, mark.verdict.reason) == (FAILED_CHECK, JOB_FAILED)
    assert d.creates == [], "the turn is over once its verdict is written"
    assert result_of(failed, None) is None, "no result before the turn's verdict"
    unhealthy = _failed_turn(dj, 0, 10)
    result = result_of(unhealthy, None)
    assert result is not None and result["state"] == "failed" and result["reason"] == NODE_UNHEALTHY
    assert JobView.of(unhealthy).turn == "failed" and JobView.of(unhealthy).state == "succeeded"


def test_a_checked_job_that_failed_shows_and_records_its_own_failure() -> None:
    from daemonjob.domain.jobs.turnverdict import turn_shown

    dj = daemonjob(maxParallel=1, healthCheck=HEALTH)
    failed = checked_job(dj, "a", "boot-1", "failed", created=NOW - timedelta(minutes=3), finished=NOW)
    failed = with_verdict(failed, Verdict(FAILED_CHECK, JOB_FAILED, "the Job x on node a failed"))
    assert turn_shown(failed, "failed", "Error", "exit 3") == ("failed", "Error", "exit 3")
    result = result_of(failed, None)
    assert result is not None and result["state"] == "failed" and result["reason"] != JOB_FAILED
