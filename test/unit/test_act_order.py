"""Order across DaemonJobs through the controller on fakes: the pass reads the other members'
per-node state from the caches, and a Job event wakes only the DaemonJobs it concerns."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from daemonjob import defaults
from daemonjob.controller.order.index import OrderIndex
from daemonjob.controller.wiring.controller import ReconcileError
from daemonjob.domain.jobs.contract import job_node
from daemonjob.domain.shared.timestamps import format_time
from daemonjob.machinery.cache.frozen import thaw
from daemonjob.testing.doubles.actbed import ActBed
from daemonjob.testing.doubles.builders import daemonjob, node
from daemonjob.testing.doubles.fakes import api_error


def member(name: str, created: str, **spec: Any) -> dict[str, Any]:
    """A DaemonJob of its own uid, created at `created` (the order among members)."""
    return daemonjob(name, uid=f"uid-{name}", created=created, **spec)


def status_of(bed: ActBed, name: str) -> dict[str, Any]:
    return [c for c in bed.control.of("status") if c.name == name][-1].body


def reconciling(bed: ActBed, name: str) -> dict[str, Any]:
    (cond,) = [c for c in status_of(bed, name)["conditions"] if c["type"] == "Reconciling"]
    return cond


def nodes_created_by(bed: ActBed, name: str) -> list[str]:
    return sorted(
        job_node(c.body) or ""
        for c in bed.control.of("create")
        if c.body["metadata"]["labels"].get("daemonjob.io/name") == name
    )


def queued(bed: ActBed) -> set[str]:
    """The keys due once the Job events' delay is over (the fake clock moves past it)."""
    bed.clock.step(defaults.JOB_EVENT_DELAY_MAX + 1)
    bed.settle()
    keys = set()
    while len(bed.ctl.queue):
        key, _ = bed.ctl.queue.get()
        bed.ctl.queue.done(key)
        keys.add(key)
    return keys


def finish(bed: ActBed, node: str, owner: str) -> None:
    for job in bed.control.objects.values():
        if job_node(job) == node and job["metadata"]["labels"].get("daemonjob.io/name") == owner:
            job["status"] = {
                "conditions": [
                    {"type": "Complete", "status": "True", "lastTransitionTime": format_time(bed.clock.wall())}
                ],
                "completionTime": format_time(bed.clock.wall()),
            }
            bed.jobs.update(job)


def test_a_member_waits_on_the_nodes_another_member_runs_on_and_is_woken_when_one_finishes(bed: ActBed) -> None:
    bed.add_nodes(2)
    bed.add_dj(member("first", "2024-03-01T00:00:00Z", exclusionGroup="maint", maxParallel=1))
    bed.add_dj(member("second", "2024-03-02T00:00:00Z", exclusionGroup="maint"))
    bed.add_dj(member("bystander", "2024-03-02T00:00:00Z"))
    bed.ctl.reconcile("ops/first")
    bed.control.deliver()
    assert nodes_created_by(bed, "first") == ["node-00"]
    bed.ctl.reconcile("ops/second")  # node-00 is busy; node-01 is first's turn (older, waiting)
    bed.control.deliver()
    assert nodes_created_by(bed, "second") == []
    cond = reconciling(bed, "second")
    assert cond["reason"] == "WaitingForExclusionGroup" and "DaemonJob first" in cond["message"]
    assert "node-00, node-01" in cond["message"]
    queued(bed)
    finish(bed, "node-00", "first")
    woken = queued(bed)
    assert woken >= {"ops/first", "ops/second"} and "ops/bystander" not in woken
    bed.ctl.reconcile("ops/first")
    bed.control.deliver()
    assert nodes_created_by(bed, "first") == ["node-00", "node-01"]
    bed.ctl.reconcile("ops/second")
    bed.control.deliver()
    assert nodes_created_by(bed, "second") == ["node-00"]  # never both on a node


def test_a_dependency_that_succeeds_on_a_node_wakes_its_dependents_which_start_there(bed: ActBed) -> None:
    bed.add_nodes(2)
    bed.add_dj(member("prepare", "2024-03-01T00:00:00Z"))
    bed.add_dj(member("upgrade", "2024-03-02T00:00:00Z", after=["prepare"]))
    bed.ctl.reconcile("ops/prepare")
    bed.control.deliver()
    bed.key = "ops/prepare"
    bed.sync()  # its status records the revision the dependents compare with
    bed.ctl.reconcile("ops/upgrade")
    assert nodes_created_by(bed, "upgrade") == []
    assert reconciling(bed, "upgrade")["reason"] == "WaitingForDependencies"
    queued(bed)
    finish(bed, "node-01", "prepare")
    assert "ops/upgrade" in queued(bed)
    bed.ctl.reconcile("ops/upgrade")
    assert nodes_created_by(bed, "upgrade") == ["node-01"]


