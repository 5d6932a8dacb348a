from daemonjob.controller.runtime.expectations import Expectations


class Timer:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_unsatisfied_until_every_create_and_delete_is_observed() -> None:
    exp = Expectations(ttl=300, timer=Timer())
    assert exp.satisfied("ns/a")
    exp.expect_creations("ns/a", ["j1", "j2"])
    exp.expect_deletions("ns/a", ["old"])
    assert not exp.satisfied("ns/a") and exp.pending("ns/a") == (2, 1)
    exp.creation_observed("ns/a", "j1")
    exp.creation_observed("ns/a", "j2")
    assert not exp.satisfied("ns/a")
    exp.deletion_observed("ns/a", "old")
    assert exp.satisfied("ns/a")
    assert exp.satisfied("ns/other")


def test_deletes_expire_after_ttl_and_creates_do_not() -> None:
    """A create the API server accepted is in the watch's stream: expiring it would create it twice."""
    timer = Timer()
    exp = Expectations(ttl=300, timer=timer)
    exp.expect_deletions("ns/a", ["old"])
    timer.t = 299
    assert not exp.satisfied("ns/a")
    timer.t = 301
    assert exp.satisfied("ns/a")
    exp.expect_creations("ns/a", ["j1"])
    timer.t = 1000
    assert exp.pending("ns/a") == (1, 0) and exp.unseen_creates() == 1


def test_the_unseen_creates_count_every_daemonjob_and_say_when_they_fall() -> None:
    exp = Expectations(timer=Timer())
    fell: list[int] = []
    exp.on_seen = lambda: fell.append(exp.unseen_creates())
    exp.expect_creations("ns/a", ["j1", "j2"])
    exp.expect_creations("ns/b", ["j1"])
    exp.expect_creations("ns/a", ["j2"])  # raised again: counted once
    assert exp.unseen_creates() == 3
    exp.creation_observed("ns/a", "j1")
    exp.creation_observed("ns/a", "j1")  # an update of it: nothing more
    exp.forget("ns/b")
    assert fell == [2, 1] and exp.unseen_creates() == 1


def test_forget_drops_everything_for_the_key() -> None:
    exp = Expectations(timer=Timer())
    exp.expect_creations("ns/a", ["j1"])
    exp.forget("ns/a")
    assert exp.satisfied("ns/a")
