"""A fault of a whole process: paused (SIGSTOP) for a block, then continued."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["paused"]


def _state(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


@contextmanager
def paused(pid: int, timeout: float = 5.0) -> Iterator[None]:
    """SIGSTOP the process for the block (a long GC pause, a frozen VM); SIGCONT always follows.

    Returns only once the kernel reports every thread stopped, so the caller's clock starts
    when the pause really does.
    """
    os.kill(pid, signal.SIGSTOP)
    try:
        deadline = time.monotonic() + timeout
        while _state(pid) not in ("T", "t"):
            if time.monotonic() > deadline:
                raise TimeoutError(f"pid {pid} did not stop")
            time.sleep(0.005)
        yield
    finally:
        try:
            os.kill(pid, signal.SIGCONT)
        except ProcessLookupError:
            pass