def test_where_a_dependency_succeeded_is_kept_only_while_another_daemonjob_names_it(bed: ActBed) -> None:
    bed.add_nodes(2)
    bed.add_dj(member("prepare", "2024-03-01T00:00:00Z"))
    bed.ctl.reconcile("ops/prepare")
    bed.control.deliver()
    bed.key = "ops/prepare"
    bed.sync()
    finish(bed, "node-00", "prepare")
    succeeded = bed.ctl.order_index.succeeded
    assert succeeded.kept() == set()  # no DaemonJob comes after it: its Job events keep nothing
    upgrade = member("upgrade", "2024-03-02T00:00:00Z", after=["prepare"])
    bed.add_dj(upgrade)
    bed.ctl.reconcile("ops/upgrade")  # its first read builds prepare's set from the Jobs cache
    bed.control.deliver()
    assert nodes_created_by(bed, "upgrade") == ["node-00"] and succeeded.kept() == {"uid-prepare"}
    finish(bed, "node-01", "prepare")  # followed from the Job event
    bed.ctl.reconcile("ops/upgrade")
    assert nodes_created_by(bed, "upgrade") == ["node-00", "node-01"]
    upgrade["metadata"]["generation"] = 2
    del upgrade["spec"]["after"]
    bed.add_dj(upgrade)  # spec.after edited away: no one names prepare, its set goes
    assert succeeded.kept() == set()
    bed.add_dj(member("check", "2024-03-03T00:00:00Z", after=["prepare"]))
    bed.ctl.reconcile("ops/check")  # named again: built again, with all it did meanwhile
    assert nodes_created_by(bed, "check") == ["node-00", "node-01"] and succeeded.kept() == {"uid-prepare"}
    bed.djs.delete("ops/check")
    assert succeeded.kept() == set()


def test_a_missing_dependency_is_stalled_until_it_is_created(bed: ActBed) -> None:
    bed.add_nodes(1)
    bed.add_dj(member("upgrade", "2024-03-02T00:00:00Z", after=["prepare"]))
    bed.ctl.reconcile("ops/upgrade")
    stalled = [c for c in status_of(bed, "upgrade")["conditions"] if c["type"] == "Stalled"][0]
    assert (stalled["status"], stalled["reason"]) == ("True", "DependencyNotFound")
    queued(bed)
    bed.add_dj(member("prepare", "2024-03-03T00:00:00Z"))
    assert "ops/upgrade" in queued(bed)


def test_a_cycle_is_stalled_on_each_of_its_daemonjobs(bed: ActBed) -> None:
    bed.add_nodes(1)
    bed.add_dj(member("a", "2024-03-01T00:00:00Z", after=["b"]))
    bed.add_dj(member("b", "2024-03-01T00:00:00Z", after=["a"]))
    for name in ("a", "b"):
        bed.ctl.reconcile(f"ops/{name}")
        stalled = [c for c in status_of(bed, name)["conditions"] if c["type"] == "Stalled"][0]
        assert stalled["reason"] == "DependencyCycle"
    assert bed.control.of("create") == []


def test_the_order_index_follows_spec_changes() -> None:
    index = OrderIndex()
    index.set("ops/a", daemonjob("a", exclusionGroup="g", after=["p"]))
    index.set("ops/b", daemonjob("b", exclusionGroup="g"))
    index.set("other/c", daemonjob("c", exclusionGroup="g"))
    assert index.peers("ops/a") == ["ops/b"] and index.dependents("ops/p") == ["ops/a"]
    index.set("ops/a", daemonjob("a", exclusionGroup="h"))
    assert index.peers("ops/b") == [] and index.dependents("ops/p") == []
    index.set("ops/a", None)
    assert index.members("ops", "h") == []


def test_an_older_member_that_cannot_start_does_not_hold_the_others_back(bed: ActBed) -> None:
    bed.add_nodes(2)
    bed.add_dj(member("first", "2024-03-01T00:00:00Z", exclusionGroup="maint", suspend=True))
    bed.add_dj(member("second", "2024-03-02T00:00:00Z", exclusionGroup="maint"))
    bed.ctl.reconcile("ops/first")  # suspended: its turns wait, but not for the group
    bed.ctl.reconcile("ops/second")
    assert nodes_created_by(bed, "first") == [] and nodes_created_by(bed, "second") == ["node-00", "node-01"]


