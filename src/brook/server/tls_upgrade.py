"""A client connection's TLS (ADR 0024): the upgrade after the INFO, the first byte
sniffed under `allow_non_tls`, the peer checked once the handshake is done (the decisions
are `server/tls.py`'s; this is their place in a `ClientConnection`'s life)."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from brook.server.tls import TLS_HANDSHAKE_RECORD, PeerRefused, peer_session, sniff_tls

if TYPE_CHECKING:
    from brook.protocol.parser import ClientParser
    from brook.server.server import Server
    from brook.server.tls import CertificateNames, PeerCertificate
    from brook.server.websocket import WebSocketListener

log = logging.getLogger("brook.connection")


class ClientTLS(asyncio.Protocol):
    """`ClientConnection`'s TLS part (a mixin, ADR 0031)."""

    if TYPE_CHECKING:  # what it uses of `ClientConnection`, which sets all of it
        server: Server
        websocket: WebSocketListener | None
        cid: int
        parser: ClientParser
        transport: asyncio.Transport | None
        loop: asyncio.AbstractEventLoop
        closed: bool
        close_reason: str
        _tls_task: asyncio.Task[None] | None
        _tls_pending: bool
        tls: bool
        tls_version: str
        tls_cipher_suite: str
        peer_certificates: tuple[PeerCertificate, ...]
        certificate: CertificateNames | None

        def _start_session(self) -> None: ...
        def _flush(self) -> None: ...
        def _teardown(self) -> None: ...
        def _release(self) -> None: ...

    def _begin_tls(self) -> None:
        """Upgrade to TLS after the INFO (nats-server's order without handshake_first):
        the protocol gets no bytes until the handshake is done."""
        transport = self.transport
        if self.closed or transport is None or not self._tls_pending:
            return
        self._tls_pending = False
        transport.pause_reading()
        self._flush()
        self._tls_task = self.loop.create_task(self._handshake(transport))

    async def _handshake(self, transport: asyncio.Transport) -> None:
        tls = self.server.settings.tls
        assert self.server.tls_context is not None
        assert tls is not None
        try:
            upgraded = await self.loop.start_tls(
                transport,
                self,
                self.server.tls_context,
                server_side=True,
                ssl_handshake_timeout=tls.timeout_s,
            )
        except Exception as exc:  # SSLError, OSError, a timeout: each closes this client only
            # (a client that closed after its alert: an empty ConnectionResetError)
            self._tls_failed(f"TLS handshake error: {str(exc) or type(exc).__name__}")
            return
        self._tls_task = None
        if upgraded is None or self.closed:
            if upgraded is not None:
                upgraded.abort()
            self._release()
            return
        self.transport = upgraded
        self.tls = True
        self._tls_established(upgraded)

    def _tls_established(self, transport: asyncio.Transport) -> None:
        """After a handshake: the peer checked (server/tls.py `peer_session`), the
        protocol started. A WebSocket client's TLS settings are its listener's."""
        ws = self.websocket
        tls = self.server.settings.tls if ws is None else ws.tls
        assert tls is not None
        try:
            peer = peer_session(transport, tls, self.server.tls_map if ws is None else ws.tls_map)
        except PeerRefused as refused:
            self._tls_failed(f"TLS handshake error: {refused}")
            return
        self.tls_version, self.tls_cipher_suite = peer.version, peer.cipher_suite
        self.certificate = peer.certificate
        self.peer_certificates = peer.peer_certificates
        self._start_session()

    def _tls_failed(self, reason: str) -> None:
        # nats-server logs a client's handshake failures at error level, a probe's (plain
        # text, or a connection closed at once) at debug; Brook keeps them all at debug,
        # so that scanners cannot fill the log, and keeps the reason as the close reason.
        log.debug("cid=%d %s", self.cid, reason)
        transport = self.transport
        if not self.closed:
            self.close_reason = reason
            self.parser.paused = True
            self.closed = True
            self._teardown()
        if transport is not None:
            transport.abort()
        self._release()

    def _sniff_tls(self) -> None:
        """`allow_non_tls`: the client's first byte decides between TLS and plain text
        (server/tls.py `sniff_tls`)."""
        transport = self.transport
        if self.closed or transport is None or not self._tls_pending:
            return
        transport.pause_reading()
        self._flush()
        tls = self.server.settings.tls
        assert tls is not None

        def decide(first: bytes) -> None:
            if self.closed or self.transport is None:
                return
            if first == bytes([TLS_HANDSHAKE_RECORD]):
                self._begin_tls()
            else:
                self._tls_pending = False
                self.transport.resume_reading()
                self._start_session()

        sniff_tls(self.loop, transport.get_extra_info("socket"), tls.timeout_s, decide)
