"""retry_on_conflict: a write that lost a race is decided again on a fresh read, a few times,
a short jittered sleep apart; other errors and a conflict that persists reach the caller."""

from __future__ import annotations

import pytest

from daemonjob import defaults
from daemonjob.machinery.client.conflicts import DEFAULT_RETRY, Backoff, retry_on_conflict
from daemonjob.machinery.client.kube import ApiError


class Writer:
    """Reads a version, then writes it; the first `conflicts` writes lose a race."""

    def __init__(self, conflicts: int) -> None:
        self.conflicts, self.reads, self.version = conflicts, 0, 0

    def __call__(self) -> int:
        self.reads += 1
        seen = self.version
        if self.conflicts:
            self.conflicts -= 1
            self.version += 1  # someone else wrote in between
            raise ApiError(409, "Conflict", f"the object has been modified (attempt {self.reads})")
        return seen


class Sleeps(list[float]):
    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def test_a_conflict_is_read_again_and_the_write_made_on_the_fresh_read() -> None:
    writer, sleeps = Writer(conflicts=2), Sleeps()
    assert retry_on_conflict(writer, sleep=sleeps, rand=lambda: 0.5) == 2  # the version of the third read
    assert writer.reads == 3
    assert sleeps == [pytest.approx(0.0105)] * 2  # 10 ms, + half of its 10% jitter


def test_a_conflict_that_persists_raises_the_last_one_after_the_steps() -> None:
    writer, sleeps = Writer(conflicts=100), Sleeps()
    with pytest.raises(ApiError) as raised:
        retry_on_conflict(writer, sleep=sleeps)
    assert writer.reads == defaults.CONFLICT_RETRY_STEPS == DEFAULT_RETRY.steps
    assert len(sleeps) == writer.reads - 1  # no sleep after the last attempt
    assert raised.value.conflict and raised.value.message == f"the object has been modified (attempt {writer.reads})"


def test_given_words_the_caller_gives_up_in_them_with_the_last_conflict_as_cause() -> None:
    writer = Writer(conflicts=100)
    with pytest.raises(ApiError) as raised:
        retry_on_conflict(
            writer, Backoff(steps=3), gave_up="node a kept changing; its release is retried", sleep=Sleeps()
        )
    assert writer.reads == 3
    assert (raised.value.status, raised.value.reason) == (409, "Conflict")
    assert str(raised.value) == "409 Conflict: node a kept changing; its release is retried"
    assert isinstance(raised.value.__cause__, ApiError) and "attempt 3" in raised.value.__cause__.message


@pytest.mark.parametrize(
    "error",
    [ApiError(404, "NotFound", "gone"), ApiError(422, "Invalid", "no"), ApiError(500, "", "boom"), KeyError("x")],
)
def test_other_errors_pass_at_once(error: Exception) -> None:
    calls, sleeps = [], Sleeps()

    def fails() -> None:
        calls.append(1)
        raise error

    with pytest.raises(type(error)) as raised:
        retry_on_conflict(fails, gave_up="not these words", sleep=sleeps)
    assert raised.value is error and calls == [1] and sleeps == []


def test_one_step_is_one_attempt_and_no_sleep() -> None:
    writer, sleeps = Writer(conflicts=1), Sleeps()
    with pytest.raises(ApiError):
        retry_on_conflict(writer, Backoff(steps=1), sleep=sleeps)
    assert writer.reads == 1 and sleeps == []


def test_the_sleeps_grow_by_the_factor_and_the_jitter_only_lengthens_them() -> None:
    backoff = Backoff(steps=4, duration=0.01, factor=2.0, jitter=0.5)
    assert list(backoff.delays(lambda: 0.0)) == pytest.approx([0.01, 0.02, 0.04])
    assert list(backoff.delays(lambda: 1.0)) == pytest.approx([0.015, 0.03, 0.06])


def test_the_default_is_client_gos_default_retry_small_and_jittered() -> None:
    assert (DEFAULT_RETRY.steps, DEFAULT_RETRY.duration, DEFAULT_RETRY.factor) == (5, 0.01, 1.0)
    assert 0 < DEFAULT_RETRY.jitter <= 0.5
    assert sum(DEFAULT_RETRY.delays(lambda: 1.0)) < 0.1  # a persisting conflict costs well under 0.1 s


@pytest.mark.parametrize("bad", [{"steps": 0}, {"duration": -1.0}, {"factor": -1.0}, {"jitter": -0.1}])
def test_a_backoff_that_cannot_work_is_refused(bad: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        Backoff(**bad)  # type: ignore[arg-type]
