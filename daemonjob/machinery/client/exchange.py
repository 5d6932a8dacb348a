"""One request and its whole answer on a pooled urllib3 connection, the answer parsed by httptools.

http.client's side of a request costs more CPU than the exchange it wraps: its putheader
checks each header through two regular expressions and urllib3's override of it, and its
response parses the head with the email package (51 µs a response). At thousands of Job
creates a rollout is bound by the controller's CPU, so requests whose answer is read whole
take this way: the request's head is written here in one piece with its body, and the answer
is read off the socket into httptools' parser (llhttp, the parser of Node.js). urllib3 still
opens, verifies and pools the connections, and failures keep urllib3's exception types, as
urlopen raises them without retries: callers and the kubectl plugin tell a network failure by them.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from typing import cast

import httptools
import urllib3
import urllib3.connection
from urllib3.exceptions import HTTPError, ProtocolError, ReadTimeoutError, SSLError

__all__ = ["Answer", "exchange", "exchange_pipelined"]

Answer = tuple[int, bytes]  # HTTP status, the whole body

PAGE_READ = 256 * 1024  # bytes asked of the socket a read: a page of a list comes in a few
# A write's answer is one object: a read of 256 KB would allocate that much to take a few KB,
# and creates sent together keep 32 threads waiting in such reads at once.
ANSWER_READ = 32 * 1024
_BODY_EXPECTED = frozenset({"POST", "PUT", "PATCH"})  # sent with Content-Length: 0 when bodiless, as http.client


def _host(conn: urllib3.connection.HTTPConnection) -> str:
    host = f"[{conn.host}]" if ":" in conn.host else conn.host
    return host if conn.port in (None, conn.default_port) else f"{host}:{conn.port}"


def request_head(method: str, url: str, host: str, headers: Mapping[str, str], length: int | None) -> bytes:
    """The request line and headers, as http.client writes them (Host, identity encoding, a
    Content-Length where a body is sent or expected); a CR or LF in a value is refused."""
    lines = [f"{method} {url} HTTP/1.1", f"Host: {host}", "Accept-Encoding: identity"]
    for name, value in headers.items():
        if "\r" in value or "\n" in value or "\r" in name or "\n" in name:
            raise ValueError(f"invalid header {name!r}: a line break in a name or value")
        lines.append(f"{name}: {value}")
    if length is not None or method in _BODY_EXPECTED:
        lines.append(f"Content-Length: {length or 0}")
    lines.append("\r\n")
    return "\r\n".join(lines).encode("latin-1")


class _Answers:
    """httptools' callbacks over the answers that follow one another on a connection: each
    one's status and body as it completes, and whether the connection stays open after it."""

    __slots__ = ("parser", "done", "parts", "status", "keep", "framed", "headed", "successes")

    def __init__(self, successes: bool) -> None:
        self.successes = successes  # keep the bodies of 2xx answers too
        self.parser: httptools.HttpResponseParser | None = httptools.HttpResponseParser(self)
        self.done: list[Answer] = []
        self.parts: list[bytes] = []
        self.status = 0
        self.keep = True  # the connection may carry another request (read with the head, as llhttp's users do)
        self.framed = False  # a Content-Length or chunks: else the body ends when the server closes
        self.headed = False

    def on_message_begin(self) -> None:
        self.parts, self.framed, self.headed = [], False, False

    def on_header(self, name: bytes, _value: bytes) -> None:
        if name.lower() in (b"content-length", b"transfer-encoding"):
            self.framed = True

    def on_headers_complete(self) -> None:
        assert self.parser is not None
        self.headed = True
        self.status = self.parser.get_status_code()
        self.keep = self.parser.should_keep_alive()

    def on_body(self, body: bytes) -> None:
        if self.successes or not 200 <= self.status < 300:
            self.parts.append(body)

    def on_message_complete(self) -> None:
        self.done.append((self.status, b"".join(self.parts)))
        self.headed = False


def exchange(
    pool: urllib3.HTTPConnectionPool,
    method: str,
    url: str,
    body: bytes | None,
    headers: Mapping[str, str],
    timeout: float,
    read_size: int = PAGE_READ,
) -> Answer:
    """Send one request and read its answer whole; `timeout` bounds the connect and each
    read, `read_size` the bytes asked of the socket a read. The connection goes back to the
    pool unless the answer or a failure ended it."""
    answers, failure = _exchange(pool, method, url, [body], headers, timeout, read_size, successes=True)
    if failure is not None:
        raise failure
    return answers[0]


