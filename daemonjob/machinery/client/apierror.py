"""What the API server answers other than 2xx, as an exception carrying its Status."""

from __future__ import annotations

from typing import Any

import orjson

__all__ = ["JSON", "ApiError", "api_error"]

JSON = dict[str, Any]


class ApiError(Exception):
    """An API server answer other than 2xx, with the server's own Status message."""

    def __init__(self, status: int, reason: str, message: str, body: JSON | None = None):
        super().__init__(f"{status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message
        self.body = body or {}

    @property
    def not_found(self) -> bool:
        return self.status == 404

    @property
    def conflict(self) -> bool:
        return self.status == 409

    @property
    def already_exists(self) -> bool:
        return self.status == 409 and self.reason == "AlreadyExists"

    @property
    def gone(self) -> bool:
        return self.status == 410

    @property
    def invalid(self) -> bool:
        """Rejections that retrying cannot fix: the object itself is refused."""
        return self.status in (400, 403, 422) and self.reason != "Timeout"


def api_error(status: int, payload: bytes) -> ApiError:
    try:
        body = orjson.loads(payload) if payload else {}
    except orjson.JSONDecodeError:
        body = {"message": payload[:500].decode("utf-8", "replace")}
    if not isinstance(body, dict):
        body = {}
    return ApiError(status, body.get("reason", "") or "", body.get("message", "") or "", body)
