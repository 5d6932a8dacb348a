"""A checked turn's boot ID and verdict are sealed (controller/runtime/turnseal.py): the Job cache keeps
a record only where its seal verifies, so a namespace editor who patches a Job's annotations
neither releases its node nor fakes a reboot; the controller seals what it writes."""

from __future__ import annotations

import base64
import copy
from datetime import timedelta
from typing import Any

import pytest

from daemonjob.controller.runtime.transforms import job_transform
from daemonjob.controller.runtime.turnseal import (
    ANNOTATION_BOOT_ID_SEAL,
    ANNOTATION_NODE_CHECK_SEAL,
    BOOT_ID,
    NODE_CHECK,
    SECRET_KEY,
    TurnSeal,
    load_key,
)
from daemonjob.domain.gates.health import WAITING_FOR_NODE_HEALTH
from daemonjob.domain.jobs.jobbody import build_job
from daemonjob.domain.jobs.jobview import JobView
from daemonjob.domain.jobs.turnverdict import FAILED_CHECK, PASSED, Verdict
from daemonjob.domain.shared.apinames import ANNOTATION_BOOT_ID, ANNOTATION_NODE_CHECK
from daemonjob.domain.shared.timestamps import format_time
from daemonjob.machinery.cache.frozen import thaw
from daemonjob.machinery.client.kube import ApiError
from daemonjob.machinery.process.clock import FAKE_WALL_START
from daemonjob.testing.doubles.actbed import ActBed
from daemonjob.testing.doubles.builders import daemonjob, node, revision_of
from daemonjob.testing.doubles.decisions import Given, decide_over
from daemonjob.testing.doubles.fakes import TEST_SEAL_KEY, api_error

T = format_time
NOW = FAKE_WALL_START  # the act bed's clock starts there
HEALTH = {"timeout": "5m", "settle": "30s"}


def rebooting(**spec: Any) -> dict[str, Any]:
    return daemonjob(maxParallel=1, nodeMaintenance={"reboot": "Expected", "rebootTimeout": "10m"}, **spec)


def booted(name: str, boot: str) -> dict[str, Any]:
    n = node(name)
    since = T(NOW - timedelta(hours=1))
    n["status"] = {
        "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": since}],
        "nodeInfo": {"bootID": boot},
    }
    return n


class Broken(list[tuple[str, str]]):
    def __call__(self, kind: str, job: Any) -> None:
        self.append((kind, job["metadata"]["name"]))


def sealed_job(seal: TurnSeal, dj: dict[str, Any], node: str, boot: str, state: str = "succeeded") -> dict[str, Any]:
    """A checked turn's Job as the controller creates it (boot ID sealed), then finished."""
    body = seal.sealed(build_job(dj, node, revision_of(dj), boot_id=boot))
    created, finished = NOW - timedelta(minutes=3), NOW - timedelta(minutes=2)
    body["metadata"].update(creationTimestamp=T(created), uid=f"uid-{body['metadata']['name']}")
    kind = "Complete" if state == "succeeded" else "Failed"
    body["status"] = {
        "startTime": T(created),
        "conditions": [{"type": kind, "status": "True", "lastTransitionTime": T(finished)}],
    }
    return body


def cached(job: dict[str, Any], seal: TurnSeal) -> dict[str, Any]:
    return thaw(job_transform(copy.deepcopy(job), seal=seal))


def test_the_cache_keeps_sealed_records_and_drops_forged_ones() -> None:
    broken = Broken()
    seal = TurnSeal(TEST_SEAL_KEY, broken)
    dj = daemonjob(maxParallel=1, healthCheck=HEALTH)
    job = sealed_job(seal, dj, "a", "boot-1")
    assert cached(job, seal)["metadata"]["annotations"][ANNOTATION_BOOT_ID] == "boot-1" and broken == []

    forged = copy.deepcopy(job)
    forged["metadata"]["annotations"][ANNOTATION_NODE_CHECK] = Verdict(PASSED).text()
    view = JobView.of(cached(forged, seal))
    assert view.verdict is None and view.turn == "active", "an unsealed verdict is absent: the turn is not over"
    assert broken == [(NODE_CHECK, job["metadata"]["name"])]

    other = TurnSeal(b"someone-elses-key-of-32-bytes!!!")
    forged["metadata"]["annotations"].update(
        other.verdict_annotations(job["metadata"]["uid"], "a", Verdict(PASSED).text())
    )
    assert JobView.of(cached(forged, seal)).verdict is None, "sealed with another key"

    written = copy.deepcopy(job)
    written["metadata"]["annotations"].update(
        seal.verdict_annotations(job["metadata"]["uid"], "a", Verdict(PASSED).text())
    )
    assert JobView.of(cached(written, seal)).verdict == Verdict(PASSED)
    moved = copy.deepcopy(written)
    moved["metadata"]["uid"] = "uid-of-a-new-job-of-the-same-name"
    assert JobView.of(cached(moved, seal)).verdict is None, "a verdict copied onto another Job does not verify"


