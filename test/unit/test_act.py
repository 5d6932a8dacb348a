"""The act layer without a cluster: a Controller on fake informers, a fake JobControl and a fake clock."""

from __future__ import annotations

from typing import Any

import pytest

from daemonjob.controller.passes.report import deferrable
from daemonjob.controller.runtime.jobcontrol import NotLeader
from daemonjob.controller.wiring import onepass
from daemonjob.controller.wiring.controller import ReconcileError
from daemonjob.domain.decision.decide import Decision, decide
from daemonjob.domain.jobs.jobbody import build_job
from daemonjob.domain.rollout.inputs import ApiTroubles, DecisionInput
from daemonjob.domain.shared.apinames import ANNOTATION_NODE, LABEL_NAME
from daemonjob.domain.spec.revision import template_revision
from daemonjob.testing.doubles.actbed import ActBed
from daemonjob.testing.doubles.builders import daemonjob, node, revision_of
from daemonjob.testing.doubles.fakes import api_error

NS = "ops"
KEY = f"{NS}/audit"


def condition(status: dict[str, Any], kind: str) -> dict[str, Any]:
    return next(c for c in status["conditions"] if c["type"] == kind)


def test_creates_one_job_per_node_and_writes_status(bed: ActBed) -> None:
    bed.add_nodes(3)
    bed.add_dj(daemonjob())
    bed.ctl.reconcile(KEY)
    assert sorted(c.name for c in bed.control.of("create")) == sorted(k.split("/")[1] for k in bed.control.objects)
    assert len(bed.control.objects) == 3
    (status,) = bed.statuses()
    assert status["activeNodes"] == 0 and status["pendingNodes"] == 3  # the cache has not shown them yet
    assert bed.events("SuccessfulCreate") and "3 Job(s)" in bed.events("SuccessfulCreate")[0]


def test_slow_start_batches_stop_at_the_first_failure(bed: ActBed) -> None:
    names = bed.add_nodes(10)
    dj = daemonjob()
    bed.add_dj(dj)
    revision = template_revision(dj["spec"]["jobTemplate"])
    failing = build_job(dj, names[2], revision)["metadata"]["name"]  # in the second batch (1, then 2)
    bed.control.errors[("create", failing)] = api_error(500, message="etcd is sad")
    with pytest.raises(ReconcileError, match="etcd is sad"):
        bed.ctl.reconcile(KEY)
    assert len(bed.control.of("create")) == 3  # batch of 1, batch of 2, nothing after the failure
    assert len(bed.control.objects) == 2
    assert bed.events("FailedCreate") == [f"Error creating Job for node {names[2]}: etcd is sad"]
    assert len(bed.statuses()) == 1  # the status is written even when an action failed


def test_a_batch_of_more_creates_than_writers_sends_them_together_each_with_its_own_outcome(bed: ActBed) -> None:
    names = bed.add_nodes(31)  # batches of 1, 2, 4, 8 and 16 on 4 writer threads
    dj = daemonjob()
    bed.add_dj(dj)
    revision = template_revision(dj["spec"]["jobTemplate"])
    failing = build_job(dj, names[29], revision)["metadata"]["name"]  # in the last batch's last group
    bed.control.errors[("create", failing)] = api_error(500, message="etcd is sad")
    groups: list[list[str]] = []
    create_jobs = bed.control.create_jobs

    def record(namespace: str, bodies: Any) -> list[Exception | None]:
        groups.append([b["metadata"]["name"] for b in bodies])
        return create_jobs(namespace, bodies)

    bed.control.create_jobs = record  # type: ignore[method-assign]
    with pytest.raises(ReconcileError, match="etcd is sad"):
        bed.ctl.reconcile(KEY)
    # up to 4 writers, one create each; then two, then four together
    assert sorted(len(g) for g in groups) == [1] * 7 + [2] * 4 + [4] * 4
    assert failing in next(g for g in groups if len(g) == 4 and failing in g)
    assert len(bed.control.objects) == 30  # the failing one's group went on without it
    assert bed.events("FailedCreate") == [f"Error creating Job for node {names[29]}: etcd is sad"]


