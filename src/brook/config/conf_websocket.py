"""nats-server's `websocket {}` block: the listener's address, TLS (`conf_tls.py`), origins,
compression, cookies and its own credentials (ADR 0026)."""

from __future__ import annotations

from brook.config.conf_tls import read_tls
from brook.config.conf_values import (
    bad,
    block_entries,
    host_port,
    read_block,
    read_bool,
    read_duration,
    read_int,
    read_str,
)
from brook.config.settings import AuthSettings, ConfigError, Settings, User, WebSocketSettings

_WS_ORIGINS = ("allowed_origins", "allowed_origin", "allow_origins", "allow_origin", "origins")
_WS_KEYS = (
    *("port", "host", "net", "listen", "no_tls", "same_origin", "compression", "compress"),
    *("authorization", "authentication", "headers", "origin", "tls", "no_auth_user"),
    *("advertise", "handshake_timeout", "ping_interval"),
    *("jwt_cookie", "user_cookie", "pass_cookie", "token_cookie"),
    *_WS_ORIGINS,
)


def apply_websocket(s: Settings, where: str, v: object) -> None:
    """nats-server's `websocket {}` block (opts.go `parseWebsocket`)."""
    block = read_block(where, v)
    ws = WebSocketSettings()
    for key, at, value in block_entries(block, where, _WS_KEYS):
        if key == "port":
            ws.port = read_int(at, value)
        elif key in ("host", "net"):
            ws.host = read_str(at, value)
        elif key == "listen":
            host, ws.port = host_port(at, value)
            ws.host = host if host is not None else ws.host
        elif key == "no_tls":
            ws.no_tls = read_bool(at, value)
        elif key == "tls":  # nats-server reads it as the client port's (`parseTLS`)
            ws.tls = read_tls(at, value)
        elif key == "no_auth_user":
            ws.no_auth_user = read_str(at, value)
        elif key == "same_origin":
            ws.same_origin = read_bool(at, value)
        elif key in ("compression", "compress"):
            ws.compression = read_bool(at, value)
        elif key == "advertise":
            ws.advertise = read_str(at, value)
        elif key in ("handshake_timeout", "ping_interval"):
            setattr(ws, f"{key}_s", read_duration(at, value))
        elif key in ("jwt_cookie", "user_cookie", "pass_cookie", "token_cookie"):
            setattr(ws, key, read_str(at, value))
        elif key in ("authorization", "authentication"):
            _websocket_auth(ws, at, value)
        elif key == "headers":
            ws.headers = {
                str(name): read_str(f"{at}.{name}", header)
                for name, header in read_block(at, value).items()
            }
        elif isinstance(value, str):  # an origin, or a list of them
            ws.allowed_origins = [value]
        elif isinstance(value, list) and all(isinstance(o, str) for o in value):
            ws.allowed_origins = [str(o) for o in value]
        else:
            raise bad(at, "a string or an array of strings", value)
    s.websocket = ws


def _websocket_auth(ws: WebSocketSettings, where: str, v: object) -> None:
    """The listener's own credentials (nats-server's `parseSimpleAuth`): one user and
    password, or a token, and the time a client has to send them."""
    known = ("user", "username", "password", "pass", "token", "timeout")
    token = name = password = None
    for key, at, value in block_entries(read_block(where, v), where, known):
        if key == "token":
            token = read_str(at, value)
        elif key in ("user", "username"):
            name = read_str(at, value)
        elif key in ("password", "pass"):
            password = read_str(at, value)
        else:
            ws.auth_timeout_s = read_duration(at, value)
    if (name is None) != (password is None):
        raise ConfigError(f"{where}: user and password must be given together")
    if name is not None and token is not None:
        raise ConfigError(f"{where}: token and user cannot both be set")
    if name is not None or token is not None:
        users = [User(name, password)] if name is not None and password is not None else []
        ws.auth = AuthSettings(token=token, users=users)
