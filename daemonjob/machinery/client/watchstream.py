"""A watch response of the API server, one JSON event a line.

The API server sends a watch as chunks, one event a chunk. urllib3 reads them one by one
in Python (a line for the chunk's size, a read for its data, a generator step each), which
cost a Job watch as much as decoding its events. The body is read raw here, as much as the
socket holds at once, and httptools (llhttp, the parser the requests use: exchange.py)
takes the chunks apart; urllib3's own reading stays for a body it would decode otherwise.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any, Protocol

import httptools
import orjson
import urllib3
from urllib3.exceptions import ProtocolError

from daemonjob.machinery.client.apierror import JSON

__all__ = ["Decode", "WatchStream"]

Decode = Callable[[bytes], JSON]  # one event's line to its object

_READ = 64 * 1024  # bytes asked of the socket a read
_CHUNKED_HEAD = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"  # the parser starts at a head


class _Raw(Protocol):
    def read1(self, size: int = ..., /) -> bytes: ...


class _Chunks:
    """httptools' callbacks: the body's pieces, and whether the last chunk came."""

    __slots__ = ("parts", "done")

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.done = False

    def on_body(self, body: bytes) -> None:
        self.parts.append(body)

    def on_message_complete(self) -> None:
        self.done = True


def _raw_body(resp: Any) -> _Raw | None:
    """The socket's buffered reader behind a chunked, unencoded response, else None."""
    original = getattr(resp, "_fp", None)
    headers = getattr(resp, "headers", None)
    if headers is None or original is None or not getattr(resp, "chunked", False):
        return None
    if (headers.get("Content-Encoding") or "identity").lower() != "identity":
        return None
    raw = getattr(original, "fp", None)
    return raw if raw is not None and hasattr(raw, "read1") else None


class WatchStream:
    """A watch response read line by line; close() interrupts a blocked read. `decode` turns
    a line into its event (the generic JSON decode unless the watch knows its kind's shape)."""

    def __init__(self, resp: urllib3.BaseHTTPResponse, decode: Decode = orjson.loads):
        self._resp = resp
        self._decode = decode
        self.closed = False

    def __iter__(self) -> Iterator[JSON]:
        try:
            raw = _raw_body(self._resp)
            yield from _lines(self._read_raw(raw) if raw is not None else self._read_streamed(), self._decode)
        finally:
            self.close()

    def _read_streamed(self) -> Iterator[bytes]:
        yield from self._resp.stream(_READ, decode_content=True)

    def _read_raw(self, raw: _Raw) -> Iterator[bytes]:
        """The body's data as the socket gives it, chunk framing taken off; a connection that
        ends before the last chunk is a ProtocolError, as urllib3 says it, unless closed here."""
        chunks = _Chunks()
        parser = httptools.HttpResponseParser(chunks)
        parser.feed_data(_CHUNKED_HEAD)
        while not chunks.done:
            data = raw.read1(_READ)
            if not data:
                if self.closed:
                    return
                raise ProtocolError("Response ended prematurely")
            try:
                parser.feed_data(data)
            except httptools.HttpParserError as exc:
                raise ProtocolError("malformed chunked encoding in a watch", exc) from exc
            if chunks.parts:
                yield b"".join(chunks.parts) if len(chunks.parts) > 1 else chunks.parts[0]
                chunks.parts.clear()

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        try:
            self._resp.shutdown()
        except Exception:  # already closed by the server
            pass
        self._resp.release_conn()


def _lines(pieces: Iterable[bytes], decode: Decode) -> Iterator[JSON]:
    """Each line of the body decoded as it is whole."""
    buf = b""
    for piece in pieces:
        buf += piece
        if b"\n" not in piece:
            continue
        *lines, buf = buf.split(b"\n")
        for line in lines:
            if line.strip():
                yield decode(line)
    if buf.strip():
        yield decode(buf)
