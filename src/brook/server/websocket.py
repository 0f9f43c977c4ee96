"""WebSocket clients: NATS inside WebSocket binary frames, as nats-server serves them.

aiohttp serves the HTTP upgrade and reads the frames: unmasking, fragments, control
frames (it answers PINGs and CLOSEs itself), permessage-deflate and its bound on a
message's size. Brook checks the upgrade request first, as nats-server's `wsUpgrade`
does, and refuses it with nats-server's status codes and bodies (`_refusal`).

Each WebSocket client is an ordinary `ClientConnection`: the payloads of its messages,
binary or text, are a byte stream fed to `data_received` (a NATS operation may span
messages, and a message may hold many), and what it writes goes through
`WebSocketTransport`, which frames each flush as one binary message, deflated when the
client negotiated compression and the flush is worth it, as nats-server's
`wsCollapsePtoNB` frames its pending buffers. Authentication, permissions, accounts, limits
and slow-consumer handling are the TCP clients' code, once (ADR 0026).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import dataclasses
import logging
import socket
import struct
import urllib.parse
import zlib
from typing import TYPE_CHECKING, Any

from aiohttp import WSMsgType, web

from brook import limits
from brook.config.settings import WebSocketSettings
from brook.server.auth import Authenticator
from brook.server.connection import ClientConnection
from brook.server.portsfile import reachable_urls
from brook.server.tls import server_context

if TYPE_CHECKING:
    from brook.server.server import Server

__all__ = ["WebSocketListener", "WebSocketTransport"]

log = logging.getLogger("brook.websocket")

_DATA = (WSMsgType.BINARY, WSMsgType.TEXT)
_FIN_BINARY = 0x82
_FIN_BINARY_DEFLATED = 0xC2  # RSV1: permessage-deflate
_FIN_CLOSE = 0x88
_DEFLATE_TAIL = b"\x00\x00\xff\xff"
_COMPRESS_THRESHOLD = 64  # nats-server's wsCompressThreshold: smaller flushes go as they are
_CLOSE_REPLY_WAIT_S = 1.0  # after a frame error, how long aiohttp waits for the client's CLOSE

_STATUS_TEXT = {400: "Bad Request", 403: "Forbidden", 404: "Not Found", 405: "Method Not Allowed"}

# Close frames Brook sends, by the reason a connection was closed for: nats-server's
# status code and its name of the closed state (`wsEnqueueCloseMessage`).
_CLOSE_STATUS: tuple[tuple[str, int, str], ...] = (
    ("authentication timeout", 1008, "Authentication Timeout"),
    ("authentication failure", 1008, "Authentication Failure"),
    ("operation before CONNECT", 1008, "Authentication Failure"),
    ("slow consumer: write deadline", 1008, "Slow Consumer (Write Deadline)"),
    ("slow consumer", 1008, "Slow Consumer (Pending Bytes)"),
    ("maximum connections", 1008, "Maximum Connections Exceeded"),
    ("protocol violation: payload too large", 1009, "Maximum Message Payload Exceeded"),
    ("protocol violation: control line too long", 1008, "Maximum Control Line Exceeded"),
    ("protocol violation", 1002, "Protocol Violation"),
    ("invalid client protocol", 1002, "Bad Client Protocol Version"),
    ("stale connection", 1001, "Stale Connection"),
    ("server shutdown", 1001, "Server Shutdown"),
    ("client closed", 1000, "Client Closed"),
)


def _frame_header(first: int, size: int) -> bytes:
    """A server frame's header (RFC 6455 §5.2): servers never mask."""
    if size < 126:
        return bytes((first, size))
    if size < 65536:
        return struct.pack("!BBH", first, 126, size)
    return struct.pack("!BBQ", first, 127, size)


def close_frame(reason: str) -> bytes:
    """The CLOSE frame nats-server sends when it closes a client for `reason`."""
    status, text = next(
        ((code, name) for prefix, code, name in _CLOSE_STATUS if reason.startswith(prefix)),
        (1011, "Internal Server Error"),
    )
    body = struct.pack("!H", status) + text.encode()
    return _frame_header(_FIN_CLOSE, len(body)) + body


