"""`brook.serve()`: an in-process server as an async context manager.

Defaults suit tests: loopback address, a free port (`port=0`), and JetStream enabled when
a `store_dir` is given. `jetstream=True` without one stores file streams where `brook -js`
does, under the system's temporary directory (`default_store_dir()`), never in memory; a
test should give its own `store_dir`. Any other keyword is a `Settings` field, so tests
can shrink limits (`max_payload_bytes=1024`) or turn on auth exactly as a config file would.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from brook.config.settings import AuthSettings, Settings, User


@asynccontextmanager
async def serve(
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    store_dir: str | None = None,
    jetstream: bool | None = None,
    token: str | None = None,
    user: str | None = None,
    password: str | None = None,
    settings: Settings | None = None,
    **fields: Any,
) -> AsyncIterator[Any]:
    from brook.monitor import MonitorServer
    from brook.monitor.system import SystemServices
    from brook.server.reload import reread
    from brook.server.server import Server

    def configured(base: Settings) -> Settings:
        """`base` with this call's arguments over it (a config reload's too)."""
        auth = base.auth
        if token is not None or user is not None:
            users = [User(user, password or "")] if user is not None else []
            auth = AuthSettings(token=token, users=users)
        js = base.jetstream
        if store_dir is not None or jetstream is not None:
            js = dataclasses.replace(
                js,
                enabled=jetstream if jetstream is not None else True,
                store_dir=store_dir if store_dir is not None else js.store_dir,
            )
        return base.replace(host=host, port=port, auth=auth, jetstream=js, **fields)

    base = settings or Settings()
    server = Server(
        configured(base),
        monitor=MonitorServer,
        system=SystemServices,
        reload_source=lambda: configured(reread(base)),
    )
    await server.start()
    try:
        yield server
    finally:
        await server.shutdown()
