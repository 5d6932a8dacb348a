"""The watch stream: events split across chunks, and the pause after a read that waited."""

from __future__ import annotations

from collections.abc import Iterator

from daemonjob.machinery.watchstream import WatchStream


class FakeResponse:
    """Chunks as urllib3 streams them; `waits[i]` is how long reading chunk i took."""

    def __init__(self, chunks: list[bytes], waits: list[float], clock: list[float]):
        self.chunks, self.waits, self.clock = chunks, waits, clock
        self.shut = self.released = False

    def stream(self, amt: int, decode_content: bool) -> Iterator[bytes]:
        for chunk, wait in zip(self.chunks, self.waits, strict=True):
            self.clock[0] += wait
            yield chunk

    def shutdown(self) -> None:
        self.shut = True

    def release_conn(self) -> None:
        self.released = True


def stream_of(chunks: list[bytes], waits: list[float], coalesce: float = 0.02) -> tuple[WatchStream, list[float]]:
    clock = [0.0]
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        clock[0] += seconds

    resp = FakeResponse(chunks, waits, clock)
    return WatchStream(resp, coalesce=coalesce, clock=lambda: clock[0], sleep=sleep), slept  # type: ignore[arg-type]


def test_events_split_across_chunks_are_joined():
    stream, _ = stream_of([b'{"type":"ADDED",', b'"object":{}}\n{"type":"MOD', b'IFIED"}\n'], [0.0, 0.0, 0.0])
    assert [e["type"] for e in stream] == ["ADDED", "MODIFIED"]
    assert stream.closed


def test_a_read_that_waited_is_followed_by_a_pause_a_buffered_one_is_not():
    chunks = [b'{"type":"ADDED"}\n'] * 4
    stream, slept = stream_of(chunks, [0.5, 0.0, 0.0, 0.3])  # woken, then a burst from the buffer, woken
    assert len(list(stream)) == 4
    assert slept == [0.02, 0.02]


def test_no_pause_when_coalescing_is_off():
    stream, slept = stream_of([b'{"type":"ADDED"}\n'] * 3, [0.5, 0.5, 0.5], coalesce=0)
    assert len(list(stream)) == 3 and slept == []


def test_an_event_is_handed_over_before_the_pause():
    stream, slept = stream_of([b'{"type":"ADDED"}\n', b'{"type":"DELETED"}\n'], [0.5, 0.0])
    events = iter(stream)
    assert next(events)["type"] == "ADDED" and slept == []  # handled at once, the pause comes after
    assert next(events)["type"] == "DELETED" and slept == [0.02]
