"""The `websocket {}` block's settings (ADR 0026) and nats-server's checks of them."""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from brook import limits
from brook.config.errors import ConfigError

if TYPE_CHECKING:
    from brook.config.settings_auth import AuthSettings
    from brook.config.settings_tls import TLSSettings


@dataclass(slots=True)
class WebSocketSettings:
    """nats-server's `websocket {}` block: a second listener whose clients speak NATS in
    WebSocket binary frames (server/websocket.py). Off while `port` is 0."""

    port: int = 0  # 0: no WebSocket listener; -1: any free port
    host: str = limits.DEFAULT_HOST  # nats-server's default, not the client port's host
    no_tls: bool = False  # nats-server refuses a listener without TLS unless this is set
    # `wss://`: the block's own `tls {}` (read as the client port's); it wins over no_tls.
    tls: TLSSettings | None = None
    same_origin: bool = False  # a browser's Origin must be the request's own host
    allowed_origins: list[str] = field(default_factory=list)  # else any Origin
    compression: bool = False  # permessage-deflate, when the client offers it
    headers: dict[str, str] = field(default_factory=dict)  # added to the upgrade's 101
    # The block's own `authorization { user, password | token, timeout }`: WebSocket
    # clients authenticate against it instead of the server's, as in nats-server.
    auth: AuthSettings | None = None
    auth_timeout_s: float | None = None  # None: the server's auth_timeout
    # A user of the server's users list whom WebSocket clients without credentials log in
    # as, instead of the server's no_auth_user (nats-server's override).
    no_auth_user: str | None = None
    # The host[:port] nats-server would gossip to a cluster as this listener's URL; a
    # single server only shows it in /varz, and checks it as nats-server does.
    advertise: str = ""
    handshake_timeout_s: float = 0.0  # the TLS handshake and the upgrade request; 0: none
    ping_interval_s: float | None = None  # NATS PINGs to WebSocket clients; None: the server's
    # Cookies of the upgrade request that stand in for CONNECT's user, pass, auth_token
    # and (operator mode only) jwt when CONNECT has none (browsers cannot set credentials
    # any other way).
    user_cookie: str = ""
    pass_cookie: str = ""
    token_cookie: str = ""
    jwt_cookie: str = ""

    def validate(self, server_auth: AuthSettings, *, operator_mode: bool = False) -> None:
        """nats-server's `validateWebsocketOptions`, in its words; `operator_mode`: the
        server trusts operators (JWT logins)."""
        if not -1 <= self.port <= 65535:
            raise ConfigError(f"websocket.port: {self.port} is not a TCP port")
        if self.port == 0:
            return
        if self.tls is None and not self.no_tls:
            raise ConfigError("websocket requires TLS configuration")
        for origin in self.allowed_origins:
            parts = urllib.parse.urlsplit(origin)
            if parts.scheme not in ("http", "https"):
                raise ConfigError(
                    f"unable to parse allowed origin {origin!r}: allowed origins must be "
                    "absolute URLs with http or https scheme"
                )
            if not parts.netloc:
                raise ConfigError(f"unable to parse allowed origin {origin!r}: host is required")
        for name in self.headers:
            low = name.lower()
            if low in ("host", "content-length", "connection", "upgrade", "nats-no-masking"):
                raise ConfigError(f'websocket: invalid header "{name}" not allowed')
            if low.startswith("sec-websocket-"):
                raise ConfigError(
                    f'websocket: invalid header "{name}", "Sec-WebSocket-" prefix not allowed'
                )
        if self.no_auth_user is not None:
            server_auth.check_no_auth_user(self.no_auth_user)
        if self.jwt_cookie and not operator_mode:
            raise ConfigError(
                "trusted operators or trusted keys configuration is required for JWT "
                f'authentication via cookie "{self.jwt_cookie}"'
            )
        if self.advertise:
            advertised_host_port(self.advertise, self.port)
        if self.auth is not None and server_auth.users:
            if self.auth.users:
                raise ConfigError(
                    "websocket authentication username not compatible with presence of users/nkeys"
                )
            if self.auth.token is not None:
                raise ConfigError(
                    "websocket authentication token not compatible with presence of users/nkeys"
                )


def advertised_host_port(text: str, default_port: int) -> tuple[str, int]:
    """An `advertise` value as nats-server's `parseHostPort` reads it: `host[:port]`, the
    port defaulting to the listener's; an error in its words."""
    text = text.strip()
    host, sep, port = text.rpartition(":")
    if not sep or host.endswith(":") or (host.startswith("[") and not host.endswith("]")):
        host, port = text, ""  # no port, or an IPv6 address without brackets
    host = host.removeprefix("[").removesuffix("]")
    if not port:
        return host, default_port
    if not port.isdigit() and not (port.startswith("-") and port[1:].isdigit()):
        raise ConfigError(
            f'Unable to get websocket connect URLs: strconv.Atoi: parsing "{port}": invalid syntax'
        )
    number = int(port)
    return host, default_port if number in (0, -1) else number