class WebSocketTransport(asyncio.Transport):
    """The transport a WebSocket client's `ClientConnection` writes to.

    `write` frames what it is given as one binary message on the TCP transport aiohttp
    upgraded; sizes and flow control are the TCP transport's, so `max_pending` and the
    slow-consumer checks measure the same bytes as for a TCP client. `pause_reading`
    stops the message loop (`WebSocketListener._serve`) from handing on more messages.
    """

    def __init__(
        self, request: web.BaseRequest, client: ClientConnection, *, compress: bool
    ) -> None:
        super().__init__()
        assert request.transport is not None
        self._tcp = request.transport
        self._request = request
        self._client = client
        self._drained: asyncio.Task[None] | None = None
        # One deflater, fully flushed after each message: no context is carried from one
        # message to the next, as nats-server's server_no_context_takeover.
        self._deflate = zlib.compressobj(1, zlib.DEFLATED, -15) if compress else None
        self._resumed = asyncio.Event()
        self._resumed.set()

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if self._tcp.is_closing():
            return
        deflate = self._deflate
        if deflate is not None and len(data) > _COMPRESS_THRESHOLD:
            data = (deflate.compress(data) + deflate.flush(zlib.Z_FULL_FLUSH))[:-4]  # RFC 7692
            header = _frame_header(_FIN_BINARY_DEFLATED, len(data))
        else:
            header = _frame_header(_FIN_BINARY, len(data))
        if len(data) < limits.OUTPUT_FLUSH_EAGER_BYTES:
            self._tcp.write(header + bytes(data))
        else:
            self._tcp.writelines((header, data))
        if self._drained is None and self._request.protocol.writing_paused:
            # The socket stopped taking bytes: the TCP transport tells aiohttp's protocol,
            # this tells the connection (its write deadline), and again once it drains.
            self._client.pause_writing()
            self._drained = asyncio.ensure_future(self._until_drained())

    async def _until_drained(self) -> None:
        try:
            await self._request.writer.drain()
        except ConnectionError:
            return  # closed meanwhile: nothing to resume
        finally:
            self._drained = None
        if not self._tcp.is_closing():
            self._client.resume_writing()

    def get_write_buffer_size(self) -> int:
        return self._tcp.get_write_buffer_size()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self._tcp.get_extra_info(name, default)

    def is_closing(self) -> bool:
        return self._tcp.is_closing()

    def pause_reading(self) -> None:
        self._resumed.clear()

    def resume_reading(self) -> None:
        self._resumed.set()

    @property
    def reading(self) -> bool:
        return self._resumed.is_set()

    async def readable(self) -> None:
        """Return once the connection wants input again."""
        await self._resumed.wait()

    def close(self) -> None:
        """A CLOSE frame saying why (nats-server's status and words), then the socket,
        after what is buffered has been sent."""
        if not self._tcp.is_closing():
            self._tcp.write(close_frame(self._client.close_reason))
            self._tcp.close()
        self._resumed.set()

    def abort(self) -> None:
        self._tcp.abort()
        self._resumed.set()


