"""Listening sockets bound the way nats-server (Go's `net.Listen`) binds them.

A wildcard host (`0.0.0.0`, `::` or empty, the default) gets one dual-stack IPv6 socket
with `IPV6_V6ONLY` off, so `nats://[::1]:4222` reaches the server as `nats://127.0.0.1:4222`
does, and one socket means one port even when the port is picked by the system (`-1`/`0`).
IPv4 peers then appear as `::ffff:a.b.c.d`; `peer_host` gives their plain address, as Go
does. Where the system has no IPv6 the wildcard falls back to IPv4 alone. Any other host is
resolved and bound as given (`127.0.0.1` stays IPv4-only, `::1` IPv6-only). The host a
client is told in INFO and the log stay as configured, as in nats-server.

Failures are `ListenError`, whose text names the address that could not be bound, so a
busy monitoring port is never reported as the client port.

A server's ports are bound first of all (`bind_ports`): `brook serve` binds them right
after reading its settings, before importing the server, aiohttp and uvloop and before
JetStream recovers its streams, and hands them to the event loop once it is ready. A
client that connects meanwhile waits in the listen backlog instead of being refused, as
it would be by a port that is not bound yet (a restarted server's reconnecting clients:
nats.py's `WebSocketTest.test_reconnect` allows 2 s).
"""

from __future__ import annotations

import errno
import ipaddress
import socket
from dataclasses import dataclass

from brook.config.settings import Settings

__all__ = [
    "WILDCARD_HOSTS",
    "BoundPorts",
    "ListenError",
    "bind_ports",
    "host_port",
    "open_listener",
    "peer_host",
]

WILDCARD_HOSTS = frozenset({"", "0.0.0.0", "::"})

# errors that mean "this system has no IPv6", as opposed to "the port is taken"
_NO_IPV6 = frozenset({errno.EAFNOSUPPORT, errno.EADDRNOTAVAIL, errno.EPROTONOSUPPORT})


class ListenError(OSError):
    """A listener could not be opened; the message names what and where."""


def host_port(host: str, port: int) -> str:
    """`host:port` as Go's `net.JoinHostPort` writes it: IPv6 hosts in brackets."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _dual_stack(port: int) -> socket.socket | None:
    """A `[::]:port` socket that takes IPv4 too, or None where IPv6 is unavailable."""
    if not socket.has_ipv6:
        return None
    try:
        sock = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    except OSError:
        return None
    try:
        sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("::", port))
    except OSError as exc:
        sock.close()
        if exc.errno in _NO_IPV6:
            return None
        raise
    return sock


def _bound(host: str, port: int) -> socket.socket:
    if host in WILDCARD_HOSTS:
        dual = _dual_stack(port)
        if dual is not None:
            return dual
        host = "0.0.0.0"
    family, kind, proto, _, address = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
    except OSError:
        sock.close()
        raise
    return sock


def open_listener(host: str, port: int, what: str, *, backlog: int = 1024) -> socket.socket:
    """A listening, non-blocking socket on `host:port` (port 0 or -1: any free port).

    `what` opens the error message (nats-server's wording: "Error listening on port",
    "can't listen to the monitor port") and is followed by the address and the cause.
    """
    port = max(port, 0)
    try:
        sock = _bound(host, port)
    except OSError as exc:
        cause = exc.strerror or str(exc)
        raise ListenError(f'{what}: {host_port(host, port)}, "{cause}"') from None
    sock.listen(backlog)
    sock.setblocking(False)
    return sock


@dataclass(slots=True)
class BoundPorts:
    """A server's listening sockets, bound and not yet served. Each is set to None when
    its listener takes it; `close` closes those a failed start never handed over."""

    monitoring: socket.socket | None  # http_port or https_port, when set
    websocket: socket.socket | None  # the `websocket {}` block's port, when set
    client: socket.socket | None

    def close(self) -> None:
        for sock in (self.monitoring, self.websocket, self.client):
            if sock is not None:
                sock.close()
        self.monitoring = self.websocket = self.client = None


def bind_ports(settings: Settings) -> BoundPorts:
    """Every port `settings` asks for, bound in nats-server's order (monitoring, then
    WebSocket, then clients: the first failure is the one nats-server names), each error
    in its words; on a failure those already bound are closed again."""
    bound = BoundPorts(None, None, None)
    try:
        monitor_port = settings.https_port or settings.http_port
        if monitor_port:
            bound.monitoring = open_listener(
                settings.http_host or settings.host,
                monitor_port,
                "Can't start monitoring: can't listen to the monitor port",
                backlog=100,
            )
        ws = settings.websocket
        if ws.port:
            bound.websocket = open_listener(
                ws.host, ws.port, "Unable to listen for websocket connections"
            )
        bound.client = open_listener(settings.host, settings.port, "Error listening on port")
    except BaseException:
        bound.close()
        raise
    return bound


def peer_host(address: str) -> str:
    """A peer's address as text; an IPv4 peer of a dual-stack socket loses its `::ffff:`."""
    if address.startswith("::ffff:"):
        mapped = ipaddress.IPv6Address(address).ipv4_mapped
        if mapped is not None:
            return str(mapped)
    return address
