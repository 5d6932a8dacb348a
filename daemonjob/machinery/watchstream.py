"""A watch response of the API server, one JSON event a line.

The API server writes each event as one chunk of a chunked response. urllib3 and http.client
decode that framing a chunk at a time in Python (four calls and a readline per event); at the
rate of a rollout's Job events that cost a third of the watch's CPU. So the chunks are read
off the response's buffered socket reader as they come, several to a read, and httptools'
parser (llhttp, in C) takes the framing off; urllib3 still opened the connection and read
the head. A response that is not chunked (a proxy's, a fake's) is streamed by urllib3.
"""

from __future__ import annotations

import http.client
import io
from collections.abc import Iterator

import httptools
import orjson
import urllib3
from urllib3.exceptions import ProtocolError

from daemonjob.machinery.apierror import JSON

__all__ = ["WatchStream"]

_READ = 64 * 1024
# The head the parser is primed with: the real one was read by http.client, the body follows it.
_CHUNKED_HEAD = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"


class _Lines:
    """httptools' callbacks: the body's bytes cut into lines, and whether the response ended."""

    __slots__ = ("lines", "rest", "done")

    def __init__(self) -> None:
        self.lines: list[bytes] = []
        self.rest = b""
        self.done = False

    def on_body(self, data: bytes) -> None:
        if b"\n" not in data:
            self.rest += data
            return
        first, *more = data.split(b"\n")
        self.lines.append(self.rest + first)
        self.rest = more.pop()
        self.lines.extend(more)

    def on_message_complete(self) -> None:
        self.done = True


def _chunked_reader(resp: urllib3.BaseHTTPResponse) -> io.BufferedReader | None:
    """The socket reader under a chunked response not read from yet, else None."""
    inner = getattr(resp, "_fp", None)
    if not isinstance(inner, http.client.HTTPResponse) or not inner.chunked or inner.chunk_left is not None:
        return None
    fp = inner.fp
    return fp if isinstance(fp, io.BufferedReader) else None


class WatchStream:
    """A watch response read line by line; close() interrupts a blocked read."""

    def __init__(self, resp: urllib3.BaseHTTPResponse):
        self._resp = resp
        self.closed = False

    def __iter__(self) -> Iterator[JSON]:
        try:
            reader = _chunked_reader(self._resp)
            yield from self._parsed(reader) if reader is not None else self._streamed()
        finally:
            self.close()

    def _parsed(self, reader: io.BufferedReader) -> Iterator[JSON]:
        out = _Lines()
        parser = httptools.HttpResponseParser(out)
        parser.feed_data(_CHUNKED_HEAD)
        try:
            while not out.done:
                data = reader.read1(_READ)
                if not data:
                    break  # the server ended the watch, or close() shut the socket
                parser.feed_data(data)
                for line in out.lines:
                    if line.strip():
                        yield orjson.loads(line)
                out.lines.clear()
        except httptools.HttpParserError as exc:
            raise ProtocolError("the watch's chunked framing is broken", exc) from exc
        if out.done:  # its last chunk read here, not by http.client: the response ends as it would
            self._resp._fp.close()  # type: ignore[attr-defined]  # the http.client response _chunked_reader found
        if out.rest.strip():
            yield orjson.loads(out.rest)

    def _streamed(self) -> Iterator[JSON]:
        buf = b""
        for chunk in self._resp.stream(64 * 1024, decode_content=True):
            buf += chunk
            if b"\n" not in chunk:
                continue
            *lines, buf = buf.split(b"\n")
            for line in lines:
                if line.strip():
                    yield orjson.loads(line)
        if buf.strip():
            yield orjson.loads(buf)

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        try:
            self._resp.shutdown()
        except Exception:  # already closed by the server
            pass
        self._resp.release_conn()