def test_a_node_whose_job_admission_always_rejects_does_not_starve_the_others(bed: ActBed) -> None:
    names = bed.add_nodes(5)
    dj = daemonjob()
    bed.add_dj(dj)
    refused = build_job(dj, names[0], template_revision(dj["spec"]["jobTemplate"]))["metadata"]["name"]
    bed.control.errors[("create", refused)] = api_error(
        400, message=f'admission webhook "nodes.example.com" denied the request: {names[0]} is drained'
    )
    for _ in range(6):
        try:
            bed.ctl.reconcile(KEY)
        except ReconcileError:
            pass
        bed.control.deliver()
    created = {
        c.body["metadata"]["annotations"]["daemonjob.io/node"]
        for c in bed.control.of("create")
        if c.body["metadata"]["name"] != refused
    }
    assert created == set(names[1:])  # every other node got its Job
    stalled = condition(bed.statuses()[-1], "Stalled")
    assert stalled["status"] == "True" and stalled["reason"] == "JobRejected"
    assert names[0] in stalled["message"] and "drained" in stalled["message"]
    assert all(names[0] in m for m in bed.events("FailedCreate"))
    # the refused node is retried after the others: once admission lets it, the rollout completes
    del bed.control.errors[("create", refused)]
    bed.ctl.reconcile(KEY)
    bed.control.deliver()
    assert {c.body["metadata"]["name"] for c in bed.control.of("create")} >= {refused}
    bed.ctl.reconcile(KEY)
    assert condition(bed.statuses()[-1], "Stalled")["status"] == "False"


def test_expectations_block_a_second_pass_until_the_cache_catches_up(bed: ActBed) -> None:
    bed.add_nodes(2)
    bed.add_dj(daemonjob())
    bed.ctl.reconcile(KEY)
    assert len(bed.control.of("create")) == 2
    bed.control.reset()
    assert bed.ctl.reconcile(KEY) is None  # waits: the two creates are not in the cache
    assert bed.control.calls == []
    bed.control.deliver()
    decision = bed.ctl.reconcile(KEY)
    assert decision is not None and not decision.creates
    assert bed.control.of("create") == []
    assert bed.statuses()[-1]["activeNodes"] == 2


def test_expectations_expire_on_the_clock_when_an_event_is_lost(bed: ActBed) -> None:
    bed.add_nodes(1)
    bed.add_dj(daemonjob())
    bed.ctl.reconcile(KEY)
    bed.control._pending.clear()  # the watch never shows it
    bed.control.reset()
    assert bed.ctl.reconcile(KEY) is None
    bed.clock.step(301)
    assert bed.ctl.reconcile(KEY) is None, "the watch has shown nothing later: it is behind, nothing is lost"
    bed.add_dj(daemonjob("later", uid="later-uid"))
    bed.ctl.reconcile(f"{NS}/later")
    bed.control.deliver()  # the watch shows a create sent after the first was answered
    bed.control.reset()
    bed.clock.step(301)
    bed.ctl.reconcile(KEY)  # the lost event no longer wedges the DaemonJob
    assert bed.control.of("create")  # AlreadyExists then: it is ours, nothing else happens
    assert not bed.events("JobConflict")


def test_a_create_rejected_as_invalid_sets_stalled(bed: ActBed) -> None:
    bed.add_nodes(4)
    bed.add_dj(daemonjob())
    bed.control.errors[("create", "*")] = api_error(422, message='Job.batch "x" is invalid: spec.template: bad')
    with pytest.raises(ReconcileError):
        bed.ctl.reconcile(KEY)
    assert len(bed.control.of("create")) == 1
    stalled = condition(bed.statuses()[-1], "Stalled")
    assert stalled["status"] == "True" and stalled["reason"] == "JobRejected"
    assert "spec.template: bad" in stalled["message"]


def test_stalled_is_keyed_by_uid_so_a_recreated_daemonjob_starts_clean(bed: ActBed) -> None:
    bed.add_nodes(2)
    bed.add_dj(daemonjob())
    bed.control.errors[("create", "*")] = api_error(422, message="rejected")
    with pytest.raises(ReconcileError):
        bed.ctl.reconcile(KEY)
    del bed.control.errors[("create", "*")]
    bed.add_dj(daemonjob(uid="dj-uid-2"))  # deleted and re-created, seen as an update through a relist
    bed.control.reset()
    bed.ctl.reconcile(KEY)
    assert len(bed.control.of("create")) == 2  # no leftover single-probe limit
    assert condition(bed.statuses()[-1], "Stalled")["status"] == "False"


