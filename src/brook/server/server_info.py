"""The INFO a `Server` sends each client (`ClientInfo`, a part of `Server`: ADR 0031):
nats-server's fields in its order, as the client port, a WebSocket listener, its TLS,
its authentication and JetStream make them (wire reference §1.3)."""

from __future__ import annotations

import platform
from typing import TYPE_CHECKING, Any

from brook import limits
from brook.version import __version__

if TYPE_CHECKING:
    from brook.config.settings import Settings
    from brook.server.connection import ClientConnection


class ClientInfo:
    """`Server`'s INFO part (a mixin, ADR 0031)."""

    if TYPE_CHECKING:  # what it uses of `Server`, which sets all of it
        settings: Settings
        server_id: str
        server_name: str
        host: str
        port: int

    def client_info(
        self, client: ClientConnection, *, connect_info: bool = False, lame_duck: bool = False
    ) -> dict[str, Any]:
        """The INFO fields nats-server sends, in its order (wire reference §1.3); with
        `lame_duck`, the one announcing lame-duck mode (`ldm`, no nonce: nats-server
        sends its shared INFO then)."""
        settings = self.settings
        info: dict[str, Any] = {
            "server_id": self.server_id,
            "server_name": self.server_name,
            "version": limits.NATS_COMPAT_VERSION,
            "proto": limits.PROTOCOL_VERSION,
            "go": f"brook{__version__}/python{platform.python_version()}",
            "host": self.host if client.websocket is None else client.websocket.host,
            "port": self.port if client.websocket is None else client.websocket.port,
            "headers": True,
        }
        ws = client.websocket
        authenticator = client.authenticator
        # nats-server tells WebSocket clients auth_required even with a no_auth_user.
        if authenticator.advertised if ws is None else authenticator.required:
            info["auth_required"] = True
        tls = settings.tls
        if ws is not None:
            # nats-server: required and available are the WebSocket port's TLS, tls_verify
            # is still the client port's.
            if ws.tls is not None:
                info["tls_required"] = True
            if tls is not None and tls.verify:
                info["tls_verify"] = True
            if ws.tls is not None:
                info["tls_available"] = True
        elif tls is not None:
            if client.tls_first or not settings.allow_non_tls:
                info["tls_required"] = True
            if tls.verify:
                info["tls_verify"] = True
            if settings.allow_non_tls:
                info["tls_available"] = True
        info["max_payload"] = settings.max_payload_bytes
        if settings.jetstream.enabled:
            info["jetstream"] = True
        info["client_id"] = client.cid
        info["client_ip"] = client.host
        if client.nonce and not connect_info and not lame_duck:
            info["nonce"] = client.nonce
        if settings.jetstream.domain:
            info["domain"] = settings.jetstream.domain
        if lame_duck:
            info["ldm"] = True
        if connect_info:
            info["connect_info"] = True
            info["remote_account"] = client.account.name
            if client.account.is_system:
                info["acc_is_sys"] = True
        info["api_lvl"] = limits.JETSTREAM_API_LEVEL  # with or without JetStream, as nats-server
        return info
