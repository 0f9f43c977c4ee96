"""The monitoring HTTP server and router, served by aiohttp (ADR 0039).

aiohttp's low-level server (the same stack as the WebSocket listener) speaks HTTP/1.1 with
keep-alive, on the socket the server bound beforehand, plain or over TLS (`https_port`,
with the client port's certificate and no client certificate asked for, as nats-server).
Its limits are Brook's named ones (`brook.limits`): a request line or header line longer
than `HTTP_REQUEST_BYTES_MAX`, or more than `HTTP_HEADERS_MAX` header lines, get 431 (Go's
answer to an oversized head); a connection that has not completed a request head within
`HTTP_REQUEST_TIMEOUT_S` of connecting or of its previous answer is closed without one
(nats-server's `ReadHeaderTimeout`), and so is one that does not take its answer within
that long; a request body is never read, and the connection that sent one is closed after
its answer. An answer of `HTTP_GZIP_MIN_BYTES` or more is gzipped for a client that asks
for it, which nats-server never does (the ADR says why). `stop()` closes every connection,
so no client can hold up shutdown.

It serves the endpoints nats-server's monitoring port offers, `/`, `/varz`, `/connz`,
`/routez`, `/gatewayz`, `/leafz`, `/subsz` (and its alias `/subscriptionsz`), `/jsz`,
`/accountz`, `/accstatz` and `/healthz` (a trailing slash is ignored), to GET and HEAD, as
JSON written the way Go writes it: UTF-8 rather than ASCII escapes ("664µs"), indented
except for the compact `/healthz`. The documents, which follow nats-server field for field,
are built by `brook.monitor.varz`, `.connz`, `.subsz`, `.jsz`, `.accountz`, `.accstatz`,
`.leafz`, `.clusterz` and `.healthz`; this module routes requests to them (`_routes`: one
entry per path), turns their `HttpError`s into `{"code", "error"}` responses and a
`BadParameter` (`brook.monitor.params`) into nats-server's plain-text 400, and counts
requests per path for `/varz`'s `http_req_stats`. An endpoint that sets its own status,
body or content type (`/healthz`) returns a `Reply`. Everything it reports comes from the
snapshots of a `StatisticsFeed` (`brook.server.statistics`): monitoring never holds the
server's objects.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import socket
from collections.abc import Callable
from http import HTTPStatus
from typing import Any, NamedTuple

from aiohttp import hdrs, web
from aiohttp.http_exceptions import BadHttpMessage, LineTooLong
from multidict import MultiMapping

from brook import limits
from brook.monitor.accountz import build_accountz
from brook.monitor.accstatz import build_accstatz
from brook.monitor.clusterz import build_gatewayz, build_routez
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

__all__ = ["HttpError", "MonitorServer", "Reply"]

log = logging.getLogger("brook.monitor")

_JSON = "application/json"
_TEXT = "text/plain; charset=utf-8"

Query = dict[str, list[str]]


class Reply(NamedTuple):
    """A response whose status, body and content type the endpoint chose itself."""

    status: int
    body: bytes
    content_type: str = _JSON


Endpoint = Callable[[Query], dict[str, Any] | Reply]

_ENDPOINTS = {
    "/varz": "General server information and counters",
    "/connz": "Connections (limit, offset, sort, subs, auth, cid, state, acc, user)",
    "/routez": "Route connections (none: Brook has no cluster)",
    "/gatewayz": "Gateway connections (none: Brook has no gateways)",
    "/leafz": "Leafnode connections (subs, acc)",
    "/subsz": "Subscription indexes (subs, test, acc, offset, limit)",
    "/accountz": "Accounts (acc)",
    "/accstatz": "Accounts' statistics (unused)",
    "/jsz": "JetStream (accounts, streams, consumers, config, acc, offset, limit)",
    "/healthz": "Health probe (js-enabled-only, js-server-only, account, stream, consumer)",
    "/metrics": "Prometheus metrics (docs/monitoring.md)",
}
# nats-server's older name for /subsz, served alike.
_ALIASES = {"/subscriptionsz": "/subsz"}


def _json_bytes(body: dict[str, Any], *, indent: int | None = 2) -> bytes:
    """JSON as Go writes it: UTF-8 ("664µs"), not \\u escapes."""
    separators = None if indent else (",", ":")
    return json.dumps(body, ensure_ascii=False, indent=indent, separators=separators).encode()


def _error(status: int, message: str) -> Reply:
    return Reply(status, _json_bytes({"code": status, "error": message}))


class _Protocol(web.RequestHandler):
    """aiohttp's connection handler with monitoring's answers to requests it cannot parse:
    431 for an oversized head (as Go's HTTP server), else 400, as JSON; logged quietly,
    since any stray client can send them."""

    def handle_error(
        self,
        request: web.BaseRequest,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        if isinstance(exc, LineTooLong) or (
            isinstance(exc, BadHttpMessage) and "Too many headers" in str(exc)
        ):
            status, message = 431, "request too large"
        elif status == 400:
            # aiohttp's parser explains over several lines; the first says what was wrong.
            reason = exc.message if isinstance(exc, BadHttpMessage) else str(exc)
            message = f"malformed request: {reason.strip().splitlines()[0] if reason else ''}"
        else:
            log.error("monitoring request from %s failed", request.remote, exc_info=exc)
            message = "internal error"
        log.debug("monitoring request from %s refused: %s", request.remote, exc)
        response = _response(_error(status, message or HTTPStatus(status).phrase))
        response.force_close()
        return response


class _HttpServer(web.Server):
    """aiohttp's low-level server, making `_Protocol`s whose idle timer is the monitor's
    `request_timeout_s` when the connection starts (read each time, so a test can shorten
    it)."""

    def __init__(self, monitor: MonitorServer, **kwargs: Any) -> None:
        super().__init__(monitor._serve, **kwargs)
        self._monitor = monitor

    def __call__(self) -> web.RequestHandler:
        timeout = self._monitor.request_timeout_s
        return _Protocol(self, loop=self._loop, keepalive_timeout=timeout, **self._kwargs)


def _response(reply: Reply) -> web.Response:
    # The content type as the endpoint wrote it, parameters and all (Prometheus'
    # exposition format has a `version` one).
    headers = {hdrs.CONTENT_TYPE: reply.content_type, "Access-Control-Allow-Origin": "*"}
    response = web.Response(status=reply.status, body=reply.body, headers=headers)
    if reply.status == HTTPStatus.METHOD_NOT_ALLOWED:
        response.headers[hdrs.ALLOW] = "GET, HEAD"
    return response


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
        self.request_timeout_s = limits.HTTP_REQUEST_TIMEOUT_S
        self.request_counts: dict[str, int] = {}
        self._http: web.Server | None = None
        self._listener: asyncio.Server | None = None
        self._cpu = CpuSampler()
        self._sock: socket.socket | None = None
        self._routes: dict[str, Endpoint] = {
            "/": self.index,
            "/varz": self.varz,
            "/connz": self.connz,
            "/routez": self.routez,
            "/gatewayz": self.gatewayz,
            "/leafz": self.leafz,
            "/subsz": self.subsz,
            "/accountz": self.accountz,
            "/accstatz": self.accstatz,
            "/jsz": self.jsz,
            "/healthz": self.healthz,
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

    @property
    def connection_count(self) -> int:
        """Open monitoring connections (idle keep-alive ones included)."""
        return 0 if self._http is None else len(self._http.connections)

    async def start(self, sock: socket.socket) -> None:
        """Serve on `sock`, the monitoring port bound beforehand (`listen.bind_ports`)."""
        self._sock = sock
        # aiohttp's one idle timer (`request_timeout_s`, `_HttpServer`) runs from the
        # connection's start and from each answer, and closes a connection still waiting
        # for a whole request head: nats-server's ReadHeaderTimeout, and the keep-alive
        # bound.
        self._http = _HttpServer(
            self,
            access_log=None,
            max_line_size=limits.HTTP_REQUEST_BYTES_MAX,
            max_field_size=limits.HTTP_REQUEST_BYTES_MAX,
            max_headers=limits.HTTP_HEADERS_MAX,
            # A body is never read: the connection is closed after its answer instead
            # of draining it.
            lingering_time=0,
        )
        tls = self.feed.settings.tls
        loop = asyncio.get_running_loop()
        if self.secure and tls is not None:
            self._listener = await loop.create_server(
                self._http,
                sock=sock,
                ssl=server_context(dataclasses.replace(tls, verify=False)),
                ssl_handshake_timeout=tls.timeout_s,
            )
        else:
            self._listener = await loop.create_server(self._http, sock=sock)
        self.port = int(sock.getsockname()[1])
        log.info("Starting %s monitor on %s", self.scheme, host_port(self.host, self.port))

    async def stop(self) -> None:
        """Close the listener and every connection, whatever it is doing."""
        listener, self._listener = self._listener, None
        if listener is None:
            return
        listener.close()
        if self._http is not None:
            self._http.pre_shutdown()  # wakes connections waiting for a request: they end
            await self._http.shutdown(timeout=1.0)  # and answers being written get 1 s
        try:
            await asyncio.wait_for(listener.wait_closed(), 1.0)
        except TimeoutError:
            log.warning("monitoring listener did not close in time")

    # ------------------------------------------------------------------ HTTP

    async def _serve(self, request: web.BaseRequest) -> web.StreamResponse:
        reply = self._answer(request)
        response = _response(reply)
        if len(reply.body) >= limits.HTTP_GZIP_MIN_BYTES and _asks_for_gzip(request):
            response.enable_compression(web.ContentCoding.gzip)
        # A client that does not take its answer in time is cut off.
        try:
            async with asyncio.timeout(self.request_timeout_s):
                await response.prepare(request)
                await response.write_eof()
        except TimeoutError:
            if request.transport is not None:
                request.transport.abort()
        return response

    def _answer(self, request: web.BaseRequest) -> Reply:
        if request.method not in ("GET", "HEAD"):
            return _error(405, f"method {request.method} not allowed")
        path = request.path.rstrip("/") or "/"
        path = _ALIASES.get(path, path)
        handler = self._routes.get(path)
        if handler is None:
            return _error(404, f"{request.path} not found")
        self.request_counts[path] = self.request_counts.get(path, 0) + 1
        body: dict[str, Any] | Reply
        try:
            if path == "/metrics":  # in the format the scraper accepts (text, OpenMetrics)
                body = Reply(200, *self._metrics.render(request.headers.get(hdrs.ACCEPT, "")))
            else:
                body = handler(_query(request.query))
        except HttpError as exc:
            return _error(exc.args[0], exc.args[1])
        except BadParameter as exc:  # nats-server answers these in plain text
            return Reply(400, str(exc).encode(), _TEXT)
        except Exception:
            log.exception("monitoring endpoint %s failed", path)
            return _error(500, "internal error")
        if isinstance(body, Reply):
            return body
        return Reply(200, _json_bytes(body))

    # ------------------------------------------------------------------ endpoints

    def index(self, query: Query) -> dict[str, Any]:
        return {
            "server_id": self.feed.server_id,
            "version": limits.NATS_COMPAT_VERSION,
            "brook_version": __version__,
            "endpoints": {f"{self.url}{p}": text for p, text in _ENDPOINTS.items()},
        }

    def healthz(self, query: Query) -> Reply:
        status, body = build_healthz(self.feed.jetstream_assets(), query)
        return Reply(status, _json_bytes(body, indent=None))

    def varz(self, query: Query) -> dict[str, Any]:
        return build_varz(
            self.feed.statistics(),
            self.feed.settings,
            http_host=self.host,
            http_port=0 if self.secure else self.port,
            https_port=self.port if self.secure else 0,
            request_counts=self.request_counts,
            cpu=self._cpu,
        )

    def connz(self, query: Query) -> dict[str, Any]:
        return build_connz(self.feed, query)

    def subsz(self, query: Query) -> dict[str, Any]:
        return build_subsz(self.feed, SubszOptions.from_query(query))

    def jsz(self, query: Query) -> dict[str, Any]:
        return build_jsz(self.feed, JszOptions.from_query(query))

    def accountz(self, query: Query) -> dict[str, Any]:
        return build_accountz(self.feed, text(query, "acc"))

    def accstatz(self, query: Query) -> dict[str, Any]:
        return build_accstatz(self.feed, [], include_unused=go_bool(query, "unused"))

    def routez(self, query: Query) -> dict[str, Any]:
        return build_routez(self.feed, query)

    def gatewayz(self, query: Query) -> dict[str, Any]:
        return build_gatewayz(self.feed, query)

    def leafz(self, query: Query) -> dict[str, Any]:
        return build_leafz(self.feed, subs=go_bool(query, "subs"), account=text(query, "acc"))

    def metrics(self, query: dict[str, list[str]]) -> Reply:
        return Reply(200, *self._metrics.render())


def _asks_for_gzip(request: web.BaseRequest) -> bool:
    """Whether the request's Accept-Encoding lists gzip (without `q=0`)."""
    for coding in request.headers.get(hdrs.ACCEPT_ENCODING, "").lower().split(","):
        name, _, params = coding.partition(";")
        if name.strip() in ("gzip", "*"):
            return params.replace(" ", "") not in ("q=0", "q=0.0", "q=0.00", "q=0.000")
    return False


def _query(query: MultiMapping[str]) -> Query:
    """The query string as `urllib.parse.parse_qs` gives it (blank values kept), which the
    endpoints read."""
    out: Query = {}
    for key, value in query.items():
        out.setdefault(key, []).append(value)
    return out
