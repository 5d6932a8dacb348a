"""glibc malloc settings for a Python process with many threads."""

from __future__ import annotations

import ctypes
import os

from daemonjob import defaults

_M_ARENA_MAX = -8  # mallopt parameter, from glibc's malloc.h


def limit_malloc_arenas(arenas: int = defaults.MALLOC_ARENAS) -> bool:
    """Cap glibc's malloc arenas, unless MALLOC_ARENA_MAX already sets them; True if capped.

    glibc gives threads that allocate at the same time arenas of their own, up to eight per
    core, and each keeps the memory freed in it. The writer pool and the watches decode
    responses on dozens of threads, which left some 30 MB spread over idle arenas at 5000
    nodes. Python's own allocator serves small objects, so few arenas cost little speed.
    Call it before starting threads. Elsewhere than glibc it does nothing.
    """
    if os.environ.get("MALLOC_ARENA_MAX"):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt  # the C library already loaded: no lookup at start-up
    except (OSError, AttributeError):
        return False
    return bool(mallopt(_M_ARENA_MAX, arenas))
