"""The composition root: settings, router, authenticator, listener, monitoring, lifecycle.

A `Server` runs inside the caller's event loop, so the same object backs `brook serve`,
Brook's own tests and users' tests (`brook.serve()`). Shutdown order: stop accepting,
answer waiting pull requests with `409 Server Shutdown` (as nats-server, so that clients
ask again after reconnecting), close every client after flushing what it was owed
(bounded by `SHUTDOWN_FLUSH_S`), stop monitoring. Counters here are plain integers
updated on the hot path and read by `statistics()` and the monitoring endpoints.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import os
import platform
import secrets
import time
from typing import Any

from brook import __version__, limits
from brook.config.settings import ConfigError, Settings
from brook.routing.router import Router
from brook.server.auth import Authenticator
from brook.server.connection import ClientConnection

log = logging.getLogger("brook.server")


def _new_server_id() -> str:
    # nats-server ids are 56-character base32 nkeys starting with "N"; clients treat them
    # as opaque, but tools display them, so keep the same shape.
    return "N" + base64.b32encode(secrets.token_bytes(35)).decode()[:55]


class Server:
    def __init__(self, settings: Settings | None = None) -> None:
        self.settings = (settings or Settings()).validate()
        self.server_id = _new_server_id()
        self.server_name = self.settings.server_name or self.server_id
        self.router = Router()
        self.authenticator = Authenticator(self.settings.auth)
        self.first_ping_interval_s = limits.FIRST_PING_INTERVAL_S
        self.clients: dict[int, ClientConnection] = {}
        self._next_cid = 0
        self._listener: asyncio.Server | None = None
        self._live_transports = 0
        self._all_closed = asyncio.Event()
        self._all_closed.set()
        self._stopped = asyncio.Event()
        self._shutdown_task: asyncio.Future[None] | None = None
        self.monitor: Any = None
        self.jetstream: Any = None
        self.started_at = time.time()
        self.host = self.settings.host
        self.port = self.settings.port
        # Traffic counters live on each connection (one increment per message on the hot
        # path); the server's totals add closed connections' final counts to live ones.
        self._closed_traffic = [0, 0, 0, 0]  # in_msgs, in_bytes, out_msgs, out_bytes
        self.slow_consumers = 0
        self.total_connections = 0

    # ------------------------------------------------------------------ lifecycle

    def _prepare_store_dir(self) -> None:
        """Create and probe the JetStream store directory, so a bad path fails at start."""
        js = self.settings.jetstream
        if not js.enabled or js.store_dir is None:
            return
        try:
            os.makedirs(js.store_dir, exist_ok=True)
            probe = os.path.join(js.store_dir, ".brook-write-probe")
            with open(probe, "wb") as f:
                f.write(b"ok")
            os.remove(probe)
        except OSError as exc:
            raise ConfigError(
                f"jetstream.store_dir: {js.store_dir!r} is not usable: {exc}"
            ) from exc

    async def start(self) -> None:
        self._prepare_store_dir()
        if self.settings.jetstream.enabled:
            await self._start_jetstream()
        loop = asyncio.get_running_loop()
        self._listener = await loop.create_server(
            lambda: ClientConnection(self),
            host=self.settings.host,
            port=self.settings.port,
            reuse_address=True,
            backlog=1024,
        )
        sock = self._listener.sockets[0]
        self.host, self.port = sock.getsockname()[:2]
        if self.settings.http_port:
            from brook.monitor.http import MonitorServer

            self.monitor = MonitorServer(self)
            await self.monitor.start()
        log.info(
            "Brook %s listening for clients on %s:%d (server id %s)",
            __version__,
            self.host,
            self.port,
            self.server_id,
        )

    async def _start_jetstream(self) -> None:
        from brook.jetstream.api.consumers import ConsumerApi
        from brook.jetstream.api.dispatch import ApiDispatcher
        from brook.jetstream.api.streams import StreamApi
        from brook.jetstream.engine import JetStream

        js_settings = self.settings.jetstream
        self.jetstream = JetStream(
            self.router,
            js_settings.store_dir,
            max_memory_bytes=js_settings.max_memory_store_bytes,
            max_file_bytes=js_settings.max_file_store_bytes,
            sync_interval_s=js_settings.sync_interval_s,
            consumer_flush_interval_s=js_settings.consumer_flush_interval_s,
        )
        await self.jetstream.start()
        api = ApiDispatcher(self.jetstream.internal)
        StreamApi(
            self.jetstream,
            server_name=self.server_name,
            version=limits.NATS_COMPAT_VERSION,
            api_level=limits.JETSTREAM_API_LEVEL,
        ).register(api)
        ConsumerApi(
            self.jetstream,
            version=limits.NATS_COMPAT_VERSION,
            api_level=limits.JETSTREAM_API_LEVEL,
        ).register(api)
        api.start()

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

    async def _shutdown(self) -> None:
        if self._listener is not None:
            self._listener.close()
        if self.jetstream is not None:
            self.jetstream.signal_shutdown()  # waiting pull requests: 409 Server Shutdown
            await self.jetstream.drain()  # acknowledgements owed reach clients' buffers
        for client in list(self.clients.values()):
            client.close("server shutdown")
        try:
            await asyncio.wait_for(self._all_closed.wait(), limits.SHUTDOWN_FLUSH_S)
        except TimeoutError:
            log.warning("shutdown: %d connections did not close in time", self._live_transports)
        if self.jetstream is not None:
            await self.jetstream.stop()
        if self.monitor is not None:
            await self.monitor.stop()
        log.info("Brook stopped")
        self._stopped.set()

    @property
    def url(self) -> str:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "") else self.host
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

    def unregister(self, client: ClientConnection) -> None:
        if self.clients.pop(client.cid, None) is not None:
            totals = self._closed_traffic
            totals[0] += client.in_msgs
            totals[1] += client.in_bytes
            totals[2] += client.out_msgs
            totals[3] += client.out_bytes

    def _traffic(self, index: int, attr: str) -> int:
        live: int = sum(getattr(c, attr) for c in self.clients.values())
        return self._closed_traffic[index] + live

    @property
    def in_msgs(self) -> int:
        return self._traffic(0, "in_msgs")

    @property
    def in_bytes(self) -> int:
        return self._traffic(1, "in_bytes")

    @property
    def out_msgs(self) -> int:
        return self._traffic(2, "out_msgs")

    @property
    def out_bytes(self) -> int:
        return self._traffic(3, "out_bytes")

    def transport_closed(self) -> None:
        self._live_transports -= 1
        if self._live_transports <= 0:
            self._live_transports = 0
            self._all_closed.set()

    def client_info(
        self, client: ClientConnection, *, connect_info: bool = False
    ) -> dict[str, Any]:
        """The INFO fields nats-server sends, in its order (wire reference §1.3)."""
        settings = self.settings
        info: dict[str, Any] = {
            "server_id": self.server_id,
            "server_name": self.server_name,
            "version": limits.NATS_COMPAT_VERSION,
            "proto": limits.PROTOCOL_VERSION,
            "go": f"brook{__version__}/python{platform.python_version()}",
            "host": self.host,
            "port": self.port,
            "headers": True,
            "max_payload": settings.max_payload_bytes,
        }
        if settings.jetstream.enabled:
            info["jetstream"] = True
        info["client_id"] = client.cid
        info["client_ip"] = client.host
        if self.authenticator.required:
            info["auth_required"] = True
        if connect_info:
            info["connect_info"] = True
            info["remote_account"] = "$G"
        return info

    def statistics(self) -> dict[str, Any]:
        return {
            "server_id": self.server_id,
            "connections": len(self.clients),
            "total_connections": self.total_connections,
            "in_msgs": self.in_msgs,
            "in_bytes": self.in_bytes,
            "out_msgs": self.out_msgs,
            "out_bytes": self.out_bytes,
            "slow_consumers": self.slow_consumers,
            "subscriptions": self.router.sublist.count,
            "pid": os.getpid(),
        }
