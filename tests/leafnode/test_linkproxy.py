"""The partition tests' TCP proxy (tests/support/linkproxy.py) does what they rely on:
bytes forwarded both ways, a reset cut resets and refuses, a silent cut holds bytes,
ends and new dials until the heal."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator

import pytest

from tests.support.linkproxy import LinkProxy, link_proxy

pytestmark = pytest.mark.timeout(20)


@pytest.fixture
async def echo_port() -> AsyncIterator[int]:
    async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while data := await reader.read(1024):
            writer.write(data)
        writer.close()

    server = await asyncio.start_server(echo, "127.0.0.1", 0)
    yield server.sockets[0].getsockname()[1]
    server.close()


@pytest.fixture
async def proxy(echo_port: int) -> AsyncIterator[LinkProxy]:
    async with link_proxy(echo_port) as p:
        yield p


async def dial(proxy: LinkProxy) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection("127.0.0.1", proxy.port)


async def test_forwards_both_ways(proxy: LinkProxy) -> None:
    reader, writer = await dial(proxy)
    writer.write(b"hello")
    assert await asyncio.wait_for(reader.readexactly(5), 2) == b"hello"
    writer.write_eof()
    assert await asyncio.wait_for(reader.read(), 2) == b""  # the target's FIN came back
    writer.close()


async def test_reset_cut_resets_and_refuses(proxy: LinkProxy) -> None:
    reader, writer = await dial(proxy)
    writer.write(b"x")
    assert await asyncio.wait_for(reader.readexactly(1), 2) == b"x"
    await proxy.cut("reset")
    with pytest.raises(ConnectionResetError):
        await asyncio.wait_for(reader.read(10), 2)
    with pytest.raises(ConnectionRefusedError):
        await dial(proxy)
    with socket.socket() as other, pytest.raises(OSError, match="in use"):  # kept for the heal
        other.bind(("127.0.0.1", proxy.port))
    await proxy.heal()
    reader, writer = await dial(proxy)
    writer.write(b"again")
    assert await asyncio.wait_for(reader.readexactly(5), 2) == b"again"
    writer.close()


async def test_silent_cut_holds_bytes_ends_and_dials(proxy: LinkProxy) -> None:
    reader, writer = await dial(proxy)
    writer.write(b"a")
    assert await asyncio.wait_for(reader.readexactly(1), 2) == b"a"
    await proxy.cut("silent")
    writer.write(b"during")
    with pytest.raises(TimeoutError):  # no answer to the SYN
        await asyncio.wait_for(dial(proxy), 0.5)
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(reader.readexactly(6), 0.5)
    writer.write_eof()  # an end during the cut is held too
    await asyncio.sleep(0.1)
    await proxy.heal()
    assert await asyncio.wait_for(reader.readexactly(6), 2) == b"during"
    assert await asyncio.wait_for(reader.read(), 2) == b""
    late_reader, late_writer = await dial(proxy)
    late_writer.write(b"late")
    assert await asyncio.wait_for(late_reader.readexactly(4), 2) == b"late"
    assert proxy.accepted == 2
    writer.close()
    late_writer.close()