def test_a_boot_id_patched_on_the_job_or_its_seal_broken_fakes_no_reboot() -> None:
    broken = Broken()
    seal = TurnSeal(TEST_SEAL_KEY, broken)
    dj = rebooting()
    job = sealed_job(seal, dj, "a", "boot-1", state="failed")
    on_job = copy.deepcopy(job)
    on_job["metadata"]["annotations"][ANNOTATION_BOOT_ID] = "boot-0"  # the Job's annotation is not what counts
    assert JobView.of(cached(on_job, seal)).boot_id == "boot-1"
    template = copy.deepcopy(job)
    template["spec"]["template"]["metadata"]["annotations"][ANNOTATION_BOOT_ID] = "boot-0"
    assert JobView.of(cached(template, seal)).boot_id == "", "checked still, its boot ID unknown"
    assert broken == [(BOOT_ID, job["metadata"]["name"])]
    unsealed = copy.deepcopy(job)
    del unsealed["spec"]["template"]["metadata"]["annotations"][ANNOTATION_BOOT_ID_SEAL]
    assert JobView.of(cached(unsealed, seal)).boot_id == ""

    # the node is back Ready with a new boot ID, but the Job's boot record does not verify:
    # no reboot is seen, the node stays held until rebootTimeout fails it
    d = decide_over(Given(dj, [cached(template, seal)], [booted("a", "boot-2"), booted("b", "boot-1")], NOW))
    assert d.marks == [] and d.creates == []
    cond = next(c for c in d.status["conditions"] if c["type"] == "Reconciling")
    assert cond["reason"] == WAITING_FOR_NODE_HEALTH and "unknown at the Job's start" in cond["message"]
    late = NOW + timedelta(minutes=10)
    [mark] = decide_over(
        Given(dj, [cached(template, seal)], [booted("a", "boot-2"), booted("b", "boot-1")], late)
    ).marks
    assert mark.verdict.verdict == FAILED_CHECK


def test_the_controller_seals_what_it_writes_and_a_forged_verdict_leaves_the_node_held() -> None:
    bed = ActBed.start()
    try:
        dj = daemonjob(maxParallel=1, healthCheck=HEALTH)
        for name in ("a", "b"):
            bed.nodes.add(booted(name, f"boot-{name}"))
        bed.add_dj(dj)
        bed.ctl.reconcile(bed.key)
        [body] = bed.created()
        pod_annotations = body["spec"]["template"]["metadata"]["annotations"]
        assert pod_annotations[ANNOTATION_BOOT_ID] == "boot-a" and pod_annotations[ANNOTATION_BOOT_ID_SEAL]
        bed.sync()
        bed.finish_jobs()
        bed.ctl.reconcile(bed.key)
        assert bed.created_names() == [body["metadata"]["name"]], "a's turn awaits its health check"

        # a namespace editor writes Passed (and a seal of their own making) on the Job
        ns_name = f"{dj['metadata']['namespace']}/{body['metadata']['name']}"
        job = bed.control.objects[ns_name]
        job["metadata"]["annotations"][ANNOTATION_NODE_CHECK] = Verdict(PASSED).text()
        job["metadata"]["annotations"][ANNOTATION_NODE_CHECK_SEAL] = "forged"
        bed.jobs.update(job)
        bed.ctl.reconcile(bed.key)
        assert len(bed.created_names()) == 1, "the node is still held: b does not start"
        cond = next(c for c in bed.last_status()["conditions"] if c["type"] == "Reconciling")
        assert cond["reason"] == WAITING_FOR_NODE_HEALTH and "node a" in cond["message"]
        seen = bed.ctl.metrics.registry.get_sample_value("daemonjob_turn_seals_broken_total", {"record": NODE_CHECK})
        assert seen and seen >= 1

        bed.clock.step(31)  # the settle passes: the controller writes its own verdict, sealed
        bed.ctl.reconcile(bed.key)
        [relabel] = [c for c in bed.control.calls if c.verb == "relabel"]
        assert relabel.body[ANNOTATION_NODE_CHECK_SEAL] != "forged"
        bed.sync()
        bed.ctl.reconcile(bed.key)
        assert len(bed.created_names()) == 2, "once the verdict verifies, the next node starts"
    finally:
        bed.stop()


class FakeSecrets:
    """Secrets as the API server keeps them: `shipped` empty (the manifests'), or absent."""

    def __init__(self, shipped: bool = True, race: bool = False) -> None:
        self.secret: dict[str, Any] | None = {"metadata": {"resourceVersion": "1"}} if shipped else None
        self.race = race
        self.writes = 0

    def get(self, path: str) -> dict[str, Any]:
        if self.secret is None:
            raise api_error(404)
        return copy.deepcopy(self.secret)

    def _write(self, body: dict[str, Any], conflict: ApiError) -> dict[str, Any]:
        self.writes += 1
        if self.race:  # another replica wrote its key first
            self.race = False
            self.secret = {
                "metadata": {"resourceVersion": "2"},
                "data": {SECRET_KEY: base64.b64encode(b"r" * 32).decode()},
            }
            raise conflict
        self.secret = body
        return body

    def put(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        return self._write(body, api_error(409, "Conflict"))

    def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        return self._write(body, api_error(409, "AlreadyExists"))


@pytest.mark.parametrize(("shipped", "race"), [(True, False), (True, True), (False, False), (False, True)])
def test_the_key_is_written_once_into_the_shipped_secret_and_read_by_every_replica(shipped: bool, race: bool) -> None:
    secrets = FakeSecrets(shipped, race)
    key = load_key(secrets, "daemonjob-system", "daemonjob-turn-seal")  # type: ignore[arg-type]
    assert secrets.writes == 1 and len(key) == 32
    assert secrets.secret is not None and key == base64.b64decode(secrets.secret["data"][SECRET_KEY])
    if race:
        assert key == b"r" * 32, "the replica that lost the race reads the winner's key"
    assert load_key(secrets, "daemonjob-system", "daemonjob-turn-seal") == key  # type: ignore[arg-type]
    assert secrets.writes == 1, "read from then on, never written again"
