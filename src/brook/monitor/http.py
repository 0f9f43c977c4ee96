"""The monitoring HTTP server and router, a minimal HTTP/1.1 on plain asyncio streams.

Monitoring traffic is a few small GETs from dashboards and tools, so a hand-written
one-request-per-connection server is enough and keeps Brook free of a web framework.
Every response carries `Connection: close`; keep-alive requests are answered and then the
connection is closed, which HTTP/1.1 clients handle by reconnecting. Requests larger than
`HTTP_REQUEST_BYTES_MAX` get 431, and a client that never finishes its request (slowloris)
is cut off after `request_timeout_s`; `stop()` cancels whatever is still in flight, so
neither can hold up server shutdown.

It serves the endpoints nats-server's monitoring port offers, `/`, `/varz`, `/connz`,
`/subsz`, `/jsz`, `/accountz`, `/accstatz` and `/healthz` (a trailing slash is ignored),
to GET and HEAD, as JSON written the way Go writes it: UTF-8 rather than ASCII escapes ("664µs"),
indented except for the compact `/healthz`. The documents, which follow nats-server field
for field, are built by `brook.monitor.varz`, `.connz`, `.subsz`, `.jsz`, `.accountz`,
`.accstatz` and `.healthz`; this module routes requests to them, turns their `HttpError`s into
`{"code", "error"}` responses and a `BadParameter` (`brook.monitor.params`) into
nats-server's plain-text 400, and counts requests per path for `/varz`'s
`http_req_stats`. `/healthz` sets its own status and body (nats-server's `{"status",
"error"}`), so it returns a `Reply`. Everything it reports comes from the snapshots of a
`StatisticsFeed` (`brook.server.statistics`): monitoring never holds the server's objects.
"""

from __future__ import annotations

import asyncio
import dataclasses
import email.utils
import json
import logging
import socket
from collections.abc import Callable
from http import HTTPStatus
from typing import Any, NamedTuple
from urllib.parse import parse_qs, urlsplit

from brook import limits
from brook.monitor.accountz import build_accountz
from brook.monitor.accstatz import build_accstatz
from brook.monitor.connz import HttpError, build_connz
from brook.monitor.healthz import build_healthz
from brook.monitor.jsz import JszOptions, build_jsz
from brook.monitor.leafz import build_leafz
from brook.monitor.metrics import MetricsExporter
from brook.monitor.params import BadParameter, go_bool, text
from brook.monitor.subsz import SubszOptions, build_subsz
from brook.monitor.varz import CpuSampler, build_varz
from brook.server.listen import WILDCARD_HOSTS, host_port
from brook.server.portsfile import reachable_urls
from brook.server.statistics import StatisticsFeed
from brook.server.tls import server_context
from brook.version import __version__

__all__ = ["REQUEST_TIMEOUT_S", "HttpError", "MonitorServer", "Reply"]

log = logging.getLogger("brook.monitor")

# How long a client may take to send its whole request head, and to accept the response.
REQUEST_TIMEOUT_S = 5.0

_JSON = "application/json"
_TEXT = "text/plain; charset=utf-8"


class Reply(NamedTuple):
    """A response whose status and body the endpoint chose itself."""

    status: int
    body: bytes
    content_type: str = _JSON


_ENDPOINTS = {
    "/varz": "General server information and counters",
    "/connz": "Client connections (limit, offset, sort, subs, cid)",
    "/healthz": "Health probe",
    "/subsz": "Subscription indexes (subs, test, acc, offset, limit)",
    "/jsz": "JetStream (accounts, streams, consumers, config, acc, offset, limit)",
    "/accountz": "Accounts (acc)",
    "/accstatz": "Accounts' statistics (unused)",
    "/leafz": "Leafnode connections (subs, acc)",
    "/metrics": "Prometheus metrics (docs/monitoring.md)",
}