def test_already_exists_for_our_own_job_is_not_a_conflict(bed: ActBed) -> None:
    names = bed.add_nodes(1)
    dj = daemonjob()
    bed.add_dj(dj)
    body = build_job(dj, names[0], template_revision(dj["spec"]["jobTemplate"]))
    body["metadata"]["uid"] = "job-uid"
    bed.control.put_job(body)  # created by an earlier pass; the cache has not shown it
    bed.ctl.reconcile(KEY)
    assert len(bed.control.of("create")) == 1
    assert bed.control.of("adopt") == [] and not bed.events("JobConflict")
    assert condition(bed.statuses()[-1], "Stalled")["status"] == "False"


def test_a_name_taken_by_another_controller_is_reported_and_other_nodes_go_on(bed: ActBed) -> None:
    names = bed.add_nodes(3)
    dj = daemonjob()
    bed.add_dj(dj)
    body = build_job(dj, names[1], template_revision(dj["spec"]["jobTemplate"]))
    body["metadata"].update(
        uid="foreign",
        ownerReferences=[
            {"apiVersion": "batch/v1", "kind": "CronJob", "name": "someone", "uid": "x", "controller": True}
        ],
    )
    bed.control.put_job(body)
    bed.ctl.reconcile(KEY)
    assert len(bed.control.objects) == 3  # the two other nodes got their Jobs
    (message,) = bed.events("JobConflict")
    assert body["metadata"]["name"] in message and "CronJob/someone" in message
    stalled = condition(bed.statuses()[-1], "Stalled")
    assert stalled["reason"] == "JobConflict" and body["metadata"]["name"] in stalled["message"]
    assert bed.control.of("adopt") == []  # never touched


def orphan(dj: dict[str, Any], node_name: str, uid: str = "orphan-uid") -> dict[str, Any]:
    body = build_job(dj, node_name, template_revision(dj["spec"]["jobTemplate"]))
    body["metadata"]["ownerReferences"] = []
    body["metadata"].update(uid=uid, creationTimestamp="2024-01-01T00:00:00Z")
    body["status"] = {"conditions": [{"type": "Complete", "status": "True"}]}
    return body


def test_orphans_with_our_labels_are_adopted_after_a_fresh_read(bed: ActBed) -> None:
    names = bed.add_nodes(2)
    dj = daemonjob()
    bed.add_dj(dj)
    job = orphan(dj, names[0])
    bed.control.put_job(job)
    bed.jobs.add(job)  # the Job informer sees it: labelled, no controller
    bed.ctl.reconcile(KEY)
    (adopt,) = bed.control.of("adopt")
    assert adopt.name == job["metadata"]["name"] and adopt.extra == "orphan-uid"
    assert adopt.body["uid"] == "dj-uid" and adopt.body["controller"] is True
    assert bed.control.of("get_daemonjob")  # the fresh read came first
    assert [c.name for c in bed.control.of("create")] != [job["metadata"]["name"]]
    assert len(bed.control.of("create")) == 1  # only the other node
    assert bed.statuses()[-1]["succeededNodes"] == 1