def test_an_older_member_goes_first_only_where_its_own_dependencies_succeeded(bed: ActBed) -> None:
    bed.add_nodes(2)
    bed.add_dj(member("prepare", "2024-03-01T00:00:00Z", nodeSelector={"matchLabels": {"none": "x"}}))
    bed.add_dj(member("first", "2024-03-01T00:00:01Z", exclusionGroup="maint", after=["prepare"]))
    bed.add_dj(member("second", "2024-03-02T00:00:00Z", exclusionGroup="maint"))
    bed.ctl.reconcile("ops/prepare")
    bed.key = "ops/prepare"
    bed.sync()
    bed.ctl.reconcile("ops/first")  # waits for prepare everywhere: it holds no node for the group
    bed.ctl.reconcile("ops/second")
    assert nodes_created_by(bed, "second") == ["node-00", "node-01"]


def test_the_younger_member_is_woken_when_the_older_one_starts_what_it_yielded(bed: ActBed) -> None:
    bed.add_nodes(2)
    bed.add_dj(member("first", "2024-03-01T00:00:00Z", exclusionGroup="maint"))
    bed.add_dj(member("second", "2024-03-02T00:00:00Z", exclusionGroup="maint"))
    bed.ctl.reconcile("ops/first")  # creates on both nodes; its plan lists them until its next pass
    bed.control.deliver()
    for name in ("node-00", "node-01"):
        finish(bed, name, "first")
    bed.ctl.reconcile("ops/second")  # first's Jobs are done but its plan still lists the turns
    assert nodes_created_by(bed, "second") == []
    assert reconciling(bed, "second")["reason"] == "WaitingForExclusionGroup"
    queued(bed)
    bed.ctl.reconcile("ops/first")  # its plan catches up: no turn left, so second is woken
    assert "ops/second" in queued(bed)
    bed.ctl.reconcile("ops/second")
    assert nodes_created_by(bed, "second") == ["node-00", "node-01"]


def write_status(bed: ActBed, name: str, **status: Any) -> None:
    """A status-only write of DaemonJob `name` reaches the cache (same generation)."""
    dj = thaw(bed.djs.store.get(f"ops/{name}"))
    dj["status"] = {**(dj.get("status") or {}), **status}
    bed.rv += 1
    dj["metadata"]["resourceVersion"] = str(bed.rv)
    bed.djs.update(dj)


def test_a_status_write_wakes_only_the_daemonjobs_that_read_what_it_changed(bed: ActBed) -> None:
    bed.add_nodes(1)
    bed.add_dj(member("prepare", "2024-03-01T00:00:00Z", exclusionGroup="maint"))
    bed.add_dj(member("peer", "2024-03-02T00:00:00Z", exclusionGroup="maint"))
    bed.add_dj(member("upgrade", "2024-03-02T00:00:00Z", after=["prepare"]))
    bed.add_dj(member("bystander", "2024-03-02T00:00:00Z"))
    write_status(bed, "prepare", currentRevision="prepare-abc", currentRun="r1")
    queued(bed)
    write_status(bed, "prepare", activeNodes=1, desiredNodes=1)  # nothing another DaemonJob reads
    assert queued(bed) == set()
    write_status(bed, "prepare", currentRun="r2")  # what succeeded "in its current run" changed
    assert queued(bed) == {"ops/upgrade"}
    stalled = {"type": "Stalled", "status": "True", "reason": "JobRejected", "message": "rejected"}
    write_status(bed, "prepare", conditions=[stalled])  # it no longer waits for its turns in the group
    assert queued(bed) == {"ops/peer"}
    write_status(
        bed,
        "peer",
        conditions=[
            {"type": "Reconciling", "status": "True", "reason": "WaitingForExclusionGroup", "message": "waiting"}
        ],
    )
    assert queued(bed) == set()  # waiting for the group itself: it still waits for its turns