class WebSocketListener:
    """The `websocket {}` listener: HTTP upgrades checked as nats-server checks them,
    then one `ClientConnection` per client, fed from aiohttp's message loop."""

    def __init__(self, server: Server, settings: WebSocketSettings) -> None:
        self._server = server
        self._settings = settings
        self.host = settings.host
        self.port = settings.port
        self.authenticator = self._authenticator()
        # wss:// (the block's `tls {}`): the handshake is the listener's, before any HTTP.
        self.tls = settings.tls
        # verify_and_map is the listener's own, and maps to the server's users (not to the
        # block's single user or token, which nats-server checks without a certificate).
        self.tls_map = self.tls is not None and self.tls.verify_and_map and settings.auth is None
        self.auth_timeout_s = settings.auth_timeout_s or server.settings.client_auth_timeout_s
        self.ping_interval_s = settings.ping_interval_s
        # CONNECT key -> the cookie that stands in for it when CONNECT has none.
        self._cookies = {
            key: name
            for key, name in (
                ("user", settings.user_cookie),
                ("pass", settings.pass_cookie),
                ("auth_token", settings.token_cookie),
                ("jwt", settings.jwt_cookie),  # operator mode only (settings.validate)
            )
            if name
        }
        self._origins = _allowed_origins(settings.allowed_origins)
        # nats-server's wsMaxMessageSize: room for several max_payload operations.
        self._max_message_bytes = min(
            server.settings.max_payload_bytes * 8, limits.MAX_PAYLOAD_BYTES_HARD
        )
        self._http = web.Server(self._serve, access_log=None)
        # With handshake_timeout: connections upgraded before their timer ran out (each
        # taken out by its timer).
        self._upgraded: set[object] = set()
        self._listener: asyncio.Server | None = None
        self._sock: socket.socket | None = None

    def _authenticator(self) -> Authenticator:
        """nats-server's override: the block's own credentials, or its no_auth_user (one
        of the server's users) instead of the server's; else the server's."""
        server, settings = self._server, self._settings
        maps = server.settings.maps_certificates
        if settings.auth is not None:
            return Authenticator(settings.auth, maps_certificates=maps)
        if settings.no_auth_user is not None:
            auth = dataclasses.replace(server.settings.auth, no_auth_user=settings.no_auth_user)
            return Authenticator(auth, maps_certificates=maps)
        return server.authenticator

    def reload_authenticator(self) -> None:
        """The server's users were reloaded (server/reload.py): this listener's logins
        follow them (its own block cannot change at a reload)."""
        self.authenticator = self._authenticator()

    def reachable_urls(self) -> list[str]:
        """The WebSocket URLs for the ports file."""
        assert self._sock is not None
        return reachable_urls("ws" if self.tls is None else "wss", self.host, self._sock)

    async def start(self, sock: socket.socket) -> None:
        """Serve on `sock`, the block's port bound beforehand (`listen.bind_ports`)."""
        self._sock = sock
        loop = asyncio.get_running_loop()
        tls = self.tls
        factory = self._http if not self._settings.handshake_timeout_s else self._timed_http
        if tls is None:
            self._listener = await loop.create_server(factory, sock=sock, backlog=1024)
        else:
            self._listener = await loop.create_server(
                factory,
                sock=sock,
                backlog=1024,
                ssl=server_context(tls),
                # nats-server's HTTP server bounds the TLS handshake by handshake_timeout.
                ssl_handshake_timeout=self._settings.handshake_timeout_s or tls.timeout_s,
            )
        self.port = sock.getsockname()[1]
        # nats-server's words and form (no brackets around an IPv6 host): launchers parse it.
        scheme = "ws" if tls is None else "wss"
        log.info("Listening for websocket clients on %s://%s:%d", scheme, self.host, self.port)
        if tls is None:
            log.warning("Websocket not configured with TLS. DO NOT USE IN PRODUCTION!")

    def _timed_http(self) -> asyncio.Protocol:
        """aiohttp's protocol for one connection, closed unless its upgrade is done within
        `handshake_timeout` from the accept, as nats-server's HTTP server's `ReadTimeout`
        closes it (a TLS handshake still running then ends by its own timeout, the same)."""
        handler = self._http()
        loop = asyncio.get_running_loop()
        timeout = self._settings.handshake_timeout_s
        loop.call_later(timeout, self._handshake_expired, handler)
        return handler

    def _handshake_expired(self, handler: asyncio.Protocol) -> None:
        if handler in self._upgraded:
            self._upgraded.discard(handler)
            return
        transport = getattr(handler, "transport", None)
        if transport is not None:
            transport.close()

    def stop_accepting(self) -> None:
        if self._listener is not None:
            self._listener.close()

    async def stop(self) -> None:
        self.stop_accepting()
        await self._http.shutdown(limits.SHUTDOWN_FLUSH_S)

    async def _serve(self, request: web.BaseRequest) -> web.StreamResponse:
        refusal = self._refusal(request)
        if refusal is not None:
            status, reason = refusal
            log.error("%s - websocket handshake error: %s", request.remote, reason)
            return _http_error(status)
        ws = web.WebSocketResponse(
            compress=self._settings.compression,
            max_msg_size=self._max_message_bytes,
            decode_text=False,
            timeout=_CLOSE_REPLY_WAIT_S,
        )
        ws.headers.update(self._settings.headers)  # the block's `headers`, as nats-server
        await ws.prepare(request)
        if self._settings.handshake_timeout_s:
            self._upgraded.add(request.protocol)
        tcp = request.transport
        if tcp is None:  # gone during the upgrade
            return ws
        if request.path.endswith("/leafnode"):
            # nats-server: "Not configured to accept leaf node connections", and a close.
            log.error("Not configured to accept leaf node connections")
            tcp.close()
            return ws
        client = ClientConnection(self._server, websocket=self)
        if self._cookies:
            cookies = request.cookies
            client.credential_cookies = {
                key: cookies[name] for key, name in self._cookies.items() if name in cookies
            }
        transport = WebSocketTransport(request, client, compress=ws.compress != 0)
        client.connection_made(transport)
        try:
            while not client.closed:
                msg = await ws.receive()
                if msg.type not in _DATA:
                    break  # CLOSE (answered by aiohttp), a frame error, or the socket gone
                data = msg.data  # unmasked in place by aiohttp: a bytearray, which the
                client.data_received(data if type(data) is bytes else bytes(data))  # parser's
                # bytes methods and dict keys (subjects) need as bytes
                if not transport.reading:
                    await transport.readable()
        finally:
            client.connection_lost(None)
        return ws

    def _refusal(self, request: web.BaseRequest) -> tuple[int, str] | None:
        """nats-server's `wsUpgrade` checks, in its order: (HTTP status, logged reason)."""
        headers = request.headers
        if request.path.endswith("/mqtt"):
            return 404, "mqtt websocket endpoint not enabled"
        if request.method != "GET":
            return 405, "request method must be GET"
        if not headers.get("Host"):  # not request.host, which falls back on this machine's
            return 400, "'Host' missing in request"
        if not _has_token(headers.getall("Upgrade", []), "websocket"):
            return 400, "invalid value for header 'Upgrade'"
        if not _has_token(headers.getall("Connection", []), "upgrade"):
            return 400, "invalid value for header 'Connection'"
        key = headers.get("Sec-WebSocket-Key", "")
        if not key:
            return 400, "key missing"
        try:
            if len(base64.b64decode(key, validate=True)) != 16:
                return 400, "invalid websocket key"
        except binascii.Error:
            return 400, "invalid websocket key"
        if not _has_token(headers.getall("Sec-WebSocket-Version", []), "13"):
            return 400, "invalid version"
        problem = self._origin_problem(request)
        if problem is not None:
            return 403, f"origin not allowed: {problem}"
        return None

    def _origin_problem(self, request: web.BaseRequest) -> str | None:
        """nats-server's `checkOrigin`: None when the Origin is acceptable (or absent)."""
        same = self._settings.same_origin
        if not same and not self._origins:
            return None
        origin = request.headers.get("Origin") or request.headers.get("Sec-WebSocket-Origin")
        if not origin:
            return None  # not a browser: the origin model says nothing (RFC 6455 §1.6)
        parts = urllib.parse.urlsplit(origin)
        if not parts.scheme or not parts.netloc:
            return f'parse "{origin}": invalid URI for request'
        host, port = _host_and_port(parts.scheme == "https", parts.netloc)
        if same:
            own_host, own_port = _host_and_port(False, request.headers.get("Host", ""))
            if (host, port) != (own_host, own_port) or parts.scheme.lower() != "http":
                return "not same origin"
        if self._origins and (parts.scheme, port) not in self._origins.get(host, ()):
            return "not in the allowed list"
        return None


