"""Creates sent together on one connection (`exchange_pipelined`): the client's pipelined
creates, apart from the client (kube.py) whose one-request path stays short.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

import orjson
import structlog
from urllib3.exceptions import ProtocolError

from daemonjob.machinery.client.apierror import api_error
from daemonjob.machinery.client.exchange import Answer, exchange_pipelined
from daemonjob.machinery.client.guardedhttp import send_guard
from daemonjob.machinery.client.paths import request_info

__all__ = ["Client", "create_together"]

log = structlog.get_logger("daemonjob.machinery.client.kube")


class Client(Protocol):
    """What the creates read of the client (kube.Kube) that sends them, and its `pipelining`,
    which they turn off when a server does not take creates sent together."""

    limiter: Any
    on_request: Callable[[str, str, int], None] | None
    timeout: float
    pipelining: bool
    _host_pool: Any
    _path_prefix: str

    def _headers(self, content_type: str | None) -> Any: ...


def create_together(
    kube: Client,
    path: str,
    bodies: Sequence[Mapping[str, Any]],
    request_timeout: float | None,
    guard: Callable[[], None] | None,
) -> list[Exception | None]:
    """Creates in one collection sent together on one connection (`exchange_pipelined`),
    each one's outcome in order: None when created (its answer not decoded: the watch
    brings the object), else its error, an ApiError as the server answered or a network
    failure. Each create is counted by the rate limiter and `on_request`, and `guard`
    runs as for one request, after the rate limiter's waits and again right before the
    write: its refusal is every create's error, nothing sent. A server that answers some
    and closes the connection on the rest (a proxy that does not take pipelined requests)
    gets them one at a time from then on."""
    pool = kube._host_pool
    assert pool is not None  # without a pool of the host's own, the client sends them one at a time
    data = [orjson.dumps(body if type(body) is dict else dict(body)) for body in bodies]
    if kube.limiter is not None:
        for _ in data:
            kube.limiter.accept()
    if guard is not None:
        try:
            guard()
        except Exception as exc:  # not sent, so not counted: as one request's
            return [exc] * len(data)
    answers: list[Answer | Exception]
    try:
        send_guard.fn = guard
        seconds = kube.timeout if request_timeout is None else request_timeout
        answers = exchange_pipelined(
            pool,
            "POST",
            kube._path_prefix + path,
            data,
            kube._headers("application/json"),
            seconds,
            successes=False,  # a created object comes back through the watch
        )
    except Exception as exc:  # before anything was sent
        answers = [exc] * len(data)
    finally:
        send_guard.fn = None
    if kube.pipelining and _cut_short(answers):
        kube.pipelining = False
        log.warning(
            "the API server closed a connection on creates sent together; sending them one at a time",
            answered=sum(1 for a in answers if not isinstance(a, Exception)),
            sent=len(answers),
        )
    verb, resource = request_info("POST", path)
    out: list[Exception | None] = []
    for answer in answers:
        code = 0 if isinstance(answer, Exception) else answer[0]
        if kube.on_request is not None:
            kube.on_request(verb, resource, code)
        if isinstance(answer, Exception):
            out.append(answer)
        else:
            out.append(None if 200 <= code < 300 else api_error(code, answer[1]))
    return out


def _cut_short(answers: list[Answer | Exception]) -> bool:
    """Some answered, then the connection closed on the rest (a timeout is a slow server, not this)."""
    return not isinstance(answers[0], Exception) and isinstance(answers[-1], ProtocolError)
