"""Messages cut to the API's bounds, visibly, on a character boundary."""

from __future__ import annotations

import pytest

from daemonjob import defaults
from daemonjob.domain.rollout.condition import Condition, render, turned_true
from daemonjob.domain.shared.messages import condition_message, event_message, truncate


def test_a_message_that_fits_is_kept_whole() -> None:
    assert truncate("x" * 1024, 1024) == "x" * 1024
    assert event_message("short") == "short"


@pytest.mark.parametrize("text", ["x" * 5000, "é" * 3000, "a" + "\U0001f600" * 2000, "x" * 1_000_000])
def test_a_long_message_is_cut_to_the_bound_with_a_marker_saying_how_much(text: str) -> None:
    cut = event_message(text)
    size = len(cut.encode())
    assert size <= defaults.EVENT_MESSAGE_MAX_BYTES and size > defaults.EVENT_MESSAGE_MAX_BYTES - 8
    head, marker = cut.rsplit("... [", 1)
    assert text.startswith(head)  # never a broken character: the head decodes as the original's start
    assert marker == f"{len(text.encode()) - len(head.encode())} more bytes]"
    assert len(condition_message(text).encode()) <= defaults.CONDITION_MESSAGE_MAX_BYTES


def test_a_condition_keeps_its_cut_message_and_does_not_read_as_changed_each_pass() -> None:
    cond = Condition(True, "InvalidSpec", "spec.restartPolicy: Unsupported value: " + "A" * 1_000_000)
    rendered = render({}, "Stalled", cond, "2026-01-01T00:00:00Z", 1)
    assert len(rendered["message"].encode()) <= defaults.CONDITION_MESSAGE_MAX_BYTES
    assert rendered["message"].endswith("more bytes]")
    assert not turned_true({"Stalled": rendered}, "Stalled", cond, on_message=True)
