"""One event loop per Python process, in a daemon thread, and a cache of connections on it.

Spark calls data sources synchronously (`partitions()`, `read()` as a generator, `write()`),
in Python worker processes that it reuses across tasks. nats-py is asyncio. A loop running in
its own thread lets synchronous code submit coroutines and wait on their results, keeps
connections alive between tasks (pings answered, sockets read) and lets a reader fetch the
next chunk while Spark consumes the current one. Connections are keyed by their
`ConnectOptions`, so every task of a worker with the same options shares one socket.

Nothing in this module is pickled: partitions and writers carry only options, and every
process builds its own runtime on first use (forked children rebuild it: the pid is checked).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import ssl
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

import nats.errors

from brook_spark.options import ConnectOptions
from brook_spark.wire import RawClient

T = TypeVar("T")


class Runtime:
    def __init__(self) -> None:
        try:
            import uvloop

            self.loop: asyncio.AbstractEventLoop = uvloop.new_event_loop()
        except ImportError:  # pragma: no cover - uvloop is a Brook dependency
            self.loop = asyncio.new_event_loop()
        self.pid = os.getpid()
        self._thread = threading.Thread(
            target=self.loop.run_forever, name="brook-spark-loop", daemon=True
        )
        self._thread.start()
        self._clients: dict[ConnectOptions, RawClient] = {}
        self._connecting: dict[ConnectOptions, asyncio.Future[RawClient]] = {}

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run(self, coro: Coroutine[Any, Any, T], timeout_s: float | None = None) -> T:
        future = self.submit(coro)
        try:
            return future.result(timeout_s)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise TimeoutError(f"no answer from the NATS server within {timeout_s}s") from None

    async def client(self, options: ConnectOptions) -> RawClient:
        """A connected client for these options, opened once per process (on the loop)."""
        client = self._clients.get(options)
        if client is not None and not client.is_closed:
            return client
        pending = self._connecting.get(options)
        if pending is not None:
            return await pending
        future: asyncio.Future[RawClient] = self.loop.create_future()
        self._connecting[options] = future
        try:
            client = await _connect(options)
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: no "never retrieved" warning when nobody waits
            raise
        finally:
            self._connecting.pop(options, None)
        self._clients[options] = client
        future.set_result(client)
        return client

    async def forget(self, options: ConnectOptions) -> None:
        client = self._clients.pop(options, None)
        if client is not None and not client.is_closed:
            await client.close()


async def _connect(options: ConnectOptions) -> RawClient:
    """Connect within `requestTimeout`; a refused authorization fails at once.

    nats-py retries a failed first connection like a lost one (60 attempts, 2 s apart by
    default), which would turn a wrong password into a two-minute hang inside a Spark task.
    """
    client = RawClient()
    kwargs = options.connect_kwargs()
    if options.uses_tls:
        kwargs["tls"] = _tls_context(options)
    seen: list[Exception] = []
    task: asyncio.Task[None] | None = None

    async def on_error(exc: Exception) -> None:
        # nats-py prints errors by default; failures surface through the calls that hit them.
        seen.append(exc)
        if _is_auth_error(exc) and task is not None and not client.is_connected:
            task.cancel()

    kwargs.setdefault("error_cb", on_error)
    task = asyncio.ensure_future(client.connect(**kwargs))
    try:
        await asyncio.wait_for(task, options.request_timeout_s)
    except (Exception, asyncio.CancelledError) as exc:
        with contextlib.suppress(Exception):
            await client.close()
        servers = ", ".join(options.servers)
        cause = seen[-1] if seen else exc
        text = str(cause) or type(cause).__name__
        if _is_auth_error(cause):
            text = "authorization violation (check user/password, token, nkey or creds options)"
        raise ConnectionError(
            f"cannot connect to NATS at {servers} (option 'servers'): {text}"
        ) from None
    return client


def _is_auth_error(exc: BaseException) -> bool:
    # nats-py reports a refused CONNECT as a plain Error carrying the server's -ERR text.
    return isinstance(exc, nats.errors.AuthorizationError) or (
        "authorization violation" in str(exc).lower()
    )


def _tls_context(options: ConnectOptions) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=options.tls_ca_file)
    if options.tls_cert_file is not None:
        context.load_cert_chain(options.tls_cert_file, options.tls_key_file)
    return context


_lock = threading.Lock()
_runtime: Runtime | None = None


def runtime() -> Runtime:
    """This process's runtime, created on first use."""
    global _runtime
    with _lock:
        if _runtime is None or _runtime.pid != os.getpid():
            _runtime = Runtime()
        return _runtime