class MonitorServer:
    """The monitoring listener of one server (a `MonitorFactory`); started and stopped by it."""

    def __init__(self, feed: StatisticsFeed) -> None:
        self.feed = feed
        settings = feed.settings
        self.host: str = settings.http_host or settings.host
        # nats-server serves one of the two, over TLS with the client port's certificate
        # (no client certificate asked for) when https_port is set.
        self.secure = bool(settings.https_port)
        port = settings.https_port if self.secure else settings.http_port
        self.port: int = 0 if port == -1 else port
        self.request_timeout_s = REQUEST_TIMEOUT_S
        self.request_counts: dict[str, int] = {}
        self._listener: asyncio.Server | None = None
        self._active: dict[asyncio.Task[Any], asyncio.StreamWriter] = {}
        self._cpu = CpuSampler()
        self._sock: socket.socket | None = None
        self._routes: dict[str, Callable[[dict[str, list[str]]], dict[str, Any] | Reply]] = {
            "/": self.index,
            "/varz": self.varz,
            "/connz": self.connz,
            "/healthz": self.healthz,
            "/subsz": self.subsz,
            "/jsz": self.jsz,
            "/accountz": self.accountz,
            "/accstatz": self.accstatz,
            "/leafz": self.leafz,
            "/metrics": self.metrics,
        }
        self._metrics = MetricsExporter(
            feed, lambda: self.varz({}), per_consumer=settings.metrics_consumers
        )

    @property
    def url(self) -> str:
        host = "127.0.0.1" if self.host in WILDCARD_HOSTS else self.host
        return f"{self.scheme}://{host_port(host, self.port)}"

    @property
    def scheme(self) -> str:
        return "https" if self.secure else "http"

    def reachable_urls(self) -> list[str]:
        """The monitoring URLs for the ports file."""
        assert self._sock is not None
        return reachable_urls(self.scheme, self.host, self._sock)

    async def start(self, sock: socket.socket) -> None:
        """Serve on `sock`, the monitoring port bound beforehand (`listen.bind_ports`)."""
        self._sock = sock
        tls = self.feed.settings.tls
        if self.secure and tls is not None:
            self._listener = await asyncio.start_server(
                self._on_client,
                sock=self._sock,
                ssl=server_context(dataclasses.replace(tls, verify=False)),
                ssl_handshake_timeout=tls.timeout_s,
            )
        else:
            self._listener = await asyncio.start_server(self._on_client, sock=self._sock)
        self.port = int(self._sock.getsockname()[1])
        log.info("Starting %s monitor on %s", self.scheme, host_port(self.host, self.port))

    async def stop(self) -> None:
        """Close the listener and cut off every request still in progress."""
        listener, self._listener = self._listener, None
        if listener is None:
            return
        listener.close()
        # Abort rather than cancel: a handler then sees EOF and returns normally, whereas
        # Python 3.11's start_server logs every cancelled handler as an error.
        for writer in self._active.values():
            writer.transport.abort()
        if self._active:
            await asyncio.wait(list(self._active), timeout=1.0)
        try:
            await asyncio.wait_for(listener.wait_closed(), 1.0)
        except TimeoutError:
            log.warning("monitoring listener did not close in time")

    # ------------------------------------------------------------------ HTTP

    async def _on_client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._active[task] = writer
        response = b""
        try:
            async with asyncio.timeout(self.request_timeout_s):
                response = await self._respond(reader)
                writer.write(response)
                await writer.drain()
        except TimeoutError:
            if not response:  # stalled while sending the request: tell it why, best effort
                writer.write(self._response(408, {"error": "request timeout"}, False))
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            self._active.pop(task, None)
            writer.close()

    async def _respond(self, reader: asyncio.StreamReader) -> bytes:
        """Read one request head and build the whole response; b"" if the client left."""
        head = await self._read_head(reader)
        if head is None:
            return b""
        if not head:
            return self._response(431, {"error": "request too large"}, False)
        parts = head.decode("latin-1").split("\n", 1)[0].strip().split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
            return self._response(400, {"error": "malformed request line"}, False)
        method, target, _ = parts
        head_only = method == "HEAD"
        if method not in ("GET", "HEAD"):
            return self._response(405, {"error": f"method {method} not allowed"}, False)
        url = urlsplit(target)
        path = url.path.rstrip("/") or "/"
        handler = self._routes.get(path)
        if handler is None:
            return self._response(404, {"error": f"{url.path} not found"}, head_only)
        self.request_counts[path] = self.request_counts.get(path, 0) + 1
        try:
            body = handler(parse_qs(url.query, keep_blank_values=True))
        except HttpError as exc:
            return self._response(exc.args[0], {"error": exc.args[1]}, head_only)
        except BadParameter as exc:  # nats-server answers these in plain text
            return self._http(Reply(400, str(exc).encode(), _TEXT), head_only)
        except Exception:
            log.exception("monitoring endpoint %s failed", path)
            return self._response(500, {"error": "internal error"}, head_only)
        if isinstance(body, Reply):
            return self._http(body, head_only)
        return self._response(200, body, head_only)

    async def _read_head(self, reader: asyncio.StreamReader) -> bytes | None:
        """The request line and headers; b"" when over the size limit, None on EOF.

        The body, if any, is never read: GET and HEAD have none worth reading, and the
        connection is closed after the response anyway.
        """
        buf = b""
        while len(buf) <= limits.HTTP_REQUEST_BYTES_MAX:
            end = buf.find(b"\r\n\r\n")
            end = end if end >= 0 else buf.find(b"\n\n")
            if end >= 0:
                return buf[:end] if end <= limits.HTTP_REQUEST_BYTES_MAX else b""
            chunk = await reader.read(4096)
            if not chunk:
                return None
            buf += chunk
        return b""

    @classmethod
    def _response(cls, status: int, body: dict[str, Any], head_only: bool) -> bytes:
        if status >= 400:
            body = {"code": status, **body}
        # Go writes UTF-8 ("664µs"), not \u escapes.
        payload = json.dumps(body, ensure_ascii=False, indent=2).encode()
        return cls._http(Reply(status, payload), head_only)

    @staticmethod
    def _http(reply: Reply, head_only: bool) -> bytes:
        status, payload = reply.status, reply.body
        head = (
            f"HTTP/1.1 {status} {HTTPStatus(status).phrase}\r\n"
            f"Content-Type: {reply.content_type}\r\n"
            f"Content-Length: {len(payload)}\r\n"
            "Access-Control-Allow-Origin: *\r\n"
            f"Date: {email.utils.formatdate(usegmt=True)}\r\n"
            + ("Allow: GET, HEAD\r\n" if status == 405 else "")
            + "Connection: close\r\n\r\n"
        ).encode("latin-1")
        return head if head_only else head + payload

    # ------------------------------------------------------------------ endpoints

    def index(self, query: dict[str, list[str]]) -> dict[str, Any]:
        return {
            "server_id": self.feed.server_id,
            "version": limits.NATS_COMPAT_VERSION,
            "brook_version": __version__,
            "endpoints": {f"{self.url}{p}": text for p, text in _ENDPOINTS.items()},
        }

    def healthz(self, query: dict[str, list[str]]) -> Reply:
        status, body = build_healthz(self.feed.jetstream_assets(), query)
        return Reply(status, json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode())

    def varz(self, query: dict[str, list[str]]) -> dict[str, Any]:
        return build_varz(
            self.feed.statistics(),
            self.feed.settings,
            http_host=self.host,
            http_port=0 if self.secure else self.port,
            https_port=self.port if self.secure else 0,
            request_counts=self.request_counts,
            cpu=self._cpu,
        )

    def connz(self, query: dict[str, list[str]]) -> dict[str, Any]:
        return build_connz(self.feed, query)

    def subsz(self, query: dict[str, list[str]]) -> dict[str, Any]:
        return build_subsz(self.feed, SubszOptions.from_query(query))

    def jsz(self, query: dict[str, list[str]]) -> dict[str, Any]:
        return build_jsz(self.feed, JszOptions.from_query(query))

    def accountz(self, query: dict[str, list[str]]) -> dict[str, Any]:
        return build_accountz(self.feed, text(query, "acc"))

    def accstatz(self, query: dict[str, list[str]]) -> dict[str, Any]:
        return build_accstatz(self.feed, [], include_unused=go_bool(query, "unused"))

    def leafz(self, query: dict[str, list[str]]) -> dict[str, Any]:
        return build_leafz(self.feed, subs=go_bool(query, "subs"), account=text(query, "acc"))

    def metrics(self, query: dict[str, list[str]]) -> Reply:
        return Reply(200, *self._metrics.render())
