"""A watch response of the API server, one JSON event a line."""

from __future__ import annotations

from collections.abc import Iterator

import orjson
import urllib3

from daemonjob.machinery.apierror import JSON

__all__ = ["WatchStream"]


class WatchStream:
    """A watch response read line by line; close() interrupts a blocked read."""

    def __init__(self, resp: urllib3.BaseHTTPResponse):
        self._resp = resp
        self.closed = False

    def __iter__(self) -> Iterator[JSON]:
        buf = b""
        try:
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
