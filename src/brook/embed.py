"""`brook.serve()`: an in-process server as an async context manager.

Defaults suit tests: loopback address, a free port (`port=0`), and JetStream enabled when
a `store_dir` is given. `jetstream=True` without one stores file streams where `brook -js`
does, under the system's temporary directory (`default_store_dir()`), never in memory; a
test should give its own `store_dir`. Any other keyword is a `Settings` field, so tests
can shrink limits (`max_payload_bytes=1024`) or turn on auth exactly as a config file would.

`run_in_thread()` runs the same server on a thread with its own event loop, for callers
that have no loop to run it in; the pytest plugin's `brook_url` fixture is built on it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import TYPE_CHECKING, Any

from brook.config.settings import AuthSettings, Settings, User

if TYPE_CHECKING:
    import asyncio


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


# Bounds the background server's start and its shutdown: a Brook starts in milliseconds,
# but a JetStream store recovering many streams may take a while; past this, an error.
THREAD_TIMEOUT_S = 30.0


@contextmanager
def run_in_thread(**options: Any) -> Iterator[str]:
    """Run `brook.serve(**options)` on a thread of its own; yield the server's URL.

    For synchronous code (tests that are not coroutines, scripts) and for code inside a
    running loop alike: the thread owns a new event loop. Leaving the block shuts the
    server down (clients closed, store flushed) and joins the thread; an error starting or
    stopping the server is raised in the caller's thread. The URL, not the `Server`, is
    handed out: the server's objects belong to the other thread's loop.
    """
    # Imported here: `import brook` (which `brook serve` does before it binds its ports,
    # cli/main.py) must not import the event loop's machinery.
    import asyncio
    import threading
    from concurrent.futures import Future

    started: Future[str] = Future()
    # The loop and event that end the server, set once it is up.
    stop: Future[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = Future()

    async def main() -> None:
        stopping = asyncio.Event()
        async with serve(**options) as server:
            started.set_result(server.url)  # InvalidStateError if the caller gave up
            stop.set_result((asyncio.get_running_loop(), stopping))
            await stopping.wait()

    finished: Future[None] = Future()

    def run() -> None:
        try:
            asyncio.run(main())
        except BaseException as exc:  # handed to the caller's thread, raised there
            if not started.done():
                started.set_exception(exc)
            finished.set_exception(exc)
        else:
            finished.set_result(None)

    thread = threading.Thread(target=run, name="brook-server", daemon=True)
    thread.start()
    try:
        url = started.result(timeout=THREAD_TIMEOUT_S)
    except TimeoutError:
        if started.cancel():  # then a late start fails at once, and the server shuts down
            raise
        url = started.result()  # it finished meanwhile
    try:
        yield url
    finally:
        loop, stopping = stop.result()
        loop.call_soon_threadsafe(stopping.set)
        finished.result(timeout=THREAD_TIMEOUT_S)  # the shutdown's error, if any
        thread.join()
