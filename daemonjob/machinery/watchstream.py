"""A watch response of the API server, one JSON event a line."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import orjson
import urllib3

from daemonjob import defaults
from daemonjob.machinery.apierror import JSON

__all__ = ["WatchStream"]

WAITED = 0.001  # seconds: a read that took longer waited for the socket (the thread was woken)


class WatchStream:
    """A watch response read line by line; close() interrupts a blocked read.

    The API server writes each event as a chunk of its own, and a thread woken by the socket
    for each pays the wake-up every time: some 50 µs of CPU here, as much as decoding a Job.
    After a read that had to wait, the stream pauses `coalesce` seconds before the next, so
    the events of a burst are read from the socket's buffer, many for one wake-up; an event
    is handled as soon as it is read, and the next is at most `coalesce` later.
    """

    def __init__(
        self,
        resp: urllib3.BaseHTTPResponse,
        coalesce: float = defaults.WATCH_COALESCE,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ):
        self._resp = resp
        self.closed = False
        self.coalesce, self._clock, self._sleep = coalesce, clock, sleep

    def __iter__(self) -> Iterator[JSON]:
        buf = b""
        chunks = self._resp.stream(64 * 1024, decode_content=True)
        try:
            while True:
                started = self._clock()
                chunk = next(chunks, None)
                if chunk is None:
                    break
                waited = self._clock() - started > WAITED
                buf += chunk
                if b"\n" not in chunk:
                    continue
                *lines, buf = buf.split(b"\n")
                for line in lines:
                    if line.strip():
                        yield orjson.loads(line)
                if waited and self.coalesce > 0 and not self.closed:
                    self._sleep(self.coalesce)
            if buf.strip():
                yield orjson.loads(buf)
        finally:
            self.close()

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        try:
            self._resp.shutdown()
        except Exception:  # already closed by the server
            pass
        self._resp.release_conn()
