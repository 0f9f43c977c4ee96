"""The hub's side of a leafnode connection until its CONNECT is checked (ADR 0032):
the INFO a spoke expects (nats-server's leafnode INFO: a nonce, `leafnode_urls`,
`info_on_connect`, no compression), the auth timeout, the login, then the socket handed
to a `LeafConnection` bound to the login's account."""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Callable
from typing import Any, cast

from brook.leafnode import codec
from brook.leafnode.connection import LeafConnection
from brook.protocol.errors import AUTH_TIMEOUT, AUTH_VIOLATION, ProtocolError

log = logging.getLogger("brook.leafnode")

WRONG_PORT = "attempted to connect to leaf node port"

Login = Callable[[dict[str, Any]], LeafConnection | None]
"""CONNECT's fields -> a new connection bound to the login's account, or None: refused"""


class LeafAcceptor(asyncio.Protocol):
    def __init__(
        self,
        info: dict[str, Any],
        login: Login,
        auth_timeout_s: float,
        *,
        max_control_line: int,
        max_payload: int,
        tls: ssl.SSLContext | None = None,
        tls_timeout_s: float = 0.0,
        cid: int = 0,
    ) -> None:
        self._cid = cid
        self._tls = tls
        self._tls_timeout_s = tls_timeout_s
        self._info = info
        self._login = login
        self._parser = codec.LeafParser(
            self, max_control_line=max_control_line, max_payload=max_payload
        )
        self._conn: LeafConnection | None = None
        self._auth_timeout_s = auth_timeout_s
        self.transport: asyncio.Transport | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._upgrade: asyncio.Future[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement asyncio.Transport without subclassing it.
        self.transport = cast(asyncio.Transport, transport)
        self.transport.write(codec.info(self._info))
        loop = asyncio.get_running_loop()
        self._timer = loop.call_later(self._auth_timeout_s, self._refuse, AUTH_TIMEOUT)
        if self._tls is not None:  # nats-server: the spoke starts TLS after this INFO
            self._upgrade = asyncio.ensure_future(self._start_tls(self._tls))

    async def _start_tls(self, context: ssl.SSLContext) -> None:
        transport = self.transport
        if transport is None:
            return
        loop = asyncio.get_running_loop()
        try:
            upgraded = await loop.start_tls(
                transport,
                self,
                context,
                server_side=True,
                ssl_handshake_timeout=self._tls_timeout_s,
            )
        except (OSError, ssl.SSLError, TimeoutError) as exc:
            log.error("TLS handshake error from leafnode %s: %s", self._peer(), exc)
            transport.abort()
            self.transport = None
            return
        if self.transport is not None and upgraded is not None:
            self.transport = upgraded

    def connection_lost(self, exc: Exception | None) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self.transport = None

    def _refuse(self, text: str, *, logged: bool = False) -> None:
        self._parser.stop()
        if self.transport is not None:
            if not logged:
                log.error("Leafnode connection from %s refused: %s", self._peer(), text)
            self.transport.write(codec.err(text))
            self.transport.close()
            self.transport = None

    def _peer(self) -> str:
        peer = self.transport.get_extra_info("peername") if self.transport is not None else None
        return f"{peer[0]}:{peer[1]}" if peer else "?"

    def data_received(self, data: bytes) -> None:
        if self.transport is None:
            return
        try:
            self._parser.feed(data)
        except ProtocolError as exc:
            if self._conn is not None:  # after the CONNECT that logged in, in one read
                self._conn.protocol_error(exc)
            else:  # garbage before CONNECT: refused as nats-server does
                self._refuse(AUTH_VIOLATION)

    def on_msg(
        self,
        subject: bytes,
        reply: bytes | None,
        queues: tuple[bytes, ...],
        header: bytes | None,
        payload: bytes,
    ) -> None:
        self._refuse(AUTH_VIOLATION)

    def on_op(self, op: codec.LeafOp) -> None:
        if not isinstance(op, codec.Connect):
            # nats-server: nothing but CONNECT before the login (PING, LS+ included)
            self._refuse(AUTH_VIOLATION)
            return
        conn = self._login(op.fields)
        if conn is None:
            # nats-server's `authViolation`: its log line names whom CONNECT claimed
            log.error(
                "%s - lid:%d - authentication error - %s",
                self._peer(),
                self._cid,
                auth_user(op.fields),
            )
            self._refuse(AUTH_VIOLATION, logged=True)
            return
        if "lang" in op.fields:  # a client on the leafnode port, once logged in
            self._refuse(WRONG_PORT)
            return
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        transport, self.transport = self.transport, None
        assert transport is not None
        transport.set_protocol(conn)
        self._conn = conn
        conn.adopt(transport, self._parser, op.fields, self._info)  # the rest of the read too


def auth_user(fields: dict[str, Any]) -> str:
    """nats-server's `getAuthUser` of a CONNECT: its nkey, user, JWT or token."""
    for key, label in (("nkey", "Nkey"), ("user", "User")):
        value = fields.get(key)
        if isinstance(value, str) and value:
            return f'{label} "{value}"'
    if fields.get("jwt"):
        return 'JWT User "?"'
    if fields.get("auth_token"):
        return 'Token "[REDACTED]"'
    return 'User "N/A"'
