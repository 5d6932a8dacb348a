"""Argo CD's verdict on a DaemonJob: the shipped health check (manifests/argocd/health.lua) run
by a real Lua 5.1 interpreter, as Argo CD runs it.

Argo CD evaluates a health check with gopher-lua (Lua 5.1): the object as the global `obj`,
few libraries open (base and table; newer versions add a safe part of os; never string, so
strings have no methods), the chunk's return value read as the status. The runner below
gives the script base and table alone, so a script that leans on anything an Argo CD
lacks fails here too.
"""

from __future__ import annotations

import math
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .cluster import DATA_DIR

__all__ = ["HEALTH_SCRIPT", "STATUSES", "ArgoHealth", "health", "lua_literal"]

HEALTH_SCRIPT = DATA_DIR / "argocd-health.lua"  # manifests/argocd/health.lua
STATUSES = ("Healthy", "Progressing", "Degraded", "Suspended", "Missing", "Unknown")

# The base library as gopher-lua opens it (no io, os, string, debug, load of files).
_BASE = (
    "assert error ipairs next pairs pcall print rawequal rawget rawset select "
    "getmetatable setmetatable tonumber tostring type unpack xpcall _VERSION"
)

_RUNNER = """
local script = %(script)s
local chunk = assert(loadfile(script))
local env = {table = table, obj = %(obj)s}
for name in string.gmatch(%(base)s, "%%S+") do env[name] = _G[name] end
env._G = env
setfenv(chunk, env)
local write = io.write
local strings = getmetatable("")
local methods = strings.__index
strings.__index = nil -- gopher-lua without its string library: no ("..."):method()
local ok, hs = pcall(chunk)
strings.__index = methods
if not ok then
  write("error\\0", tostring(hs))
elseif type(hs) ~= "table" then
  write("error\\0", "the script returned a ", type(hs), ", not a table")
else
  write("ok\\0", tostring(hs.status), "\\0", tostring(hs.message))
end
"""


@dataclass(frozen=True, slots=True)
class ArgoHealth:
    status: str
    message: str


def _string(text: str) -> str:
    out = []
    for ch in text:
        code = ord(ch)
        if ch in '\\"':
            out.append("\\" + ch)
        elif code < 32 or code == 127:
            out.append(f"\\{code:03d}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def lua_literal(value: Any) -> str:
    """A Lua 5.1 expression for a JSON value, as Argo CD hands it over: objects and arrays as
    tables (arrays from index 1), numbers as numbers, null as nil. Strings are UTF-8 bytes."""
    if value is None:
        return "nil"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{value} has no JSON form")
        return repr(value)
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"[{_string(str(k))}] = {lua_literal(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "{" + ", ".join(lua_literal(v) for v in value) + "}"
    raise TypeError(f"not a JSON value: {type(value).__name__}")


def health(obj: Mapping[str, Any], lua: str = "lua5.1", script: Path = HEALTH_SCRIPT) -> ArgoHealth:
    """Argo CD's health of `obj` by `script`; fails (AssertionError) on a script error or a
    status Argo CD would not accept (it would show Unknown)."""
    program = _RUNNER % {
        "script": _string(str(script)),
        "obj": lua_literal(obj),
        "base": _string(_BASE),
    }
    proc = subprocess.run([lua, "-"], input=program.encode(), capture_output=True, timeout=30, check=False)
    if proc.returncode != 0:
        raise AssertionError(f"{lua} exited {proc.returncode}: {proc.stderr.decode(errors='replace')}")
    kind, *rest = proc.stdout.decode().split("\0")
    if kind != "ok":
        raise AssertionError(f"{script}: {rest[0] if rest else proc.stdout!r}")
    status, message = rest
    if status not in STATUSES:
        raise AssertionError(f"{script} returned status {status!r}, which Argo CD shows as Unknown")
    return ArgoHealth(status, "" if message == "nil" else message)
