"""A request's head, read and judged before its body: the request line, the headers, the
body's declared length, and the error answers a server gives without reading further."""

from __future__ import annotations

import http.client
import io
from typing import Protocol

__all__ = ["BadRequest", "Headers", "MAX_HEAD", "REASONS", "declared_length", "parse_head"]


class Headers(Protocol):
    """A request's headers as a filter reads them: `http.client.HTTPMessage` (case-insensitive)."""

    def get(self, name: str, default: None = None, /) -> str | None: ...


REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    408: "Request Timeout",
    429: "Too Many Requests",
    411: "Length Required",
    413: "Content Too Large",
    422: "Unprocessable Content",
    431: "Request Header Fields Too Large",
    500: "Internal Server Error",
    503: "Service Unavailable",
    505: "HTTP Version Not Supported",
}
MAX_HEAD = 64 * 1024  # bytes of a request line and its headers


class BadRequest(Exception):
    def __init__(self, code: int, message: str, retry_after: int | None = None):
        super().__init__(message)
        self.code, self.retry_after = code, retry_after


def declared_length(headers: http.client.HTTPMessage) -> int | None:
    """The body's declared length: 0 without one, None when chunked (its length unknown);
    a malformed Content-Length is a 400."""
    if headers.get("Transfer-Encoding"):
        return None
    value = headers.get("Content-Length")
    if value is None:
        return 0
    try:
        return int(value)
    except ValueError:
        raise BadRequest(400, "malformed Content-Length") from None


def parse_head(head: bytes) -> tuple[str, str, http.client.HTTPMessage, bool]:
    """Request line and headers; (method, path, headers, keep-alive)."""
    line, _, rest = head.partition(b"\r\n")
    parts = line.decode("latin-1").split()
    if len(parts) != 3 or not parts[2].startswith("HTTP/"):
        raise BadRequest(400, "malformed request line")
    method, target, version = parts
    if version not in ("HTTP/1.0", "HTTP/1.1"):
        raise BadRequest(505, "HTTP/1.0 or HTTP/1.1 only")
    if method not in ("GET", "POST"):
        raise BadRequest(405, "GET or POST only")
    try:
        headers = http.client.parse_headers(io.BytesIO(rest))
    except http.client.HTTPException:
        raise BadRequest(431, "too many or too long headers") from None
    connection = (headers.get("Connection") or "").lower()
    keep = version == "HTTP/1.1" and "close" not in connection
    return method, target.split("?")[0], headers, keep