def test_an_older_member_that_stalls_lets_the_younger_one_start_without_a_resync(bed: ActBed) -> None:
    bed.add_nodes(2)
    bed.add_dj(member("first", "2024-03-01T00:00:00Z", exclusionGroup="maint"))
    bed.add_dj(member("second", "2024-03-02T00:00:00Z", exclusionGroup="maint"))
    bed.control.errors[("create", "*")] = api_error(422, "Invalid", "spec.template: Invalid value")
    with pytest.raises(ReconcileError):  # every create rejected: Stalled, in a status not in the cache yet
        bed.ctl.reconcile("ops/first")
    assert [c["reason"] for c in status_of(bed, "first")["conditions"] if c["type"] == "Stalled"] == ["JobRejected"]
    del bed.control.errors[("create", "*")]
    written = status_of(bed, "first")
    write_status(bed, "first", **{k: v for k, v in written.items() if k != "conditions"})  # its revision
    bed.ctl.reconcile("ops/second")  # reads first as waiting for both nodes, older: it goes first
    assert nodes_created_by(bed, "second") == []
    assert reconciling(bed, "second")["reason"] == "WaitingForExclusionGroup"
    queued(bed)
    write_status(bed, "first", conditions=written["conditions"])  # now that it is Stalled: status only
    assert "ops/second" in queued(bed)
    bed.ctl.reconcile("ops/second")
    assert nodes_created_by(bed, "second") == ["node-00", "node-01"]


def converged_pair(bed: ActBed) -> None:
    """Members a (older) and b of one group, both done on node-00, with nothing left to do."""
    bed.add_nodes(1)
    bed.add_dj(member("a", "2024-03-01T00:00:00Z", exclusionGroup="maint"))
    bed.add_dj(member("b", "2024-03-02T00:00:00Z", exclusionGroup="maint"))
    for name in ("a", "b", "a", "b"):
        bed.ctl.reconcile(f"ops/{name}")
        bed.control.deliver()
        finish(bed, "node-00", name)
    assert nodes_created_by(bed, "a") == nodes_created_by(bed, "b") == ["node-00"]
    bed.nodes.add(node("node-01"))  # a node joins: both are woken; a's kept plan has no turn there yet


def creates_on(bed: ActBed, node_name: str) -> list[str]:
    return sorted(
        c.body["metadata"]["labels"]["daemonjob.io/name"]
        for c in bed.control.of("create")
        if job_node(c.body) == node_name
    )


def test_a_create_not_in_the_cache_yet_holds_the_node_for_the_rest_of_the_group(bed: ActBed) -> None:
    converged_pair(bed)
    bed.ctl.reconcile("ops/b")  # a has no turn on node-01 yet: b creates there
    assert creates_on(bed, "node-01") == ["b"]
    bed.ctl.reconcile("ops/a")  # b's Job is not in the cache, but its claim is
    assert creates_on(bed, "node-01") == ["b"]
    assert reconciling(bed, "a")["reason"] == "WaitingForExclusionGroup"
    bed.control.deliver()  # b's Job shows: the claim ends, the Job holds the node from now on
    assert bed.ctl.claims.held("ops", "maint", "uid-a") == {}
    bed.ctl.reconcile("ops/a")
    assert creates_on(bed, "node-01") == ["b"]
    queued(bed)
    finish(bed, "node-01", "b")
    assert "ops/a" in queued(bed)
    bed.ctl.reconcile("ops/a")
    assert creates_on(bed, "node-01") == ["a", "b"]


def test_two_members_deciding_at_once_never_both_create_on_a_node(bed: ActBed, monkeypatch: pytest.MonkeyPatch) -> None:
    converged_pair(bed)
    both_read = threading.Barrier(2, timeout=10)
    decide = bed.ctl._decide

    def read_then_decide(key: str, inp: Any) -> Any:
        both_read.wait()  # both read the caches before either decides (its plan) or acts (its Jobs)
        return decide(key, inp)

    monkeypatch.setattr(bed.ctl, "_decide", read_then_decide)
    passes = [threading.Thread(target=bed.ctl.reconcile, args=(f"ops/{name}",)) for name in ("a", "b")]
    for t in passes:
        t.start()
    for t in passes:
        t.join(10)
    assert len(creates_on(bed, "node-01")) == 1


def test_a_claim_whose_create_failed_ends_and_wakes_the_rest_of_the_group(bed: ActBed) -> None:
    converged_pair(bed)
    bed.control.errors[("create", "*")] = api_error(500, "InternalError", "etcd timeout")
    queued(bed)
    with pytest.raises(ReconcileError):
        bed.ctl.reconcile("ops/b")
    assert bed.ctl.claims.held("ops", "maint", "uid-a") == {}
    assert "ops/a" in queued(bed)
    del bed.control.errors[("create", "*")]
    bed.ctl.reconcile("ops/a")
    assert creates_on(bed, "node-01") == ["a", "b"]  # b's attempt failed; a's went through