def exchange_pipelined(
    pool: urllib3.HTTPConnectionPool,
    method: str,
    url: str,
    bodies: list[bytes],
    headers: Mapping[str, str],
    timeout: float,
    successes: bool = True,
) -> list[Answer | Exception]:
    """Send several requests to one URL on one connection in one write (HTTP/1.1 pipelining)
    and read their answers in order; `timeout` bounds the connect and each read. Without
    `successes` a 2xx answer's body is read past, not kept (b"").

    A server answers pipelined requests one after another, as it reads them. Each request
    costs the client a fraction of its own exchange: one send and a few reads for all,
    where each alone takes a send, reads and a wake-up of the thread. A failure before the
    write raises (nothing was sent); a failure after it, or a connection the server closes,
    is the error of each request not answered yet, whose outcome is unknown, as a single
    request's would be."""
    answers, failure = _exchange(pool, method, url, list(bodies), headers, timeout, ANSWER_READ, successes)
    results: list[Answer | Exception] = list(answers)
    if len(results) < len(bodies):
        lost = failure if isinstance(failure, Exception) else _closed()
        results.extend([lost] * (len(bodies) - len(results)))
    return results


def _exchange(
    pool: urllib3.HTTPConnectionPool,
    method: str,
    url: str,
    bodies: list[bytes | None],
    headers: Mapping[str, str],
    timeout: float,
    read_size: int,
    successes: bool,
) -> tuple[list[Answer], BaseException | None]:
    """The requests written in one send, and the answers that came whole, in order, with what
    ended the reading early (None: every answer came). A failure before the write raises."""
    # The pool's own take and give back (private; urlopen uses them): its connections are
    # urllib3's HTTPConnection, an http.client.HTTPConnection.
    conn = cast(urllib3.connection.HTTPConnection, pool._get_conn())
    try:
        conn.timeout = timeout
        pool._validate_conn(conn)  # connects (TLS) a new connection first, as urlopen
        if conn.sock is None:
            conn.connect()  # a plain-HTTP pool connects when first used
        assert conn.sock is not None
        conn.sock.settimeout(timeout)
        host = _host(conn)
        heads = [request_head(method, url, host, headers, None if b is None else len(b)) + (b or b"") for b in bodies]
        conn.send(b"".join(heads))  # the connection's send: the write guard runs first
    except BaseException as exc:  # nothing was sent, or not all of it: the connection goes
        conn.close()
        pool._put_conn(conn)
        raised = _failure(exc, pool, url, timeout)
        if raised is exc:
            raise
        raise raised from exc
    answers = _Answers(successes)
    failure: BaseException | None = None
    reusable = False
    try:
        failure = _read_all(conn, answers, len(bodies), read_size)
        reusable = failure is None and answers.keep
    except (OSError, httptools.HttpParserError) as exc:
        failure = _failure(exc, pool, url, timeout)
        failure.__cause__ = exc
    finally:
        answers.parser = None  # the parser holds the answers' callbacks: no cycle left for the collector
        if not reusable:
            conn.close()
        pool._put_conn(conn)
    return answers.done[: len(bodies)], failure


def _closed() -> ProtocolError:
    return ProtocolError("Connection aborted.", ConnectionResetError("the server closed the connection"))


def _failure(exc: BaseException, pool: urllib3.HTTPConnectionPool, url: str, timeout: float) -> BaseException:
    """An exchange's failure as urlopen raises it without retries (urllib3's types), so callers
    tell a network failure by them; anything else (a guard's refusal, a bad header) as it is."""
    if isinstance(exc, HTTPError):
        return exc
    if isinstance(exc, TimeoutError):
        return ReadTimeoutError(pool, url, f"Read timed out. (read timeout={timeout})")
    if isinstance(exc, ssl.SSLError):
        return SSLError(exc)
    if isinstance(exc, (OSError, httptools.HttpParserError)):
        return ProtocolError("Connection aborted.", exc)
    return exc


def _read_all(
    conn: urllib3.connection.HTTPConnection, answers: _Answers, count: int, read_size: int
) -> Exception | None:
    """Feeds the socket's bytes to the parser until `count` answers are whole, or the server
    closes the connection (an answer without framing ends there); what ended it early, if
    something did."""
    parser, sock = answers.parser, conn.sock
    assert parser is not None and sock is not None
    while len(answers.done) < count:
        if answers.done and not answers.keep:
            return _closed()
        data = sock.recv(read_size)
        if not data:
            if answers.headed and not answers.framed:
                answers.done.append((answers.status, b"".join(answers.parts)))  # ended by the close
                answers.keep = False
            return _closed() if len(answers.done) < count else None
        parser.feed_data(data)
    return None
