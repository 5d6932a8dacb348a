"""Where each DaemonJob succeeded, kept from Job events, equals a full read of its Jobs after
every event (the rule spec.after reads: a succeeded Job of the revision and run, on a node)."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from daemonjob.controller.succeeded import SucceededNodes
from daemonjob.domain.jobs import SUCCEEDED, job_node, job_revision, job_run, job_state, owner_uid
from daemonjob.testing.builders import job, make_dj

DJS = [make_dj(name, uid=f"uid-{name}") for name in ("a", "b")]
NODES = ["n1", "n2", "n3"]
STATES = ["active", "succeeded", "failed", "terminating"]


def full_read(jobs: dict[str, dict[str, Any]], uid: str, revision: str, run: str | None) -> frozenset[str]:
    return frozenset(n for j in jobs.values() if owner_uid(j) == uid and job_revision(j) == revision
                     and job_run(j) == run and job_state(j) == SUCCEEDED and (n := job_node(j)))


@given(st.lists(st.tuples(st.integers(0, 1), st.sampled_from(NODES), st.sampled_from(["r1", "r2"]),
                          st.sampled_from([None, "run-1"]), st.sampled_from([*STATES, "gone"])), max_size=30))
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_the_kept_sets_equal_a_full_read_after_every_event(events: list[tuple[int, str, str, str | None, str]]) -> None:
    kept = SucceededNodes()
    jobs: dict[str, dict[str, Any]] = {}
    for d, node, revision, run, state in events:
        body = job(DJS[d], node, "active" if state == "gone" else state, revision=revision)
        if run is not None:
            body["metadata"]["labels"]["daemonjob.io/run"] = run
        name = f"{body['metadata']['name']}-{run}"  # one Job per DaemonJob, node, revision and run
        body["metadata"]["name"] = name
        old = jobs.get(name)
        if state == "gone":
            if old is not None:
                kept.job_changed(jobs.pop(name), None)
        else:
            jobs[name] = body
            kept.job_changed(old, body)
        for dj in DJS:
            uid = dj["metadata"]["uid"]
            for rev in ("r1", "r2"):
                for r in (None, "run-1"):
                    assert kept.nodes(uid, rev, r) == full_read(jobs, uid, rev, r)
                    assert all(kept.has(uid, rev, r, n) == (n in full_read(jobs, uid, rev, r)) for n in NODES)
    assert kept.nodes("uid-a", None, None) == frozenset()