def test_a_node_join_passes_over_those_that_may_start_there_first_and_the_held_ones_soon_after(bed: ActBed) -> None:
    bed.add_nodes(1)
    bed.add_dj(member("first", "2024-03-01T00:00:00Z", exclusionGroup="maint"))
    bed.add_dj(member("second", "2024-03-02T00:00:00Z", exclusionGroup="maint"))
    bed.add_dj(member("prepare", "2024-03-01T00:00:00Z"))
    bed.add_dj(member("upgrade", "2024-03-02T00:00:00Z", after=["prepare"]))
    bed.add_dj(member("bystander", "2024-03-02T00:00:00Z"))
    queued(bed)
    bed.nodes.add(node("node-01"))
    now = set()
    while len(bed.ctl.queue):
        key, _ = bed.ctl.queue.get()
        bed.ctl.queue.done(key)
        now.add(key)
    assert now == {"ops/first", "ops/prepare", "ops/bystander"}
    assert queued(bed) == {"ops/second", "ops/upgrade"}  # their pass counts the node; they wait there


def _taken(bed: ActBed) -> list[str]:
    order = []
    while len(bed.ctl.queue):
        key, _ = bed.ctl.queue.get()
        bed.ctl.queue.done(key)
        order.append(key)
    return order


def test_a_node_that_becomes_eligible_goes_ahead_of_the_queued_work(bed: ActBed) -> None:
    bed.add_nodes(1)
    bed.add_dj(member("elsewhere", "2024-03-01T00:00:00Z", nodeSelector={"matchLabels": {"pool": "other"}}))
    for name in ("joiner", "also"):
        bed.add_dj(member(name, "2024-03-01T00:00:00Z"))
    queued(bed)
    bed.ctl.queue.add("ops/elsewhere")  # say a Job event's pass, queued before the join
    bed.ctl.queue.add("ops/joiner")  # already waiting: moved ahead by the join
    ready = node("node-01")
    bed.nodes.add({**ready, "spec": {"taints": [{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}]}})
    assert _taken(bed) == ["ops/elsewhere", "ops/joiner"]  # not eligible yet: nothing moves
    bed.ctl.queue.add("ops/elsewhere")
    bed.ctl.queue.add("ops/joiner")
    bed.nodes.update(ready)  # its not-ready taint cleared: eligible now
    assert _taken(bed) == ["ops/joiner", "ops/also", "ops/elsewhere"]


def test_a_job_that_stops_wakes_the_next_member_in_line_on_its_node(bed: ActBed) -> None:
    bed.nodes.add(node("node-00", labels={"pool": "a"}))
    bed.nodes.add(node("node-01", labels={"pool": "b"}))
    bed.add_dj(member("first", "2024-03-01T00:00:00Z", exclusionGroup="maint"))
    bed.add_dj(member("second", "2024-03-02T00:00:00Z", exclusionGroup="maint"))
    bed.add_dj(
        member("third", "2024-03-03T00:00:00Z", exclusionGroup="maint", nodeSelector={"matchLabels": {"pool": "b"}})
    )
    bed.ctl.reconcile("ops/first")
    bed.control.deliver()
    for name in ("first", "second", "third"):
        bed.ctl.reconcile(f"ops/{name}")  # second waits on both nodes, third on node-01 only
    assert nodes_created_by(bed, "first") == ["node-00", "node-01"]
    queued(bed)
    finish(bed, "node-00", "first")
    assert queued(bed) == {"ops/first", "ops/second"}  # third has nothing to do with node-00
    finish(bed, "node-01", "first")
    assert queued(bed) == {"ops/first", "ops/second"}  # second, older, goes first there: third yields
    bed.ctl.reconcile("ops/first")  # its plan catches up: done on both nodes
    bed.ctl.reconcile("ops/second")
    bed.control.deliver()
    assert nodes_created_by(bed, "second") == ["node-00", "node-01"]
    queued(bed)
    finish(bed, "node-01", "second")
    assert queued(bed) == {"ops/second", "ops/third"}  # next in line there
    bed.ctl.reconcile("ops/second")  # its plan catches up: no turn left on node-01
    bed.ctl.reconcile("ops/third")
    assert nodes_created_by(bed, "third") == ["node-01"]


def test_a_plan_in_the_making_counts_as_concerned_with_every_node(bed: ActBed) -> None:
    bed.add_nodes(1)
    bed.add_dj(member("a", "2024-03-01T00:00:00Z", exclusionGroup="maint"))
    bed.ctl.reconcile("ops/a")
    plans = bed.ctl.plans
    assert plans.concerned("uid-a", "node-00") and not plans.concerned("uid-a", "node-99")
    plans.kept_plan("uid-a", namespace="ops")  # a pass took its marks and reads the order before it plans: wake it
    assert plans.concerned("uid-a", "node-99")
