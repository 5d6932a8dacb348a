"""Child processes of the test bed: loopback ports for them, and how they end (with their
parent, or when stopped) so that nothing outlives a test run."""

from __future__ import annotations

import ctypes
import itertools
import os
import random
import re
import signal
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

__all__ = ["die_with_parent", "free_port", "stop_pid"]

PORT_SLICE = 2000  # ports each pytest-xdist worker (and the main process) hands out
PORT_SLICES = 8  # below the ephemeral range: 8 x 2000 ports fit under its usual start, 32768


def _ephemeral_start() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def _slice_index() -> int:
    match = re.fullmatch(r"gw(\d+)", os.environ.get("PYTEST_XDIST_WORKER", ""))
    return 0 if match is None else 1 + int(match.group(1)) % (PORT_SLICES - 1)


def _candidates() -> Iterator[int]:
    first = max(1024, _ephemeral_start() - PORT_SLICES * PORT_SLICE) + _slice_index() * PORT_SLICE
    start = random.randrange(PORT_SLICE)  # two runs on one machine start apart
    return itertools.cycle([first + (start + i) % PORT_SLICE for i in range(PORT_SLICE)])


_ports: Iterator[int] | None = None
_ports_lock = threading.Lock()


def free_port() -> int:
    """A loopback port for a child to listen on, free when handed out.

    Not bind(0)'s: that port comes from the ephemeral range, where any outgoing connection
    may take it as its source port before the child binds it ("Address already in use").
    These come from below that range, in a slice of their own per pytest-xdist worker, so
    neither the kernel nor a neighbouring worker hands the same port out meanwhile.
    """
    global _ports
    with _ports_lock:
        if _ports is None:
            _ports = _candidates()
        for _ in range(PORT_SLICE):
            port = next(_ports)
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", port))
                except OSError:
                    continue  # in use, or still in TIME_WAIT from an earlier child
                return port
    raise RuntimeError(f"no free port in this process's slice of {PORT_SLICE}")


def die_with_parent() -> None:
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def stop_pid(pid: int, timeout: float = 10.0) -> None:
    """SIGTERM, then SIGKILL after `timeout`; tolerant of processes already gone."""
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
            if done == pid:
                return
        except ChildProcessError:  # not our child: poll for its disappearance
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
        time.sleep(0.05)
    try:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    except (ProcessLookupError, ChildProcessError):
        pass
