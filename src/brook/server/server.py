"""The composition root: settings, router, authenticator, listener, monitoring, lifecycle.

A `Server` runs inside the caller's event loop, so the same object backs `brook serve`,
Brook's own tests and users' tests (`brook.serve()`). Shutdown order: stop accepting,
answer waiting pull requests with `409 Server Shutdown` (as nats-server, so that clients
ask again after reconnecting), close every client after flushing what it was owed
(bounded by `SHUTDOWN_FLUSH_S`), stop monitoring. Counters here are plain integers
updated on the hot path; monitoring reads them as snapshots (`statistics()`,
`connections()`, `subscriptions()`, `jetstream_assets()`: `brook.server.statistics`)
through the `MonitorFactory` its composer passes in, so this module never imports it.
Its parts (ADR 0031): those snapshots (`server_snapshots.py`), the INFO it sends each
client (`server_info.py`), accounts changed by JWT updates (`server_accounts.py`) and
lame-duck mode (`lameduck.py`, ADR 0041).
"""

from __future__ import annotations

import asyncio
import base64
import collections
import contextlib
import logging
import os
import secrets
import socket
import ssl
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from brook import limits
from brook.config.settings import ConfigError, ProcessSettings, Settings
from brook.routing.internal import InternalClient
from brook.routing.sublist import Subscription
from brook.server.accounts import Accounts
from brook.server.auth import Authenticator
from brook.server.connection import ClientConnection
from brook.server.lameduck import LameDuck
from brook.server.listen import WILDCARD_HOSTS, BoundPorts, bind_ports, host_port, open_listener
from brook.server.portsfile import ports_file_path, reachable_urls, write_ports_file
from brook.server.server_accounts import AccountChanges
from brook.server.server_info import ClientInfo
from brook.server.server_snapshots import ServerSnapshots
from brook.server.startup_log import log_config_file, log_jetstream_summary, log_limits
from brook.server.statistics import (
    ClosedConnection,
    Monitor,
    MonitorFactory,
    SystemBus,
    SystemFactory,
    SystemServices,
)
from brook.server.tls import FallbackListener, server_context, tls_material
from brook.version import __version__

if TYPE_CHECKING:
    from brook.jetstream.backlog import CommitBacklog
    from brook.leafnode.connection import LeafLimits
    from brook.leafnode.manager import LeafNodes
    from brook.server.claims import ClaimsService
    from brook.server.websocket import WebSocketListener

log = logging.getLogger("brook.server")

# A leaf connection's control lines may be this many times `max_control_line` (64 KB by
# default), as nats-server's `overMaxControlLineLimit` allows leaf, route and gateway
# connections: their LMSG/HMSG lines carry a reply and every queue group interested.
PEER_CONTROL_LINE_FACTOR = 16


def _new_server_id() -> str:
    # nats-server ids are 56-character base32 nkeys starting with "N"; clients treat them
    # as opaque, but tools display them, so keep the same shape.
    return "N" + base64.b32encode(secrets.token_bytes(35)).decode()[:55]


