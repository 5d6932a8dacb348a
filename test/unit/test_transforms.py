import copy

from daemonjob.controller.runtime.transforms import CachedNode, Interner, job_transform, node_transform
from daemonjob.domain.jobs.contract import job_finish_time, job_node, job_revision, job_state, job_ttl
from daemonjob.domain.jobs.jobbody import build_job
from daemonjob.machinery.cache.frozen import freeze, thaw
from daemonjob.testing.doubles.builders import daemonjob, job_template

DJ = daemonjob(resource_version=None, template=job_template(labels={"team": "sre"}, backoff_limit=None))


def server_job(node: str, finished: str | None = None) -> dict:
    """A Job as the API server returns it: defaults, progress counts, every condition."""
    job = build_job(DJ, node, "rev1")
    job["metadata"].update(
        uid=f"uid-{node}",
        resourceVersion="42",
        creationTimestamp="2026-11-02T10:00:00Z",
        generation=1,
        managedFields=[{"manager": "daemonjob-controller"}],
    )
    job["status"] = {"startTime": "2026-11-02T10:00:00Z", "active": 1}
    if finished:
        job["status"] = {
            "startTime": "2026-11-02T10:00:00Z",
            "completionTime": finished,
            "succeeded": 1,
            "conditions": [
                {"type": "SuccessCriteriaMet", "status": "True"},
                {"type": "Complete", "status": "True", "lastProbeTime": finished, "lastTransitionTime": finished},
            ],
        }
    return job


def test_a_job_keeps_what_decide_reads_and_nothing_else():
    job = server_job("n1", finished="2026-11-02T10:00:05Z")
    kept = job_transform(copy.deepcopy(job))
    meta = kept["metadata"]
    assert set(meta) == {"name", "namespace", "uid", "creationTimestamp", "labels", "ownerReferences", "annotations"}
    assert dict(meta["labels"]) == {"daemonjob.io/name": "audit", "daemonjob.io/revision": "rev1"}
    assert [dict(r) for r in meta["ownerReferences"]] == [
        {
            "apiVersion": "daemonjob.io/v1alpha1",
            "kind": "DaemonJob",
            "name": "audit",
            "uid": "dj-uid",
            "controller": True,
        }
    ]
    assert thaw(kept["status"]) == {
        "completionTime": "2026-11-02T10:00:05Z",
        "conditions": [{"type": "Complete", "status": "True", "lastTransitionTime": "2026-11-02T10:00:05Z"}],
    }
    for read in (job_node, job_revision, job_state, job_finish_time):
        assert read(freeze(kept)) == read(job)


def test_a_ttl_set_on_the_job_is_kept_for_decide():
    """An admission policy may add ttlSecondsAfterFinished to our Jobs; decide() must see it."""
    job = server_job("n1")
    assert "spec" not in job_transform(copy.deepcopy(job))
    job["spec"]["ttlSecondsAfterFinished"] = 100
    kept = freeze(job_transform(copy.deepcopy(job)))
    assert thaw(kept["spec"]) == {"ttlSecondsAfterFinished": 100}
    assert job_ttl(kept) == job_ttl(job) == 100


def test_progress_is_not_a_change():
    """Only terminal conditions are kept, so a Job's pod starting does not wake its DaemonJob."""
    pending = server_job("n1")
    pending["status"] = {}
    running = server_job("n1")
    assert job_transform(pending)["status"] == job_transform(running)["status"]
    assert (
        job_transform(running)["status"] != job_transform(server_job("n1", finished="2026-11-02T10:00:05Z"))["status"]
    )


def test_parts_that_jobs_share_are_stored_once():
    shared = Interner()
    a = job_transform(server_job("n1", finished="2026-11-02T10:00:05Z"), shared)
    b = job_transform(server_job("n2", finished="2026-11-02T10:00:05Z"), shared)
    assert a["metadata"]["labels"] is b["metadata"]["labels"]
    assert a["metadata"]["ownerReferences"] is b["metadata"]["ownerReferences"]
    assert a["status"] is b["status"]
    assert a["metadata"]["annotations"] is not b["metadata"]["annotations"]  # a different node
    again = job_transform(server_job("n1"), shared)
    assert again["metadata"]["annotations"] is a["metadata"]["annotations"]


