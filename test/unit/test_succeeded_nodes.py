"""Where each DaemonJob succeeded, kept from Job events, equals a full read of its Jobs at every
read (the rule spec.after reads: a succeeded Job of the revision and run, on a node); it is
kept only for the DaemonJobs some other one names in spec.after, built from the Jobs cache at
its first read and dropped once none names it."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from daemonjob.controller.order.succeeded import SucceededNodes
from daemonjob.domain.jobs.contract import SUCCEEDED, job_node, job_revision, job_run, job_state
from daemonjob.domain.jobs.owners import job_owner_id, owner_uid
from daemonjob.testing.doubles.builders import NS, daemonjob, job

DJS = [daemonjob(name, uid=f"uid-{name}") for name in ("a", "b")]
NODES = ["n1", "n2", "n3"]
STATES = ["active", "succeeded", "failed", "terminating"]


class Cluster:
    """The Jobs cache (by name) and which DaemonJobs some other one names in spec.after."""

    def __init__(self) -> None:
        self.jobs: dict[str, dict[str, Any]] = {}
        self.named: set[str] = set()
        self.reads = 0  # builds from the cache

    def jobs_of(self, owner: str) -> Iterable[dict[str, Any]]:
        self.reads += 1
        return [j for j in self.jobs.values() if job_owner_id(j) == owner]

    def is_named(self, namespace: str, name: str) -> bool:
        return namespace == NS and name in self.named

    def kept(self) -> SucceededNodes:
        return SucceededNodes(self.jobs_of, self.is_named)


def full_read(jobs: dict[str, dict[str, Any]], uid: str, revision: str, run: str | None) -> frozenset[str]:
    return frozenset(
        n
        for j in jobs.values()
        if owner_uid(j) == uid
        and job_revision(j) == revision
        and job_run(j) == run
        and job_state(j) == SUCCEEDED
        and (n := job_node(j))
    )


def a_job(d: int, node: str, state: str, revision: str = "r1", run: str | None = None) -> dict[str, Any]:
    body = job(DJS[d], node, state, revision=revision)
    if run is not None:
        body["metadata"]["labels"]["daemonjob.io/run"] = run
    body["metadata"]["name"] = f"{body['metadata']['name']}-{run}"  # one Job per DaemonJob, node, revision and run
    return body


def assert_reads_right(kept: SucceededNodes, cluster: Cluster, d: int) -> None:
    dj = DJS[d]
    uid = dj["metadata"]["uid"]
    for rev in ("r1", "r2"):
        for r in (None, "run-1"):
            expected = full_read(cluster.jobs, uid, rev, r)
            assert kept.nodes(dj, rev, r) == expected
            assert all(kept.has(dj, rev, r, n) == (n in expected) for n in NODES)


EVENTS = st.one_of(
    st.tuples(
        st.just("job"),
        st.integers(0, 1),
        st.sampled_from(NODES),
        st.sampled_from(["r1", "r2"]),
        st.sampled_from([None, "run-1"]),
        st.sampled_from([*STATES, "gone"]),
    ),
    st.tuples(st.sampled_from(["name", "unname", "read"]), st.integers(0, 1)),
)


@given(st.lists(EVENTS, max_size=40))
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_the_kept_sets_equal_a_full_read_at_every_read(events: list[tuple[Any, ...]]) -> None:
    cluster = Cluster()
    kept = cluster.kept()
    for event in events:
        if event[0] == "job":
            _, d, node, revision, run, state = event
            body = a_job(d, node, "active" if state == "gone" else state, revision, run)
            name = body["metadata"]["name"]
            old = cluster.jobs.get(name)
            if state == "gone":
                if old is not None:
                    kept.job_changed(cluster.jobs.pop(name), None)
            else:
                cluster.jobs[name] = body
                kept.job_changed(old, body)
        elif event[0] == "name":
            cluster.named.add(DJS[event[1]]["metadata"]["name"])
        elif event[0] == "unname":
            cluster.named.discard(name := DJS[event[1]]["metadata"]["name"])
            kept.drop(NS, name)
        else:
            assert_reads_right(kept, cluster, event[1])
        assert kept.kept() <= {f"uid-{n}" for n in cluster.named}
    for d in range(len(DJS)):
        assert_reads_right(kept, cluster, d)
    assert kept.nodes(DJS[0], None, None) == frozenset()


def test_nothing_is_kept_for_a_daemonjob_no_other_names() -> None:
    cluster = Cluster()
    kept = cluster.kept()
    for node in NODES:
        cluster.jobs[node] = body = a_job(0, node, "succeeded")
        kept.job_changed(None, body)
    assert kept.nodes(DJS[0], "r1", None) == frozenset(NODES)  # a full read, kept nowhere
    assert kept.kept() == set()


def test_the_first_read_builds_from_the_cache_then_events_keep_it() -> None:
    cluster = Cluster()
    cluster.named.add("a")
    kept = cluster.kept()
    cluster.jobs["n1"] = a_job(0, "n1", "succeeded")  # in the cache before anyone read it
    kept.job_changed(None, cluster.jobs["n1"])
    assert kept.kept() == set()
    assert kept.has(DJS[0], "r1", None, "n1") and kept.kept() == {"uid-a"}
    reads = cluster.reads
    cluster.jobs["n2"] = a_job(0, "n2", "succeeded")
    kept.job_changed(None, cluster.jobs["n2"])
    old = cluster.jobs.pop("n1")
    kept.job_changed(old, None)
    assert kept.nodes(DJS[0], "r1", None) == {"n2"}
    assert cluster.reads == reads  # followed from the events, not read again


def test_an_event_the_build_already_read_changes_nothing() -> None:
    """The informer updates its cache before its handlers run: a build in between reads the new
    version, and the handler that comes after it must not count it twice."""
    cluster = Cluster()
    cluster.named.add("a")
    kept = cluster.kept()
    active = a_job(0, "n1", "active")
    cluster.jobs["n1"] = done = a_job(0, "n1", "succeeded")  # the cache has it ...
    assert kept.has(DJS[0], "r1", None, "n1")  # ... a read builds from it ...
    kept.job_changed(active, done)  # ... then the handler of that change runs
    cluster.jobs.pop("n1")
    kept.job_changed(done, None)
    assert not kept.has(DJS[0], "r1", None, "n1")


def test_a_daemonjob_no_longer_named_is_dropped_and_built_again_when_named_again() -> None:
    cluster = Cluster()
    cluster.named.add("a")
    kept = cluster.kept()
    cluster.jobs["n1"] = a_job(0, "n1", "succeeded")
    assert kept.nodes(DJS[0], "r1", None) == {"n1"} and kept.kept() == {"uid-a"}
    cluster.named.clear()
    kept.drop(NS, "a")
    assert kept.kept() == set()
    cluster.jobs["n2"] = a_job(0, "n2", "succeeded")  # while no one names it: not followed
    kept.job_changed(None, cluster.jobs["n2"])
    assert kept.kept() == set()
    cluster.named.add("a")
    assert kept.nodes(DJS[0], "r1", None) == {"n1", "n2"}


def test_a_deleted_daemonjob_is_forgotten() -> None:
    cluster = Cluster()
    cluster.named.add("a")
    kept = cluster.kept()
    cluster.jobs["n1"] = a_job(0, "n1", "succeeded")
    assert kept.has(DJS[0], "r1", None, "n1")
    kept.forget("uid-a")
    assert kept.kept() == set()
