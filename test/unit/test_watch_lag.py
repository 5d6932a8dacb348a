"""A Job watch far behind the controller's own creates: no Job is created twice, new creates
are held back while it is behind, and they go on as soon as it catches up (or relists)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from datetime import datetime, timezone
from typing import Any

import pytest

from daemonjob import defaults
from daemonjob.controller.runtime.backpressure import HELD_MESSAGE, CreateBackPressure
from daemonjob.controller.runtime.expectations import Expectations
from daemonjob.machinery.cache.frozen import freeze
from daemonjob.machinery.cache.informer import diff_relist
from daemonjob.machinery.process.clock import FakeClock
from daemonjob.testing.doubles.actbed import ActBed
from daemonjob.testing.doubles.builders import daemonjob, nodes
from daemonjob.testing.doubles.builders import job as job_of
from daemonjob.testing.doubles.decisions import Given, decide_over

NS = "ops"


@pytest.fixture
def bed() -> Iterator[ActBed]:
    bed = ActBed.start()
    bed.add_nodes(6)
    yield bed
    bed.stop()


def add(bed: ActBed, name: str) -> str:
    bed.add_dj(daemonjob(name, NS, uid=f"uid-{name}"))
    return f"{NS}/{name}"


def queued(bed: ActBed) -> list[str]:
    """The keys due now (nothing of the fake clock's future), taken off the queue."""
    bed.settle()
    keys = []
    while len(bed.ctl.queue):
        key, _ = bed.ctl.queue.get()
        bed.ctl.queue.done(key)
        keys.append(key)
    return sorted(keys)


def watch_shows(bed: ActBed, count: int | None = None) -> None:
    """The Job watch delivers the first `count` writes it has not shown yet (all: None)."""
    pending = bed.control._pending
    shown, bed.control._pending = pending[:count], pending[len(pending) if count is None else count :]
    for _, job in shown:
        bed.jobs.add(job)


def already_exists(bed: ActBed) -> int:
    """Creates of a name created before (no Job is deleted in these tests: each was refused)."""
    names = bed.created_names()
    return len(names) - len(set(names))


def reconciling(status: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in status["conditions"] if c["type"] == "Reconciling")


def gauge(bed: ActBed, name: str) -> float:
    return bed.ctl.metrics.registry.get_sample_value(name) or 0.0


# -- the expectation's TTL passes while the watch is behind ----------------------------------------
def test_creates_past_the_ttl_the_watch_has_not_shown_are_not_made_again(bed: ActBed) -> None:
    key = add(bed, "audit")
    bed.drain()
    bed.ctl.reconcile(key)
    assert len(bed.created_names()) == 6
    for _ in range(3):  # rechecked past the deadline and past the TTL: the API server holds them
        bed.clock.step(defaults.EXPECTATIONS_TTL / 2)
        bed.ctl.reconcile(key)
    assert len(bed.created_names()) == 6 and already_exists(bed) == 0, "a watch behind is not a lost event"
    assert "waiting for the cache to show 6 created Jobs" in reconciling(bed.last_status())["message"]
    watch_shows(bed)
    bed.ctl.reconcile(key)
    assert len(bed.created_names()) == 6
    assert bed.ctl.expectations.satisfied("uid-audit")


def test_a_create_the_api_server_does_not_hold_is_made_again_past_the_deadline(bed: ActBed) -> None:
    """A lost create (the Job deleted before the watch showed it) still converges."""
    key = add(bed, "audit")
    bed.drain()
    bed.ctl.reconcile(key)
    first = bed.created_names()[0]
    bed.control.objects.pop(f"{NS}/{first}")
    bed.control._pending = [(op, j) for op, j in bed.control._pending if j["metadata"]["name"] != first]
    watch_shows(bed)
    bed.clock.step(defaults.EXPECTATIONS_DEADLINE)
    bed.ctl.reconcile(key)
    assert bed.created_names()[6:] == [first] and f"{NS}/{first}" in bed.control.objects


def test_deletes_still_expire_after_the_ttl() -> None:
    clock = FakeClock()
    exp = Expectations(ttl=300, timer=clock.now)
    exp.expect_creations("u", ["new"])
    exp.expect_deletions("u", ["old"])
    clock.step(301)
    assert exp.pending("u") == (1, 0) and exp.unseen_creates() == 1
    exp.creation_observed("u", "new")
    assert exp.satisfied("u") and exp.unseen_creates() == 0


def test_a_create_expires_once_the_watch_shows_one_sent_after_its_answer() -> None:
    clock = FakeClock()
    exp = Expectations(ttl=300, timer=clock.now)
    exp.expect_creations("u", ["lost"])
    exp.expect_creations("v", ["sent-before-the-answer"])
    exp.create_answered("u", "lost")
    exp.expect_creations("v", ["refused", "after"])
    exp.create_answered("v", "sent-before-the-answer")
    clock.step(301)
    exp.creation_observed("v", "sent-before-the-answer")  # may be earlier in the watch than "lost"
    exp.creation_cancelled("v", "refused")  # never in the watch
    assert exp.pending("u") == (1, 0), "the watch has not passed it: behind, not lost"
    exp.create_answered("v", "after")
    exp.creation_observed("v", "after")
    fell: list[int] = []
    exp.on_seen = lambda: fell.append(exp.unseen_creates())
    assert exp.satisfied("u") and exp.unseen_creates() == 0, "shown a later create: its event was lost"
    assert fell == [0], "its expiry makes room for creates held back"


# -- back-pressure --------------------------------------------------------------------------------
def test_back_pressure_holds_past_the_bound_and_releases_when_the_watch_catches_up(bed: ActBed) -> None:
    bed.ctl.backpressure.limit, bed.ctl.backpressure.resume = 4, 2
    first, second = add(bed, "first"), add(bed, "second")
    queued(bed)
    bed.ctl.reconcile(first)
    bed.ctl.reconcile(second)
    assert len(bed.created_names()) == 4, "4 creates the watch has not shown: the bound"
    assert gauge(bed, "daemonjob_creates_held") == 2 and gauge(bed, "daemonjob_job_creates_unseen") == 4
    held = reconciling(bed.last_status())
    assert held["status"] == "True" and held["message"].endswith(HELD_MESSAGE), "a held rollout says why"
    watch_shows(bed, 1)
    assert queued(bed) == [], "3 unseen: above where creates resume"
    watch_shows(bed, 1)
    assert queued(bed) == [first], "the longest held, at once without a resync: it wants all the room"
    assert gauge(bed, "daemonjob_creates_held") == 1
    bed.clock.step(defaults.HELD_RECHECK)
    assert second in queued(bed), "the next a moment later, even if the first creates nothing"
    assert gauge(bed, "daemonjob_creates_held") == 1, "held until its own pass finds room"
    bed.ctl.reconcile(second)  # first still waits for its own 2 unseen creates
    assert len(bed.created_names()) == 6 and gauge(bed, "daemonjob_creates_held") == 1
    for _ in range(10):
        watch_shows(bed)
        bed.clock.step(defaults.JOB_EVENT_DELAY_MAX)
        for key in queued(bed):
            bed.ctl.reconcile(key)
    assert len(bed.created_names()) == 12 and already_exists(bed) == 0, "both rolled out, each Job once"
    assert gauge(bed, "daemonjob_creates_held") == 0


def test_a_relist_shows_the_lost_creates_and_releases_the_held(bed: ActBed) -> None:
    bed.ctl.backpressure.limit, bed.ctl.backpressure.resume = 6, 0
    first, second = add(bed, "first"), add(bed, "second")
    queued(bed)
    bed.ctl.reconcile(first)
    bed.ctl.reconcile(second)
    assert len(bed.created_names()) == 6 and gauge(bed, "daemonjob_creates_held") == 1
    bed.control._pending = []  # the watch lost them (a 410 Gone): the informer relists
    listed = [freeze(bed.jobs._prepare(j)) for j in bed.control.objects.values()]
    diff = diff_relist(dict(bed.jobs.store.items()), listed)
    for _, job in diff.changes:  # what the informer's relist hands the handlers: each as ADDED
        bed.jobs.add(job)
    assert queued(bed) == [second], "the list is the truth: nothing left unseen"
    bed.ctl.reconcile(second)
    assert len(bed.created_names()) == 12 and already_exists(bed) == 0


def test_the_bound_counts_creates_admitted_and_not_sent_yet() -> None:
    unseen = [0]
    woken: list[str] = []
    bp = CreateBackPressure(lambda: unseen[0], woken.append, limit=10, resume=5)
    assert bp.admit("a", 8) == 8
    assert bp.admit("b", 8) == 2, "a's 8 are on their way"
    bp.sent(8)
    unseen[0] = 8
    bp.sent(2)
    unseen[0] = 10
    assert bp.admit("c", 1) == 0 and bp.held() == 2
    unseen[0] = 6
    bp.seen()
    assert woken == []
    unseen[0] = 5
    bp.seen()
    assert woken == ["b", "c"] and bp.held() == 0
    bp.seen()
    assert woken == ["b", "c"]


def test_only_as_many_held_as_the_room_takes_are_woken_the_longest_held_first() -> None:
    """Each DaemonJob over many nodes wants more than the whole room: waking every held one
    made all but the first decide over all their nodes only to be held again."""
    unseen = [0]
    woken: list[str] = []
    later: list[tuple[str, float]] = []
    bp = CreateBackPressure(lambda: unseen[0], woken.append, lambda k, s: later.append((k, s)), limit=10, resume=5)
    unseen[0] = 10
    for key in ("a", "b", "c"):
        assert bp.admit(key, 30) == 0
    assert bp.held() == 3
    unseen[0] = 5
    bp.seen()
    assert woken == ["a"], "a alone wants more than the room of 5"
    assert later == [("b", defaults.HELD_RECHECK)], "the next one moves on even if a creates nothing"
    assert bp.admit("a", 30) == 5 and bp.held() == 3, "a takes the room and waits again, behind b and c"
    bp.sent(5)
    unseen[0] = 10
    assert bp.admit("b", 30) == 0, "b's later pass found no room: held again, now last"
    unseen[0] = 2
    bp.seen()
    assert woken == ["a", "c"] and later[-1] == ("a", defaults.HELD_RECHECK)
    assert bp.admit("c", 3) == 3 and bp.held() == 2


def test_small_wants_wake_together_until_the_room_is_taken() -> None:
    unseen = [10]
    woken: list[str] = []
    bp = CreateBackPressure(lambda: unseen[0], woken.append, lambda k, s: None, limit=10, resume=5)
    for key in ("a", "b", "c", "d"):
        assert bp.admit(key, 2) == 0
    unseen[0] = 4  # room for 6: three wants of 2
    bp.seen()
    assert woken == ["a", "b", "c"] and bp.held() == 1


# -- the decision is cut to the room ----------------------------------------------------------------
NOW = datetime(2024, 3, 6, 12, 0, 0, tzinfo=timezone.utc)


def test_a_decision_builds_only_the_creates_the_room_takes_and_says_what_it_would_without_a_bound() -> None:
    """At 65,000 nodes every pass named and built the Jobs of every node still to start, only
    for the act layer to hold all but a few hundred back: most of the controller's CPU."""
    dj = daemonjob("audit", NS, generation=2)
    old = job_of(daemonjob("audit", NS), "n1", revision="old-rev")  # running an older revision
    given = Given(dj, [old], nodes("n1", "n2", "n3", "n4", "n5", "n6"), NOW)
    free = decide_over(given)
    cut = decide_over(dataclasses.replace(given.input(), create_room=2))
    none = decide_over(dataclasses.replace(given.input(), create_room=0))
    assert [c.node for c in free.creates] == ["n2", "n3", "n4", "n5", "n6"] and free.capped == 0
    assert [c.node for c in cut.creates] == ["n2", "n3"] and cut.capped == 3
    assert none.creates == [] and none.capped == 5
    for d in (cut, none):
        assert [x.name for x in d.deletes] == [x.name for x in free.deletes] == [old["metadata"]["name"]]
        assert d.status["conditions"] == free.status["conditions"], "held by the watch, not by a rollout rule"


def test_a_pass_with_no_room_builds_no_create_and_is_held_until_the_watch_catches_up(bed: ActBed) -> None:
    bed.ctl.backpressure.limit, bed.ctl.backpressure.resume = 4, 2
    first, second = add(bed, "first"), add(bed, "second")
    queued(bed)
    one = bed.ctl.reconcile(first)
    two = bed.ctl.reconcile(second)
    assert one is not None and len(one.creates) == 4 and one.capped == 2
    assert two is not None and two.creates == [] and two.capped == 6, "no room: nothing named, all held"
    assert gauge(bed, "daemonjob_creates_held") == 2 and len(bed.created_names()) == 4
    assert reconciling(bed.last_status())["message"].endswith(HELD_MESSAGE)
    for _ in range(10):
        watch_shows(bed)
        bed.clock.step(defaults.HELD_RECHECK)
        for key in queued(bed):
            bed.ctl.reconcile(key)
    assert len(bed.created_names()) == 12 and already_exists(bed) == 0
    assert gauge(bed, "daemonjob_creates_held") == 0


def test_a_decision_cut_to_a_room_that_grew_meanwhile_is_queued_again_at_once() -> None:
    """No `seen` may come to wake it: the watch caught up between its decision and its act."""
    woken: list[str] = []
    bp = CreateBackPressure(lambda: 0, woken.append, lambda k, s: None, limit=10, resume=5)
    assert bp.admit("a", wanted=30, ready=0) == 0 and woken == ["a"] and bp.held() == 0
    assert bp.admit("b", wanted=30, ready=4) == 4 and woken == ["a", "b"]
    bp.sent(4)
    assert bp.room() == 10
    assert bp.admit("c", wanted=30, ready=10) == 10 and woken == ["a", "b"] and bp.held() == 1, "room taken: held"