class Server(ServerSnapshots, AccountChanges, ClientInfo, LameDuck):
    def __init__(
        self,
        settings: Settings | None = None,
        *,
        monitor: MonitorFactory | None = None,
        system: SystemFactory | None = None,
        ports: BoundPorts | None = None,
        reload_source: Callable[[], Settings] | None = None,
    ) -> None:
        """`monitor` builds the monitoring listener when `http_port` is set
        (`brook.monitor.MonitorServer`), `system` the system account's services
        (`brook.monitor.system.SystemServices`; ADR 0029); the server imports neither.
        `ports` are the ports `bind_ports` bound for these settings beforehand (`brook
        serve` binds them before its heavy imports); else `start` binds them first.
        `reload_source` gives the settings a config reload applies (`reload`); by default
        they are read again from the config file and flags these came from."""
        self.settings = (settings or Settings()).validate()
        self._ports = ports
        self.server_id = _new_server_id()
        self.server_name = self.settings.server_name or self.server_id
        # Each account's subjects and JetStream (server/accounts.py); `router` and the
        # JetStream attributes below are the global account's, `$G`.
        self.accounts = Accounts(self.settings)
        self.router = self.accounts.global_account.router
        self.authenticator = Authenticator(
            self.settings.auth,
            self.settings.operator,
            anonymous_global=self.settings.anonymous_global,
            maps_certificates=self.settings.maps_certificates,
        )
        # TLS on the client port (server/tls.py), its context built at start. As
        # nats-server: `handshake_first` (without a fallback delay) overrides
        # `allow_non_tls`, which otherwise lets each client choose (its first byte tells).
        # With a fallback delay, a client that does not speak first gets INFO in plain
        # text after it, then the port's usual TLS (server/tls_upgrade.py).
        tls = self.settings.tls
        self.tls_context: ssl.SSLContext | None = None
        self.tls_material: tuple[object, ...] = ()  # what the context was made of
        fallback = tls.handshake_first_fallback_s if tls is not None else 0.0
        self.tls_first = tls is not None and tls.handshake_first and not fallback
        self.tls_first_fallback_s = fallback if tls is not None and tls.handshake_first else 0.0
        self.tls_optional = tls is not None and self.settings.allow_non_tls and not self.tls_first
        self.tls_map = tls is not None and tls.verify_and_map
        self.first_ping_interval_s = limits.FIRST_PING_INTERVAL_S
        self.clients: dict[int, ClientConnection] = {}
        self._next_cid = 0
        self._listener: asyncio.Server | None = None
        self._fallback_listener: FallbackListener | None = None  # handshake_first fallback
        self.websocket: WebSocketListener | None = None
        # Leafnode remotes and connections (ADR 0032), when `leafnodes {}` has any.
        self.leafnodes: LeafNodes | None = None
        self._live_transports = 0
        self._all_closed = asyncio.Event()
        self._all_closed.set()
        self._stopped = asyncio.Event()
        self._shutdown_task: asyncio.Future[None] | None = None
        self._monitor_factory = monitor
        self.monitor: Monitor | None = None
        # The system account's services, answering in its subjects and, for what
        # nats-server imports into every account, in the others' (ADR 0029).
        self._system_factory = system
        self.system: SystemServices | None = None
        self.claims: ClaimsService | None = None  # account JWT updates (operator mode)
        self._background: set[asyncio.Future[None]] = set()  # JetStream switched by updates
        self._ports_file: Path | None = None
        self.jetstream: Any = None  # `$G`'s engine, when it has JetStream
        # The bound on PubAcks awaiting an fsync, read by connections (JetStream's).
        self.commit_backlog: CommitBacklog | None = None
        self.transfers: Any = None  # snapshots and restores in progress (with JetStream)
        self.api: Any = None  # the JetStream API's dispatcher and its counters (with JetStream)
        self.started_at = time.time()
        self.config_loaded_at = self.started_at  # and again at each reload (/varz)
        self._reload_source = reload_source
        # The process owner's (`brook serve`) hook for the log and pid file settings a
        # reload changed (server/reload.py); None when embedded: the caller owns logging.
        self.process_reload: Callable[[ProcessSettings], None] | None = None
        self.host = self.settings.host or limits.DEFAULT_HOST  # as configured, for INFO
        self.port = self.settings.port
        # Traffic counters live on each connection (one increment per message on the hot
        # path); the server's totals add closed connections' final counts to live ones.
        self._closed_traffic = [0, 0, 0, 0]  # in_msgs, in_bytes, out_msgs, out_bytes
        self._closed_by_account: dict[str, list[int]] = {}  # the same, per account
        self.slow_consumers = 0
        self.stale_connections = 0
        # nats-server's ring of closed clients (`max_closed_clients`), for /connz.
        self.closed_clients: collections.deque[ClosedConnection] = collections.deque(
            maxlen=self.settings.max_closed_clients or limits.MAX_CLOSED_CLIENTS
        )
        self.total_connections = 0

    # ------------------------------------------------------------------ lifecycle

    def _prepare_store_dir(self) -> None:
        """Create and probe the JetStream store directory, so a bad path fails at start
        (in nats-server's words: "storage directory is not a directory"). A full
        filesystem is no bad path: Brook starts read-mostly then (jetstream/space.py), so
        that an operator can purge or delete streams to make room."""
        js = self.settings.jetstream
        if not js.enabled:
            return
        path = js.store_path
        probe = os.path.join(path, ".brook-write-probe")
        try:
            os.makedirs(path, exist_ok=True)
            with open(probe, "wb") as f:
                f.write(b"ok")
            os.remove(probe)
        except (FileExistsError, NotADirectoryError):
            raise ConfigError(
                f"jetstream.store_dir: {path!r}: storage directory is not a directory"
            ) from None
        except OSError as exc:
            from brook.jetstream.store.base import is_no_space

            with contextlib.suppress(OSError):
                os.remove(probe)
            if not (is_no_space(exc) and os.path.isdir(path)):
                raise ConfigError(f"jetstream.store_dir: {path!r} is not usable: {exc}") from exc

    async def start(self) -> None:
        """Open everything or nothing: whatever a failed start opened is closed again."""
        try:
            await self._start()
        except BaseException:
            await self.shutdown()
            raise

    async def _start(self) -> None:
        # The start-up lines launchers of nats-server wait for and parse (nats.py's
        # nats.server reads "Listening for client connections on HOST:PORT" and
        # "Server is ready"), in nats-server's order and words.
        log.info("Starting brook")
        log.info(
            "  Version:  %s (nats-server %s compatible)", __version__, limits.NATS_COMPAT_VERSION
        )
        log.info("  Name:     %s", self.server_name)
        log.info("  ID:       %s", self.server_id)
        log_config_file(self.settings.config_file)
        log_limits(self.settings)
        # Bound before JetStream recovers: a client connecting meanwhile waits in the
        # backlog rather than being refused (server/listen.py).
        if self._ports is None:
            self._ports = bind_ports(self.settings)
        ports = self._ports
        self._prepare_store_dir()
        if self.settings.tls is not None:
            self.tls_material = tls_material(self.settings.tls)  # compared at a reload
            self.tls_context = server_context(self.settings.tls)
        if self.settings.jetstream.enabled:
            await self._start_jetstream()
        if self._system_factory is not None:
            system = self.accounts.system_account
            bus = SystemBus(
                system_account=system.name,
                system=InternalClient(system.router, system.name),
                imports={
                    a.name: InternalClient(a.router, f"{system.name} imports")
                    for a in self.accounts
                    if not a.is_system
                },
            )
            self.system = self._system_factory(self, bus)
            self.system.start()
        operator = self.authenticator.operator
        if operator is not None:
            await operator.check_resolver()
            # The resolver's `$SYS` requests (ADR 0033), in the system account. Imported
            # here, as `brook.jwt` is: only operator mode reads JWTs.
            from brook.server.claims import ClaimsService

            system_account = self.accounts.system_account
            self.claims = ClaimsService(
                self,
                operator,
                InternalClient(system_account.router, f"{system_account.name} resolver"),
                system_account=system_account.name,
            )
            self.claims.start()
        sock = ports.client
        assert sock is not None
        ports.client = None  # the listener's from here on
        loop = asyncio.get_running_loop()
        if self.tls_first:
            # handshake_first: every client starts with TLS, so the listener does the
            # handshake and a connection begins (INFO first) once it is done.
            assert self.tls_context is not None
            assert self.settings.tls is not None
            self._listener = await loop.create_server(
                lambda: ClientConnection(self),
                sock=sock,
                backlog=1024,
                ssl=self.tls_context,
                ssl_handshake_timeout=self.settings.tls.timeout_s,
            )
        elif self.tls_first_fallback_s:
            assert self.tls_context is not None
            assert self.settings.tls is not None
            self._fallback_listener = FallbackListener(
                lambda: ClientConnection(self), self.tls_context, self.settings.tls
            )
            self._fallback_listener.start(sock)
        else:
            self._listener = await loop.create_server(
                lambda: ClientConnection(self), sock=sock, backlog=1024
            )
        self.port = sock.getsockname()[1]
        log.info("Listening for client connections on %s", host_port(self.host, self.port))
        if self.tls_context is not None:
            offered = "available" if self.tls_optional else "required"
            log.info("TLS %s for client connections", offered)
            if self.tls_first:
                log.warning(
                    'Clients that are not using "TLS Handshake First" option will fail to connect'
                )
        if self.settings.websocket.port:
            # aiohttp is imported only by servers that have WebSocket clients.
            from brook.server.websocket import WebSocketListener

            assert ports.websocket is not None
            self.websocket = WebSocketListener(self, self.settings.websocket)
            await self.websocket.start(ports.websocket)
            ports.websocket = None
        leaf = self.settings.leafnodes
        if leaf.remotes or leaf.port:
            # Imported only by servers with leafnodes, as aiohttp and `brook.jetstream`
            # are by those they serve: start-up is mostly imports.
            from brook.leafnode.manager import LeafNodes
            from brook.server.leaflogin import client_login

            self.leafnodes = LeafNodes(
                leaf,
                self._router_of,
                self._leaf_limits,
                self.next_client_id,
                self.leaf_closed,
                # nats-server: a hub without its own authorization logs spokes in as clients
                client_login(lambda: self.authenticator) if self.authenticator.required else None,
            )
            if leaf.port:
                leaf_tls = server_context(leaf.tls) if leaf.tls is not None else None
                leaf_sock = open_listener(leaf.host, leaf.port, "Error listening on leafnode port")
                await self.leafnodes.listen(leaf_sock, leaf.host, leaf_tls)
                log.info(
                    "Listening for leafnode connections on %s",
                    host_port(leaf.host, self.leafnodes.port),
                )
            self.leafnodes.start()
        if self.settings.http_port or self.settings.https_port:
            if self._monitor_factory is None:
                raise ConfigError("http_port: this server was built without monitoring")
            assert ports.monitoring is not None
            self.monitor = self._monitor_factory(self)
            await self.monitor.start(ports.monitoring)
            ports.monitoring = None
        if self.settings.ports_file_dir:
            self._write_ports_file(self.settings.ports_file_dir, sock)
        log.info("Server is ready")

    def reload(self, settings: Settings | None = None) -> None:
        """Reload the configuration as nats-server does (SIGHUP; ADR 0042): `settings`,
        else those read again from where the running ones came from. Raises
        `ConfigError` with nats-server's reason when refused; the running settings stay."""
        from brook.server import reload

        if settings is None:
            source = self._reload_source
            settings = source() if source is not None else reload.reread(self.settings)
        reload.reload(self, settings)

    def reload_signal(self) -> None:
        """SIGHUP: a reload, its refusal logged in nats-server's words."""
        log.info('Trapped "hangup" signal')
        try:
            self.reload()
        except ConfigError as exc:
            log.error("Failed to reload server configuration: %s", exc)
        except Exception as exc:  # a bug in Brook: the server goes on with what it has
            log.exception("Failed to reload server configuration: %r", exc)

    def _router_of(self, account: str) -> Any:
        found = self.accounts.get(account)
        return found.router if found is not None else None

    def _leaf_limits(self, account: str) -> LeafLimits:
        from brook.leafnode.connection import LeafLimits

        s = self.settings
        found = self.accounts.get(account)
        return LeafLimits(
            server_id=self.server_id,
            server_name=self.server_name,
            max_payload=s.max_payload_bytes,
            max_control_line=s.max_control_line_bytes * PEER_CONTROL_LINE_FACTOR,
            ping_interval_s=s.ping_interval_s,
            max_pings_out=s.max_pings_out,
            max_pending=s.max_pending_bytes,
            jetstream=found is not None and found.jetstream is not None,
            server_jetstream=s.jetstream.enabled,
            domain=s.jetstream.domain if s.jetstream.enabled else "",
            mappings=found.mappings if found is not None else None,
        )

    def _write_ports_file(self, directory: str, sock: socket.socket) -> None:
        ports = {"nats": reachable_urls("nats", self.host, sock)}
        if self.websocket is not None:
            ports["websocket"] = self.websocket.reachable_urls()
        if self.monitor is not None:
            ports["monitoring"] = self.monitor.reachable_urls()
        path = ports_file_path(directory)
        try:
            write_ports_file(path, ports)
        except OSError as exc:  # nats-server logs this and serves on
            log.error("Error writing ports file (%s): %s", path, exc)
            return
        self._ports_file = path

    async def _start_jetstream(self) -> None:
        js_settings = self.settings.jetstream
        log.info("Starting JetStream")
        log_jetstream_summary(js_settings)
        accounts = self.accounts
        await accounts.start_jetstream(self.settings, server_name=self.server_name)
        self.commit_backlog = accounts.commit_backlog
        global_account = accounts.global_account
        self.jetstream = global_account.jetstream
        self.api = global_account.api if global_account.jetstream is not None else None
        self.transfers = global_account.transfers

    def request_shutdown(self) -> None:
        """Begin a graceful shutdown from synchronous code (signal handlers)."""
        if self._shutdown_task is None:
            self._shutdown_task = asyncio.ensure_future(self._shutdown())

    async def shutdown(self) -> None:
        """Stop accepting, flush and close every client, stop monitoring. Idempotent."""
        self.request_shutdown()
        assert self._shutdown_task is not None
        await asyncio.shield(self._shutdown_task)

    async def wait_stopped(self) -> None:
        """Return once a shutdown, however requested, has completed."""
        await self._stopped.wait()

    @property
    def shutting_down(self) -> bool:
        return self._shutdown_task is not None

    def stop_accepting(self) -> None:
        """Close the client and WebSocket listeners (shutdown, lame-duck mode)."""
        if self._ports is not None:
            self._ports.close()  # after a failed start: those no listener took
        if self._listener is not None:
            self._listener.close()
        if self._fallback_listener is not None:
            self._fallback_listener.close()
        if self.websocket is not None:
            self.websocket.stop_accepting()

    def kick(self, cid: int) -> None:
        """`$SYS.REQ.SERVER.<id>.KICK`: close client or leaf connection `cid` (nats-server's
        `DisconnectClientByID`)."""
        client = self.clients.get(cid)
        if client is not None:
            client.close("kicked")
            return
        for leaf in self.leafnodes.connections() if self.leafnodes is not None else ():
            if leaf.cid == cid:
                leaf.close("Kicked")
                return
        raise LookupError("no such client or leafnode id")

    async def _shutdown(self) -> None:
        if self.system is not None:
            self.system.server_event("SHUTDOWN")
        self.stop_accepting()
        self.cancel_lame_duck()
        if self.leafnodes is not None:
            await self.leafnodes.stop()
        self.accounts.signal_shutdown()  # waiting pull requests: 409 Server Shutdown
        await self.accounts.drain()  # acknowledgements owed reach clients' buffers
        for client in list(self.clients.values()):
            client.close("server shutdown")
        try:
            await asyncio.wait_for(self._all_closed.wait(), limits.SHUTDOWN_FLUSH_S)
        except TimeoutError:
            log.warning("shutdown: %d connections did not close in time", self._live_transports)
        for task in list(self._background):  # a JetStream switch under way ends first
            with contextlib.suppress(Exception):
                await task
        await self.accounts.stop()
        if self.websocket is not None:
            await self.websocket.stop()
        if self.monitor is not None:
            await self.monitor.stop()
        if self.claims is not None:
            self.claims.stop()
        if self.system is not None:
            self.system.stop()
        if self._ports_file is not None:
            self._ports_file.unlink(missing_ok=True)
        log.info("Brook stopped")
        self._stopped.set()

    @property
    def url(self) -> str:
        host = "127.0.0.1" if self.host in WILDCARD_HOSTS else self.host
        if ":" in host:
            host = f"[{host}]"
        return f"nats://{host}:{self.port}"

    # ------------------------------------------------------------------ connections

    def next_client_id(self) -> int:
        self._next_cid += 1
        return self._next_cid

    def register(self, client: ClientConnection) -> bool:
        """Account a new connection; False when over `max_connections` or shutting down."""
        self._live_transports += 1
        self._all_closed.clear()
        if self.shutting_down or len(self.clients) >= self.settings.max_connections:
            return False
        self.clients[client.cid] = client
        self.total_connections += 1
        return True

    def unregister(
        self, client: ClientConnection, subs: Mapping[bytes, Subscription] | None = None
    ) -> None:
        """`client` has closed, with `subs` its subscriptions at the close."""
        if self.clients.pop(client.cid, None) is not None:
            self.closed_clients.append(self._closed_connection(client, subs or {}))
            if client.close_reason == "stale connection":
                self.stale_connections += 1
            totals = self._closed_traffic
            totals[0] += client.in_msgs
            totals[1] += client.in_bytes
            totals[2] += client.out_msgs
            totals[3] += client.out_bytes
            mine = self._closed_by_account.setdefault(client.account.name, [0, 0, 0, 0])
            mine[0] += client.in_msgs
            mine[1] += client.in_bytes
            mine[2] += client.out_msgs
            mine[3] += client.out_bytes
            if client.connected and self.system is not None:
                self.system.client_closed(self._connection_snapshot(client))

    def server_info(self) -> dict[str, Any]:
        """The `server` of a `$SYS` reply: the system services' (their sequence)."""
        if self.system is not None:
            return self.system.server_info()
        return {"name": self.server_name, "host": self.host, "id": self.server_id}

    def client_connected(self, client: ClientConnection) -> None:
        """A client logged in (its first CONNECT): the system account's event."""
        if self.system is not None:
            self.system.client_connected(self._connection_snapshot(client))

    def transport_closed(self) -> None:
        self._live_transports -= 1
        if self._live_transports <= 0:
            self._live_transports = 0
            self._all_closed.set()

    @property
    def system_router(self) -> Any:
        """The system account's subjects (its `Router`), for in-process clients there."""
        return self.accounts.system_account.router
