"""The watch stream: events split across chunks, read raw or through urllib3, and the response
released at the end."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from urllib3.exceptions import ProtocolError

from daemonjob.machinery.client.watchstream import WatchStream


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


def test_each_line_goes_through_the_decode_the_watch_was_given():
    resp = FakeResponse([b'{"type":"ADDED"}\n{"type":', b'"MODIFIED"}\n'])
    lines: list[bytes] = []

    def decode(line: bytes) -> dict[str, str]:
        lines.append(line)
        return {"type": "seen"}

    assert [e["type"] for e in WatchStream(resp, decode)] == ["seen", "seen"]  # type: ignore[arg-type]
    assert lines == [b'{"type":"ADDED"}', b'{"type":"MODIFIED"}']


class RawReader:
    """The socket's buffered reader: each read1 gives the next piece, b"" once none is left."""

    def __init__(self, pieces: list[bytes]):
        self.pieces = list(pieces)

    def read1(self, size: int = -1) -> bytes:
        return self.pieces.pop(0) if self.pieces else b""


class Original:
    def __init__(self, fp: RawReader):
        self.fp = fp


class ChunkedResponse(FakeResponse):
    """A chunked response as urllib3 holds it: its body read raw from the socket's reader."""

    def __init__(self, pieces: list[bytes], encoding: str | None = None):
        super().__init__([])
        self._fp = Original(RawReader(pieces))
        self.chunked = True
        self.headers = {"Content-Encoding": encoding} if encoding else {}

    def stream(self, amt: int, decode_content: bool) -> Iterator[bytes]:
        raise AssertionError("a chunked, unencoded body is read raw")


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def test_a_chunked_body_is_read_raw_with_chunks_and_lines_split_anywhere():
    body = chunk(b'{"type":"ADDED","object":{}}\n') + chunk(b'{"type":"MOD') + chunk(b'IFIED"}\n') + b"0\r\n\r\n"
    # the socket's reads cut through chunk sizes, data and the last chunk alike
    pieces = [body[:5], body[5:40], body[40:41], body[41:-3], body[-3:]]
    resp = ChunkedResponse(pieces)
    stream = WatchStream(resp)  # type: ignore[arg-type]
    assert [e["type"] for e in stream] == ["ADDED", "MODIFIED"]
    assert stream.closed and resp.shut and resp.released


def test_a_raw_body_that_ends_before_its_last_chunk_is_a_protocol_error():
    resp = ChunkedResponse([chunk(b'{"type":"ADDED"}\n'), chunk(b'{"type":"MODIFIED"}\n')[:6]])
    events: list[str] = []
    with pytest.raises(ProtocolError):
        for event in WatchStream(resp):  # type: ignore[arg-type]
            events.append(event["type"])
    assert events == ["ADDED"] and resp.released


def test_malformed_chunk_framing_is_a_protocol_error():
    resp = ChunkedResponse([b"zz\r\nnot a chunk\r\n"])
    with pytest.raises(ProtocolError):
        list(WatchStream(resp))  # type: ignore[arg-type]


def test_a_stream_closed_while_reading_ends_without_an_error():
    resp = ChunkedResponse([chunk(b'{"type":"ADDED"}\n')])
    stream = WatchStream(resp)  # type: ignore[arg-type]
    seen = []
    for event in stream:
        seen.append(event["type"])
        stream.close()  # as the informer's stop() does from another thread; the reader then gives b""
    assert seen == ["ADDED"] and resp.shut


def test_an_encoded_body_is_left_to_urllib3():
    resp = ChunkedResponse([], encoding="gzip")
    resp.stream = FakeResponse([b'{"type":"ADDED"}\n']).stream  # type: ignore[method-assign]
    assert [e["type"] for e in WatchStream(resp)] == ["ADDED"]  # type: ignore[arg-type]
