"""The view of a cached Job: its rarely set fields shared as one default, read as its own."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timezone

import pytest

from daemonjob.domain.jobs.contract import SUCCEEDED
from daemonjob.domain.jobs.jobview import PLAIN, JobView
from daemonjob.domain.shared.apinames import ANNOTATION_BOOT_ID, ANNOTATION_NODE, LABEL_ATTEMPT

NOW = datetime(2026, 1, 1, tzinfo=timezone.utc)


def test_a_view_without_rare_fields_shares_the_defaults_and_compares_by_value() -> None:
    a = JobView("j", "u", "n", "r", "active", NOW, None, template_hash="h")
    b = JobView("j", "u", "n", "r", "active", NOW, None, template_hash="h", attempt=0, recorded=False)
    assert a.rare is PLAIN and b.rare is PLAIN
    assert a == b and hash(a) == hash(b)
    assert (a.ttl, a.attempt, a.started, a.recorded, a.standin, a.boot_id, a.verdict, a.began) == (
        None,
        0,
        False,
        False,
        False,
        None,
        None,
        None,
    )


def test_rare_fields_are_kept_and_read_as_attributes_of_the_view() -> None:
    v = JobView("j", "u", "n", "r", SUCCEEDED, NOW, NOW, ttl=60, attempt=2, started=True, standin=True, began=NOW)
    assert v.rare is not PLAIN
    assert (v.ttl, v.attempt, v.started, v.standin, v.began, v.recorded) == (60, 2, True, True, NOW, False)
    assert v != JobView("j", "u", "n", "r", SUCCEEDED, NOW, NOW, ttl=60, attempt=2, started=True, began=NOW)


def test_a_view_is_frozen_and_flagging_it_recorded_makes_a_new_one() -> None:
    v = JobView("j", "u", "n", "r", SUCCEEDED, NOW, NOW, attempt=1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        v.name = "other"  # type: ignore[misc]
    flagged = v.flagged_recorded()
    assert flagged.recorded and not v.recorded
    assert (flagged.name, flagged.attempt, flagged.finished) == ("j", 1, NOW)
    assert flagged.flagged_recorded() is flagged


def test_a_cached_jobs_view_reads_its_rare_fields_from_the_job() -> None:
    job = {
        "metadata": {
            "name": "j",
            "uid": "u",
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "labels": {LABEL_ATTEMPT: "3"},
            "annotations": {ANNOTATION_NODE: "n", ANNOTATION_BOOT_ID: "boot-1"},
        },
        "spec": {"ttlSecondsAfterFinished": 5},
        "status": {"startTime": "2026-01-01T00:00:01Z"},
    }
    v = JobView.of(job)
    assert (v.node, v.attempt, v.boot_id, v.ttl) == ("n", 3, "boot-1", 5)
    assert v.began == datetime(2026, 1, 1, 0, 0, 1, tzinfo=timezone.utc)
    plain = JobView.of({"metadata": {"name": "k", "annotations": {ANNOTATION_NODE: "n"}}})
    assert plain.rare is PLAIN