def _http_error(status: int) -> web.Response:
    """Go's `http.Error` with nats-server's extra header (`wsReturnHTTPError`)."""
    return web.Response(
        status=status,
        body=f"{_STATUS_TEXT[status]}\n".encode(),
        headers={
            "Content-Type": "text/plain; charset=utf-8",
            "X-Content-Type-Options": "nosniff",
            "Sec-Websocket-Version": "13",
        },
    )


def _has_token(values: list[str], token: str) -> bool:
    """A comma-separated header holds `token` (any case), as nats-server's
    `wsHeaderContains` reads it."""
    return any(t.strip(" \t").lower() == token for v in values for t in v.split(","))


def _host_and_port(tls: bool, hostport: str) -> tuple[str, str]:
    """nats-server's `wsGetHostAndPort`: a missing port is the scheme's."""
    host, sep, port = hostport.rpartition(":")
    if not sep or host.endswith(":") or (host.startswith("[") and not host.endswith("]")):
        host, port = hostport, "443" if tls else "80"
    return host.removeprefix("[").removesuffix("]").lower(), port


def _allowed_origins(origins: list[str]) -> dict[str, set[tuple[str, str]]]:
    """host -> {(scheme, port)}, as nats-server's `wsSetOriginOptions` keeps them."""
    allowed: dict[str, set[tuple[str, str]]] = {}
    for origin in origins:
        parts = urllib.parse.urlsplit(origin)
        host, port = _host_and_port(parts.scheme == "https", parts.netloc)
        allowed.setdefault(host, set()).add((parts.scheme, port))
    return allowed
