"""The bodies of creates sent together: each built when read, so a writer holds one at a time."""

from __future__ import annotations

from daemonjob.domain.actions import CreateJob, JobBodies
from daemonjob.domain.jobs import build_job
from daemonjob.domain.revision import job_name
from daemonjob.testing.builders import daemonjob


def create(dj: dict, node: str) -> CreateJob:
    return CreateJob(node, job_name(dj["metadata"]["name"], node, "rev1"), "rev1", dj)


def test_each_body_is_the_creates_own_built_as_it_is_read() -> None:
    dj = daemonjob()
    creates = [create(dj, f"n{i}") for i in range(3)]
    bodies = JobBodies(creates)
    assert len(bodies) == 3
    assert [b["metadata"]["name"] for b in bodies] == [c.name for c in creates]
    assert bodies[1] == build_job(dj, "n1", "rev1") and bodies[1] is not bodies[1]  # a fresh body each read
    assert [b["metadata"]["name"] for b in bodies[1:]] == [c.name for c in creates[1:]]
