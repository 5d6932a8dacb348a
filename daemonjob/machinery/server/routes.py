"""What a server (serving.py) answers with: its routes, its request filter, and what a POSTed body may cost."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

if TYPE_CHECKING:
    from daemonjob.machinery.server.requesthead import Headers

__all__ = ["Route", "PostRoute", "ClientPostRoute", "Filter", "Upload", "MAX_BODY", "metrics_route", "check_route"]

Route = Callable[[], tuple[int, str, bytes]]  # -> (HTTP code, content type, body)
PostRoute = Callable[[bytes], tuple[int, str, bytes]]  # request body -> (HTTP code, content type, body)
# (request body, the client's address) -> (HTTP code, content type, body): for a route whose
# allowances are per client (the webhook's SubjectAccessReviews)
ClientPostRoute = Callable[[bytes, str], tuple[int, str, bytes]]
# (method, path, headers) -> None to go on, else the answer (401, 403...) given instead of the route's
Filter = Callable[[str, str, "Headers"], "tuple[int, str, bytes] | None"]


MAX_BODY = 1024 * 1024  # bytes of a POSTed body, for a route that does not say


@dataclass(frozen=True, slots=True)
class Upload:
    """A POST route and what its body may cost: at most `max_bytes`, and handling it (parsing
    it, say) at most `memory_per_byte` bytes of memory per byte of body. With `with_client`,
    the handler is a ClientPostRoute, also given the client's address (its IP, no port)."""

    handler: PostRoute | ClientPostRoute
    max_bytes: int = MAX_BODY
    memory_per_byte: float = 1.0
    with_client: bool = False

    def cost(self, length: int) -> int:
        return math.ceil(length * self.memory_per_byte)


def metrics_route(registry: CollectorRegistry) -> Route:
    return lambda: (200, CONTENT_TYPE_LATEST, generate_latest(registry))


def check_route(check: Callable[[], str | None]) -> Route:
    """A probe: `check` returns None when healthy, else the reason."""

    def route() -> tuple[int, str, bytes]:
        problem = check()
        return (200, "text/plain", b"ok\n") if problem is None else (500, "text/plain", f"{problem}\n".encode())

    return route
