"""Listening sockets, named the way controller-runtime's flags name them."""

from __future__ import annotations

import socket

__all__ = ["bind_socket", "parse_bind_address"]


def parse_bind_address(address: str) -> tuple[str, int] | None:
    """controller-runtime's convention: ":8080" = every interface of both families, "0" = disabled.

    "[::1]:8080" and "0.0.0.0:8080" name one family; the host comes back without brackets
    ("" for every interface).
    """
    if address in ("0", ""):
        return None
    host, _, port = address.rpartition(":")
    if not port.isdigit() or (":" in host and not (host.startswith("[") and host.endswith("]"))):
        raise ValueError(f"bind address {address!r} is not [host]:port, [ipv6]:port or 0")
    return (host[1:-1] if host.startswith("[") else host, int(port))


def bind_socket(address: tuple[str, int]) -> socket.socket:
    """A listening socket; "" and "::" listen on both families where the host has IPv6 (as Go does)."""
    host, port = address
    if host in ("", "::"):
        if socket.has_ipv6 and socket.has_dualstack_ipv6():
            return socket.create_server(("::", port), family=socket.AF_INET6, dualstack_ipv6=True, backlog=128)
        if host == "":
            return socket.create_server(("0.0.0.0", port), backlog=128)
    family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
    return socket.create_server((host, port), family=family, backlog=128)
