"""The watch stream: events split across chunks, and the response released at the end."""

from __future__ import annotations

from collections.abc import Iterator

from daemonjob.machinery.watchstream import WatchStream


class FakeResponse:
    """Chunks as urllib3 streams them."""

    def __init__(self, chunks: list[bytes]):
        self.chunks = chunks
        self.shut = self.released = False

    def stream(self, amt: int, decode_content: bool) -> Iterator[bytes]:
        yield from self.chunks

    def shutdown(self) -> None:
        self.shut = True

    def release_conn(self) -> None:
        self.released = True


def test_events_split_across_chunks_are_joined_and_the_response_released():
    resp = FakeResponse([b'{"type":"ADDED",', b'"object":{}}\n{"type":"MOD', b'IFIED"}\n', b'{"type":"DELETED"}'])
    stream = WatchStream(resp)  # type: ignore[arg-type]
    assert [e["type"] for e in stream] == ["ADDED", "MODIFIED", "DELETED"]
    assert stream.closed and resp.shut and resp.released
