"""The pass looks again when a rollout gate opens (the pause over, the window open), not at a resync."""

from __future__ import annotations

from daemonjob.testing.doubles.actbed import ActBed
from daemonjob.testing.doubles.builders import daemonjob


def test_the_pass_looks_again_when_the_pause_is_over(bed: ActBed) -> None:
    bed.add_nodes(2)
    bed.add_dj(daemonjob(maxParallel=1, rollout={"pauseBetweenNodes": "5m"}))
    bed.ctl.reconcile(bed.key)
    bed.sync()
    assert bed.created_names() and len(bed.created()) == 1
    bed.finish_jobs()
    bed.drain()
    bed.ctl.reconcile(bed.key)
    bed.sync()
    assert len(bed.created()) == 1
    assert bed.dj()["status"]["conditions"][2]["reason"] == "PausingBetweenNodes"
    bed.clock.step(290)
    bed.drain()
    bed.ctl.reconcile(bed.key)  # a pass before the pause is over (an event, say): nothing starts early
    assert len(bed.created()) == 1
    bed.drain()
    assert bed.ready_within(11)  # that pass looks again once the pause is over
    bed.drain()
    bed.ctl.reconcile(bed.key)
    assert len(bed.created()) == 2


def test_the_pass_looks_again_when_the_window_opens(bed: ActBed) -> None:
    bed.add_nodes(1)
    now = bed.clock.wall()
    opens = (now.minute + 10) % 60
    bed.add_dj(daemonjob(rollout={"window": {"schedule": f"{opens} * * * *", "duration": "5m"}}))
    bed.ctl.reconcile(bed.key)
    assert bed.created() == []
    bed.drain()
    wait = (60 - now.second) + 60 * 9  # to the start of that minute
    assert not bed.ready_within(wait - 5)  # no pass is scheduled before the window opens
    assert bed.ready_within(10)
    bed.drain()
    bed.ctl.reconcile(bed.key)
    assert len(bed.created()) == 1