def test_adoption_keeps_other_owners_and_a_controller_that_got_there_first_wins(bed: ActBed) -> None:
    names = bed.add_nodes(2)
    dj = daemonjob()
    bed.add_dj(dj)
    shared = orphan(dj, names[0], uid="shared-uid")
    shared["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "ConfigMap", "name": "keeper", "uid": "cm"}]
    raced = orphan(dj, names[1], uid="raced-uid")
    bed.control.put_job(shared)
    bed.control.put_job(raced)
    bed.jobs.add(shared)
    bed.jobs.add(raced)  # the cache shows an orphan, but another controller claims it first
    bed.control.objects[f"{NS}/{raced['metadata']['name']}"]["metadata"]["ownerReferences"] = [
        {"apiVersion": "example.io/v1", "kind": "Other", "name": "x", "uid": "other", "controller": True}
    ]
    bed.ctl.reconcile(KEY)
    refs = bed.control.objects[f"{NS}/{shared['metadata']['name']}"]["metadata"]["ownerReferences"]
    assert [(r["kind"], bool(r.get("controller"))) for r in refs] == [("ConfigMap", False), ("DaemonJob", True)]
    refs = bed.control.objects[f"{NS}/{raced['metadata']['name']}"]["metadata"]["ownerReferences"]
    assert [r["uid"] for r in refs] == ["other"]  # refused by the server, never overwritten


def test_orphans_are_not_adopted_by_a_namesake_with_another_uid(bed: ActBed) -> None:
    names = bed.add_nodes(1)
    dj = daemonjob()
    bed.add_dj(dj)
    bed.control.daemonjobs[KEY] = daemonjob(uid="someone-else")  # the fresh read disagrees with the cache
    job = orphan(dj, names[0])
    bed.control.put_job(job)
    bed.jobs.add(job)
    bed.ctl.reconcile(KEY)
    assert bed.control.of("adopt") == []


def test_a_job_of_ours_that_lost_its_name_label_is_claimed_back_and_reported(bed: ActBed) -> None:
    """The Job cache selects on the name label: such a Job leaves it as if deleted. The node's
    next attempt is recorded, then, before it is created, the Job it follows is read: it still
    stands, so it is claimed back instead of the node running twice."""
    names = bed.add_nodes(1)
    dj = daemonjob()
    bed.add_dj(dj)
    bed.ctl.reconcile(KEY)
    bed.control.deliver()
    ((_, job),) = bed.control.objects.items()
    job["status"] = {"conditions": [{"type": "Complete", "status": "True"}]}
    bed.jobs.update(job)  # it finished
    del job["metadata"]["labels"]["daemonjob.io/name"]
    bed.jobs.delete(job)  # gone from the cache, as the label selector no longer matches
    before = len(bed.control.calls)
    bed.ctl.reconcile(KEY)  # records the node's next attempt
    bed.sync()
    bed.ctl.reconcile(KEY)
    assert [c.verb for c in bed.control.calls[before:] if c.verb in ("create", "get_job", "relabel")] == [
        "get_job",
        "relabel",
    ]
    assert job["metadata"]["labels"]["daemonjob.io/name"] == "audit"
    (message,) = bed.events("JobRelabelled")
    assert job["metadata"]["name"] in message and names[0] in message
    bed.control.deliver()  # the relabelled Job is back in the cache
    bed.ctl.reconcile(KEY)
    assert len(bed.control.of("create")) == 1 and len(bed.control.of("relabel")) == 1
    assert condition(bed.statuses()[-1], "Complete")["status"] == "True"


def test_an_orphan_found_through_already_exists_is_adopted(bed: ActBed) -> None:
    names = bed.add_nodes(1)
    dj = daemonjob()
    bed.add_dj(dj)
    bed.control.put_job(orphan(dj, names[0]))  # not in the cache yet
    bed.ctl.reconcile(KEY)
    assert [c.verb for c in bed.control.calls if c.verb in ("create", "get_job", "adopt")] == [
        "create",
        "get_job",
        "adopt",
    ]
    assert not bed.events("JobConflict")


def test_status_is_written_only_when_it_changes_and_carries_the_resource_version(bed: ActBed) -> None:
    bed.add_nodes(1)
    bed.add_dj(daemonjob(resource_version="42"))
    bed.ctl.reconcile(KEY)
    (first,) = bed.control.of("status")
    assert first.extra == "42"
    status = first.body
    bed.control.deliver()
    bed.djs.add({**daemonjob(resource_version="43"), "status": status})
    bed.control.reset()
    bed.ctl.reconcile(KEY)  # the Job now shows as active: a new status
    (second,) = bed.control.of("status")
    bed.djs.add({**daemonjob(resource_version="44"), "status": second.body})
    bed.control.reset()
    bed.ctl.reconcile(KEY)
    assert bed.control.of("status") == []


def test_a_status_conflict_is_raised_for_a_requeue(bed: ActBed) -> None:
    bed.add_nodes(1)
    bed.add_dj(daemonjob())
    bed.control.errors[("status", "audit")] = api_error(409, message="the object has been modified")
    with pytest.raises(Exception, match="modified"):
        bed.ctl.reconcile(KEY)


def test_one_failed_delete_does_not_stop_the_other_actions(bed: ActBed) -> None:
    names = bed.add_nodes(3)
    dj = daemonjob()
    bed.add_dj(dj)
    for n in names:  # Jobs on nodes that are then deleted
        body = build_job(dj, n, template_revision(dj["spec"]["jobTemplate"]))
        body["metadata"].update(uid=f"uid-{n}", creationTimestamp="2024-01-01T00:00:00Z")
        bed.control.put_job(body)
        bed.jobs.add(body)
    bed.nodes.delete(names[0])
    bed.nodes.delete(names[1])
    bed.nodes.add(node("node-new"))
    doomed = [
        j["metadata"]["name"]
        for j in bed.jobs.store.list()
        if j["metadata"]["annotations"][ANNOTATION_NODE] in names[:2]
    ]
    bed.control.errors[("delete", doomed[0])] = api_error(403, message="denied by policy")
    with pytest.raises(ReconcileError, match="denied by policy"):
        bed.ctl.reconcile(KEY)
    assert sorted(c.name for c in bed.control.of("delete")) == sorted(doomed)  # both attempted
    assert len(bed.control.of("create")) == 1  # the new node still got its Job
    (deleted,) = bed.events("SuccessfulDelete")  # counts only what was really deleted
    assert deleted.startswith("Deleted 1 Job(s) (NodeGone): ")
    assert "denied by policy" in bed.events("FailedDelete")[0]
    assert len(bed.statuses()) == 1


def test_a_lost_fence_abandons_the_remaining_creates_and_writes_nothing_more(bed: ActBed) -> None:
    bed.add_nodes(8)
    bed.add_dj(daemonjob())
    allowed = iter([True, True, True])  # three checks pass, then leadership is in doubt
    bed.control.fence = lambda: next(allowed, False)
    with pytest.raises(NotLeader):
        bed.ctl.reconcile(KEY)
    assert len(bed.control.objects) <= 3
    assert bed.control.of("status") == []


def test_a_worker_stops_on_not_leader_without_requeueing(bed: ActBed) -> None:
    bed.add_nodes(2)
    bed.add_dj(daemonjob())
    bed.control.fence = lambda: False
    bed.ctl.start_workers()
    bed.ctl.queue.add(KEY)
    bed.ctl.stop_workers(timeout=2)
    assert bed.control.objects == {}
    assert bed.ctl.queue.num_requeues(KEY) == 0


def test_node_events_enqueue_only_daemonjobs_whose_answer_changed(bed: ActBed) -> None:
    bed.add_dj(daemonjob(nodeSelector={"matchLabels": {"role": "db"}}))
    while len(bed.ctl.queue):
        key, _ = bed.ctl.queue.get()
        bed.ctl.queue.done(key)
    bed.nodes.add(node("web-1"))
    assert len(bed.ctl.queue) == 0
    db = node("db-1")
    db["metadata"]["labels"] = {"role": "db"}
    bed.nodes.add(db)
    assert len(bed.ctl.queue) == 1


def test_an_orphan_event_enqueues_the_daemonjob_it_names(bed: ActBed) -> None:
    dj = daemonjob()
    bed.add_dj(dj)
    key, _ = bed.ctl.queue.get()
    bed.ctl.queue.done(key)
    job = orphan(dj, "node-00")
    assert job["metadata"]["labels"][LABEL_NAME] == "audit"
    bed.jobs.add(job)
    assert len(bed.ctl.queue) == 1


def test_a_conflict_clears_once_the_foreign_job_is_gone(bed: ActBed) -> None:
    names = bed.add_nodes(2)
    dj = daemonjob()
    bed.add_dj(dj)
    body = build_job(dj, names[0], template_revision(dj["spec"]["jobTemplate"]))
    body["metadata"].update(
        uid="foreign",
        ownerReferences=[{"apiVersion": "v1", "kind": "ConfigMap", "name": "holder", "uid": "x", "controller": True}],
    )
    bed.control.put_job(body)
    bed.ctl.reconcile(KEY)
    assert condition(bed.statuses()[-1], "Stalled")["reason"] == "JobConflict"
    bed.control.deliver()
    del bed.control.objects[f"{NS}/{body['metadata']['name']}"]  # the user removed the clashing Job
    bed.djs.add({**daemonjob(resource_version="11"), "status": bed.statuses()[-1]})
    bed.control.reset()
    bed.ctl.reconcile(KEY)  # the re-check finds the name free: the node gets its Job
    assert [c.name for c in bed.control.of("create")] == [body["metadata"]["name"]]
    assert bed.statuses() == []  # the status is the next pass's, once the cache shows the Job
    bed.sync()
    bed.ctl.reconcile(KEY)
    assert condition(bed.statuses()[-1], "Stalled")["status"] == "False"


def test_the_node_memo_holds_every_rule_set_in_use(bed: ActBed) -> None:
    """With more distinct node rules than the default memo size, each pass would clear every node's memo."""
    names = bed.add_nodes(3)
    for i in range(40):
        dj = daemonjob(uid=f"uid-{i}", nodeSelector={"matchLabels": {"pool": f"p{i}"}})
        dj["metadata"]["name"] = f"audit-{i}"
        bed.add_dj(dj)
    assert bed.ctl.memo.capacity >= 40
    node = bed.nodes.store.get(names[0])
    for i in range(40):
        bed.ctl.reconcile(f"{NS}/audit-{i}")
    assert len(node._memo) == 40  # every rule set's answer is still kept on the node


def test_the_self_check_finds_a_missed_event_counts_it_and_repairs_the_plan(bed: ActBed) -> None:
    names = bed.add_nodes(2)
    bed.add_dj(daemonjob())
    bed.ctl.reconcile(KEY)
    bed.control.deliver()
    bed.ctl.reconcile(KEY)  # settled: both Jobs active, the kept plan loaded
    job = bed.control.objects[next(k for k in bed.control.objects if names[0] in k)]
    job["status"] = {"conditions": [{"type": "Complete", "status": "True"}]}
    bed.jobs.store.update(job)  # in the cache, but no event reached the kept plan
    bed.clock.step(2 * 300 + 1)  # past the (spread) first check
    bed.drain()
    bed.control.reset()
    decision = bed.ctl.reconcile(KEY)
    assert decision is not None and decision.status["succeededNodes"] == 1  # the full decision's answer
    assert not bed.control.of("create") and not bed.control.of("delete")  # compared, not acted on
    value = bed.ctl.metrics.registry.get_sample_value
    assert value("daemonjob_plan_self_check_differences_total") == 1
    assert len(bed.ctl.queue) == 1  # passed over again on the repaired plan
    bed.drain()
    assert bed.ctl.reconcile(KEY).status["succeededNodes"] == 1
    bed.clock.step(301)
    bed.ctl.reconcile(KEY)
    assert value("daemonjob_plan_self_checks_total") == 2 and value("daemonjob_plan_self_check_differences_total") == 1


def test_the_self_check_waits_while_urgent_passes_are_queued(bed: ActBed) -> None:
    """A full plan holds the GIL: a node waiting for its first Jobs (an urgent key) goes first."""
    bed.add_nodes(2)
    bed.add_dj(daemonjob())
    bed.ctl.reconcile(KEY)
    bed.control.deliver()
    bed.ctl.reconcile(KEY)
    bed.clock.step(2 * 300 + 1)  # past the (spread) first check
    bed.drain()
    value = bed.ctl.metrics.registry.get_sample_value
    bed.ctl.queue.add(f"{NS}/another", urgent=True)
    bed.ctl.reconcile(KEY)
    assert value("daemonjob_plan_self_checks_total") == 0  # not due yet as far as the next pass knows
    bed.drain()
    bed.ctl.reconcile(KEY)
    assert value("daemonjob_plan_self_checks_total") == 1


def test_a_job_changing_between_the_self_checks_two_reads_is_no_difference(bed: ActBed) -> None:
    """Under churn the full plan may read a Job event the kept plan gets at its next pass."""
    names = bed.add_nodes(2)
    bed.add_dj(daemonjob())
    bed.ctl.reconcile(KEY)
    bed.control.deliver()
    bed.ctl.reconcile(KEY)
    bed.clock.step(2 * 300 + 1)
    bed.drain()
    full_plan = bed.ctl.observer.full_plan

    def job_succeeds_meanwhile(seen: Any) -> Any:
        job = bed.control.objects[next(k for k in bed.control.objects if names[0] in k)]
        job["status"] = {"conditions": [{"type": "Complete", "status": "True"}]}
        bed.jobs.update(job)  # the store, then the handlers: the kept plan is marked
        return full_plan(seen)

    bed.ctl.observer.full_plan = job_succeeds_meanwhile
    decision = bed.ctl.reconcile(KEY)
    value = bed.ctl.metrics.registry.get_sample_value
    assert value("daemonjob_plan_self_check_differences_total") == 0
    assert decision is not None and decision.status["succeededNodes"] == 0  # the kept plan's, as read
    bed.ctl.observer.full_plan = full_plan
    bed.drain()
    assert bed.ctl.reconcile(KEY).status["succeededNodes"] == 1
    assert value("daemonjob_plan_self_checks_total") == 2  # checked again at once, and agreed
    assert value("daemonjob_plan_self_check_differences_total") == 0


def test_a_pass_decides_once_and_its_status_says_what_act_heard(bed: ActBed, monkeypatch: pytest.MonkeyPatch) -> None:
    inputs: list[DecisionInput] = []

    def counted(inp: DecisionInput) -> Decision:
        inputs.append(inp)
        return decide(inp)

    monkeypatch.setattr(onepass, "decide", counted)
    names = bed.add_nodes(2)
    dj = daemonjob()
    bed.add_dj(dj)
    refused = build_job(dj, names[0], revision_of(dj))["metadata"]["name"]
    bed.control.errors[("create", refused)] = api_error(400, message="denied by policy")
    with pytest.raises(ReconcileError):
        bed.ctl.reconcile(bed.key)
    assert len(inputs) == 1 and inputs[0].troubles == ApiTroubles()  # decided before act heard anything
    stalled = condition(bed.last_status(), "Stalled")  # ...and the status written says what it heard
    assert (
        stalled["status"] == "True" and stalled["reason"] == "JobRejected" and "denied by policy" in stalled["message"]
    )


# -- one status write per wave of creates --------------------------------------------------
def _complete_on(bed: ActBed, count: int) -> None:
    """The bed's DaemonJob Complete on `count` nodes, its status as the cache shows it."""
    bed.add_nodes(count)
    bed.add_dj(daemonjob())
    bed.ctl.reconcile(KEY)
    bed.sync()
    bed.finish_jobs()
    bed.ctl.reconcile(KEY)
    bed.sync()
    assert condition(bed.dj()["status"], "Complete")["status"] == "True"
    bed.control.reset()


def test_a_joining_nodes_create_leaves_the_status_to_the_pass_that_sees_the_job(bed: ActBed) -> None:
    _complete_on(bed, 2)
    bed.nodes.add(node("joined"))
    bed.ctl.reconcile(KEY)
    assert bed.created_names() and bed.statuses() == []  # counts only, stale once the Job exists: not written
    bed.sync()
    bed.finish_jobs()  # the Job succeeded before its DaemonJob's next pass
    bed.ctl.reconcile(KEY)
    (status,) = bed.statuses()
    assert (status["desiredNodes"], status["succeededNodes"]) == (3, 3)
    assert condition(status, "Complete")["status"] == "True"
    assert bed.events("Completed") == []  # it never stopped being Complete


def test_a_create_pass_writes_the_status_when_it_records_more_than_counts(bed: ActBed) -> None:
    bed.add_nodes(2)
    bed.add_dj(daemonjob())
    bed.ctl.reconcile(KEY)  # the first pass records the revision with its creates
    assert len(bed.statuses()) == 1 and bed.statuses()[0]["currentRevision"]
    bed.sync()
    bed.finish_jobs()
    bed.ctl.reconcile(KEY)
    bed.sync()
    bed.control.reset()
    dj = bed.dj()
    dj["spec"]["maxParallel"] = 5
    dj["metadata"]["generation"] = 2
    bed.djs.update(dj)
    bed.nodes.add(node("joined"))
    bed.ctl.reconcile(KEY)  # a new generation is recorded by the pass that read it
    assert bed.created_names()
    (status,) = bed.statuses()
    assert status["observedGeneration"] == 2


def test_a_failed_create_writes_the_status_at_once(bed: ActBed) -> None:
    _complete_on(bed, 1)
    dj = bed.dj()
    bed.nodes.add(node("joined"))
    failing = build_job(dj, "joined", template_revision(dj["spec"]["jobTemplate"]))["metadata"]["name"]
    bed.control.errors[("create", failing)] = api_error(500, message="etcd is sad")
    with pytest.raises(ReconcileError):
        bed.ctl.reconcile(KEY)
    (status,) = bed.statuses()
    assert status["pendingNodes"] == 1


@pytest.mark.parametrize(
    "field,deferred",
    [
        ("pendingNodes", True),
        ("conditions", True),
        ("completionTime", True),
        ("currentRevision", False),
        ("currentRun", False),
        ("observedGeneration", False),
        ("nodeMaintenance", False),
    ],
)
def test_what_a_create_pass_may_leave_to_the_next(field: str, deferred: bool) -> None:
    old = {"currentRevision": "a", "observedGeneration": 1, "pendingNodes": 0}
    assert deferrable(old, {**old, field: "changed"}) is deferred
    assert deferrable(old, dict(old))