def test_a_part_already_shared_is_found_by_its_key_alone():
    shared = Interner()
    assert shared.known(("node", "n1")) is None
    first = job_transform(server_job("n1"), shared)
    assert shared.known(("node", "n1")) is first["metadata"]["annotations"]
    labels = shared({}, ("labels", ()))
    assert shared.known(("labels", ())) is labels  # an empty part is found too, though falsy
    assert job_transform({"metadata": {"name": "bare", "uid": "u"}}, shared)["metadata"]["labels"] is labels


def test_the_interner_is_bounded_and_still_correct_when_full():
    shared = Interner(maxsize=2)
    values = [shared({"n": i}) for i in range(5)]
    assert len(shared) == 2 and [v["n"] for v in values] == list(range(5))
    assert shared({"n": 4}) is values[4]


def test_a_node_keeps_labels_taints_and_cordon():
    node = {
        "metadata": {
            "name": "n1",
            "uid": "u",
            "resourceVersion": "7",
            "labels": {"a": "b"},
            "annotations": {"big": "x" * 1000, "zone.example.com/rack": "r7"},
        },
        "spec": {"taints": [{"key": "k", "effect": "NoSchedule"}], "unschedulable": True, "podCIDR": "10.0.0.0/24"},
        "status": {"images": ["many"]},
    }
    assert thaw(node_transform(node)) == {
        "metadata": {"name": "n1", "uid": "u", "labels": {"a": "b"}, "annotations": {"zone.example.com/rack": "r7"}},
        "spec": {"taints": [{"key": "k", "effect": "NoSchedule"}], "unschedulable": True},
    }


def test_a_node_keeps_only_its_ready_condition_and_boot_id_so_a_heartbeat_is_no_change():
    def reported(ready: str, beat: str) -> dict:
        conditions = [
            {"type": "MemoryPressure", "status": "False", "lastHeartbeatTime": beat},
            {"type": "Ready", "status": ready, "lastHeartbeatTime": beat, "reason": "KubeletReady"},
        ]
        return {"metadata": {"name": "n1"}, "spec": {}, "status": {"conditions": conditions}}

    first, later = thaw(node_transform(reported("True", "t1"))), thaw(node_transform(reported("True", "t2")))
    assert (
        first
        == later
        == {"metadata": {"name": "n1"}, "spec": {}, "status": {"conditions": [{"type": "Ready", "status": "True"}]}}
    )
    assert node_transform(reported("Unknown", "t3"))["status"]["conditions"][0]["status"] == "Unknown"


def test_nodes_share_what_they_have_in_common_and_keep_what_is_their_own() -> None:
    """The spec of untainted nodes, a Ready condition that changed in the same second and short
    label values are one object for every node; a node's name is its hostname label's value."""

    def server_node(name: str, boot: str) -> dict:
        ready = {"type": "Ready", "status": "True", "lastTransitionTime": "t1", "lastHeartbeatTime": name}
        return {
            "metadata": {
                "name": "".join(["node-", name]),
                "uid": f"uid-{name}",
                "resourceVersion": name,
                "labels": {"kubernetes.io/hostname": "".join(["node-", name]), "kubernetes.io/os": "linux"},
            },
            "spec": {"taints": [], "unschedulable": False},
            "status": {"conditions": [ready], "nodeInfo": {"bootID": boot, "machineID": name}},
        }

    a, b = (freeze(node_transform(server_node(n, f"boot-{n}"))) for n in ("a", "b"))
    assert a["spec"] is b["spec"] and a["status"]["conditions"] is b["status"]["conditions"]
    assert a["metadata"]["labels"]["kubernetes.io/os"] is b["metadata"]["labels"]["kubernetes.io/os"]
    assert a["metadata"]["labels"]["kubernetes.io/hostname"] is a["metadata"]["name"]
    assert thaw(a["status"]) == {
        "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "t1"}],
        "nodeInfo": {"bootID": "boot-a"},
    }
    assert b["status"]["nodeInfo"]["bootID"] == "boot-b" and b["metadata"]["uid"] == "uid-b"
    later = freeze(node_transform(server_node("a", "boot-a")))  # a heartbeat: equal, so no change
    assert later == a and hash(later) == hash(a) and later is not a
    assert isinstance(a, CachedNode) and freeze(a) is a  # a record: frozen as it is
    assert a != freeze(node_transform(server_node("a", "boot-2")))  # a reboot is a change
    assert "status" not in node_transform({"metadata": {"name": "bare"}})
