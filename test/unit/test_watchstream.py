"""The watch stream: events split across chunks, and the response released at the end."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator

import orjson
import pytest
import urllib3
from urllib3.exceptions import ProtocolError

from daemonjob.machinery.watchstream import WatchStream, _chunked_reader


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


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


@pytest.fixture
def watch_server() -> Iterator[Callable[[Callable[[socket.socket], None]], urllib3.HTTPConnectionPool]]:
    """A server answering one watch: a chunked head, then what the test writes."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    threads: list[threading.Thread] = []
    pools: list[urllib3.HTTPConnectionPool] = []

    def start(write: Callable[[socket.socket], None]) -> urllib3.HTTPConnectionPool:
        def run() -> None:
            conn, _ = listener.accept()
            with conn:
                data = b""
                while b"\r\n\r\n" not in data:
                    data += conn.recv(65536)
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
                try:
                    write(conn)
                except OSError:
                    pass

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        threads.append(thread)
        pool = urllib3.HTTPConnectionPool("127.0.0.1", listener.getsockname()[1])
        pools.append(pool)
        return pool

    yield start
    for pool in pools:
        pool.close()
    listener.close()
    for thread in threads:
        thread.join(5)


def open_watch(pool: urllib3.HTTPConnectionPool, read_timeout: float = 5) -> WatchStream:
    resp = pool.urlopen(
        "GET",
        "/api/v1/pods?watch=true",
        preload_content=False,
        retries=False,
        timeout=urllib3.Timeout(read=read_timeout),
    )
    return WatchStream(resp)


def test_chunked_events_are_read_several_to_a_read_and_a_line_cut_across_chunks_is_joined(watch_server):
    events = [orjson.dumps({"type": "ADDED", "object": {"metadata": {"name": f"p-{i}"}}}) + b"\n" for i in range(50)]
    cut = events[3][:10], events[3][10:]

    def write(conn: socket.socket) -> None:
        conn.sendall(b"".join(chunk(e) for e in events[:3]) + chunk(cut[0]))
        time.sleep(0.05)
        conn.sendall(chunk(cut[1]) + b"".join(chunk(e) for e in events[4:]) + b"0\r\n\r\n")

    stream = open_watch(watch_server(write))
    assert _chunked_reader(stream._resp) is not None  # read off the socket, not streamed by urllib3
    names = [e["object"]["metadata"]["name"] for e in stream]
    assert names == [f"p-{i}" for i in range(50)]
    assert stream.closed


def test_close_from_another_thread_ends_a_blocked_read(watch_server):
    stop = threading.Event()

    def write(conn: socket.socket) -> None:
        conn.sendall(chunk(b'{"type":"ADDED","object":{}}\n'))
        stop.wait(10)

    stream = open_watch(watch_server(write))
    seen: list[str] = []
    reader = threading.Thread(target=lambda: seen.extend(e["type"] for e in stream))
    reader.start()
    deadline = time.monotonic() + 5
    while not seen and time.monotonic() < deadline:
        time.sleep(0.01)
    stream.close()
    reader.join(5)
    stop.set()
    assert seen == ["ADDED"] and not reader.is_alive()


def test_broken_framing_is_a_protocol_error(watch_server):
    stream = open_watch(watch_server(lambda conn: conn.sendall(b"zz\r\nnot a chunk\r\n")))
    with pytest.raises(ProtocolError):
        list(stream)


def test_a_silent_server_is_a_timeout(watch_server):
    stop = threading.Event()
    stream = open_watch(watch_server(lambda conn: stop.wait(5)), read_timeout=0.3)
    with pytest.raises(OSError):
        list(stream)
    stop.set()
