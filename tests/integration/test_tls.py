"""TLS on the client port: nats-py and raw clients against an in-process Brook, with
certificates the tests make (tests/support/certs.py)."""

from __future__ import annotations

import asyncio
import json
import logging
import ssl
import time
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.aio.client import Client
from nats.errors import NoServersError

import brook
from brook.config.conf import parse_conf, settings_from_conf
from brook.config.settings import Settings
from tests.support.certs import Certs, make_certs
from tests.support.tlsalert import failed_handshake

pytestmark = pytest.mark.timeout(30)


@pytest.fixture
def certs(tmp_path: Path) -> Certs:
    return make_certs(tmp_path)


def conf(text: str) -> Settings:
    return settings_from_conf(parse_conf(text))


def tls_block(certs: Certs, extra: str = "") -> str:
    return (
        f'tls {{ cert_file: "{certs.cert_file}", key_file: "{certs.key_file}",'
        f' ca_file: "{certs.ca_file}", {extra} }}'
    )


async def test_nats_py_connects_over_tls_and_messages_flow(certs: Certs) -> None:
    async with brook.serve(settings=conf(tls_block(certs))) as server:
        nc = await nats.connect(server.url, tls=certs.context(), allow_reconnect=False)
        try:
            assert nc._server_info["tls_required"] is True
            assert "tls_verify" not in nc._server_info
            sub = await nc.subscribe("greet")
            await nc.publish("greet", b"hello over tls")
            msg = await sub.next_msg(timeout=2)
            assert msg.data == b"hello over tls"
            assert server.clients[next(iter(server.clients))].tls
        finally:
            await nc.close()


async def test_nats_py_with_a_client_certificate_under_verify(certs: Certs) -> None:
    client = certs.client("app")
    async with brook.serve(settings=conf(tls_block(certs, "verify: true"))) as server:
        nc = await nats.connect(server.url, tls=certs.context(client), allow_reconnect=False)
        try:
            assert nc._server_info["tls_verify"] is True
            assert await nc.request("nobody", b"", timeout=1) is not None
        except nats.errors.NoRespondersError:
            pass  # the round trip went through TLS both ways
        finally:
            await nc.close()
        # Without a client certificate: refused, with the TLS alert (under TLS 1.3 nats-py
        # raises its SSLError or, when the alert comes before its CONNECT is drained, a
        # reset, as against nats-server). Either way it never gets to talk.
        errors: list[Exception] = []

        async def on_error(exc: Exception) -> None:
            errors.append(exc)

        try:
            refused = await nats.connect(
                server.url,
                tls=certs.context(),
                allow_reconnect=False,
                connect_timeout=2,
                error_cb=on_error,
            )
        except (NoServersError, ssl.SSLError, OSError):
            return
        for _ in range(40):
            if refused.is_closed:
                break
            await asyncio.sleep(0.05)
        assert refused.is_closed
        assert errors


async def https_get(port: int, context: ssl.SSLContext, path: str) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=context)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
    await writer.drain()
    data = await asyncio.wait_for(reader.read(), 3)
    writer.close()
    return data


@pytest.mark.parametrize("key", ["https_port: -1", 'https: "127.0.0.1:-1"'])
async def test_monitoring_over_https(certs: Certs, key: str) -> None:
    settings = conf(tls_block(certs, "verify: true") + f"\n{key}")
    async with brook.serve(settings=settings) as server:
        port = server.monitor.port
        assert server.monitor.url.startswith("https://")
        # no client certificate asked for, as nats-server's HTTPS monitoring
        raw = await https_get(port, certs.context(), "/varz")
        head, _, body = raw.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200")
        varz = json.loads(body)
        assert (varz["https_port"], varz["http_port"]) == (port, 0)
        assert (varz["tls_required"], varz["tls_verify"], varz["tls_timeout"]) == (True, True, 2)
        nc = await nats.connect(
            server.url, tls=certs.context(certs.client("app")), allow_reconnect=False
        )
        try:
            raw = await https_get(port, certs.context(), "/connz")
        finally:
            await nc.close()
        (conn,) = json.loads(raw.partition(b"\r\n\r\n")[2])["connections"]
        assert conn["tls_version"] in ("1.2", "1.3")
        assert conn["tls_cipher_suite"].startswith("TLS_")
        assert "tls_first" not in conn
        # plain HTTP to the HTTPS port gets no answer from the monitor
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET /varz HTTP/1.1\r\nHost: x\r\n\r\n")
        assert b"200" not in await asyncio.wait_for(reader.read(), 5)
        writer.close()


async def rtts(nc: Client, n: int) -> list[float]:
    out = []
    for _ in range(n):
        start = time.perf_counter()
        await nc.flush(timeout=5)
        out.append(time.perf_counter() - start)
    return sorted(out)


async def test_bad_handshakes_leave_other_clients_alone(certs: Certs) -> None:
    """A crowd of bad TLS clients (plain text, garbage, silent until the TLS timeout,
    disconnecting mid-handshake) while a good client measures its round-trip time:
    every bad one is closed, the good one's round trips stay as they were (median within
    a generous factor: timing on a shared machine) and nothing is left counted."""
    settings = conf(tls_block(certs, "timeout: 0.5"))
    async with brook.serve(settings=settings) as server:
        nc = await nats.connect(server.url, tls=certs.context(), allow_reconnect=False)
        try:
            before = await rtts(nc, 30)

            async def bad(kind: int) -> bool:
                reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
                await reader.readline()  # the INFO
                if kind == 0:
                    writer.write(b"CONNECT {}\r\nPING\r\n")
                elif kind == 1:
                    writer.write(b"\x16\x03\x01\x00\x10" + bytes(range(16)))
                elif kind == 2:
                    writer.write(b"\x16\x03\x01\x02\x00\x01")  # a ClientHello cut short
                    writer.close()
                    return True
                data = await asyncio.wait_for(reader.read(), 5)  # kind 3: silent
                writer.close()
                return b"PONG" not in data

            crowd = asyncio.gather(*(bad(i % 4) for i in range(60)))
            during = await rtts(nc, 30)
            assert all(await crowd)
            after = await rtts(nc, 10)
        finally:
            await nc.close()
        median = before[len(before) // 2]
        print(f"RTT median before {median * 1e3:.2f} ms, during {during[15] * 1e3:.2f} ms")
        assert during[15] < max(10 * median, 0.05)
        assert after[5] < max(10 * median, 0.05)
        for _ in range(50):
            if len(server.clients) == 0 and server._live_transports == 0:
                break
            await asyncio.sleep(0.05)
        assert (len(server.clients), server._live_transports) == (0, 0)


async def test_refused_clients_that_linger_after_the_alert_are_closed(certs: Certs) -> None:
    """A refused client gets its TLS alert and the server then waits for it to leave (so
    that the alert is not lost to a reset): one that stays silent, or goes on sending,
    is closed by the TLS timeout or at its next bytes, none holds its connection, and a
    good client's round trips are unaffected meanwhile."""
    settings = conf(tls_block(certs, "verify: true, timeout: 0.5"))
    async with brook.serve(settings=settings) as server:
        nc = await nats.connect(
            server.url, tls=certs.context(certs.client("good")), allow_reconnect=False
        )
        try:
            before = await rtts(nc, 30)

            async def refused(kind: int) -> dict[str, Any]:
                context = certs.context()
                context.maximum_version = (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3)[kind % 2]
                then = b"CONNECT {}\r\nPING\r\n" if kind >= 2 else b""
                return await failed_handshake(
                    "127.0.0.1", server.port, context, then=then, hold=5.0
                )

            crowd = asyncio.gather(*(refused(i % 4) for i in range(40)))
            during = await rtts(nc, 30)
            outcomes = await crowd
        finally:
            await nc.close()
        for outcome in outcomes:
            assert outcome["error"] in (
                "SSL:SSLV3_ALERT_HANDSHAKE_FAILURE",
                "SSL:TLSV13_ALERT_CERTIFICATE_REQUIRED",
            ), outcome
            assert outcome["closed_in"] is not None, outcome
            assert outcome["closed_in"] < 2.0, outcome
        median = before[len(before) // 2]
        assert during[15] < max(10 * median, 0.05)
        for _ in range(50):
            if len(server.clients) == 0 and server._live_transports == 0:
                break
            await asyncio.sleep(0.05)
        assert (len(server.clients), server._live_transports) == (0, 0)


async def test_a_refused_handshake_is_logged_with_its_reason(
    certs: Certs, caplog: pytest.LogCaptureFixture
) -> None:
    """The reason OpenSSL gives is logged when the handshake fails, though the connection
    ends later, when the client closes after the alert."""
    caplog.set_level(logging.DEBUG, logger="brook.connection")
    async with brook.serve(settings=conf(tls_block(certs, "verify: true"))) as server:
        context = certs.context()
        context.maximum_version = ssl.TLSVersion.TLSv1_2
        outcome = await failed_handshake("127.0.0.1", server.port, context)
        assert outcome["error"] == "SSL:SSLV3_ALERT_HANDSHAKE_FAILURE"
        for _ in range(50):
            if "TLS handshake error: ConnectionResetError" in caplog.text:
                break
            await asyncio.sleep(0.05)
    messages = [r.getMessage() for r in caplog.records if r.name == "brook.connection"]
    assert any(
        m.startswith("TLS handshake error: [SSL: PEER_DID_NOT_RETURN_A_CERTIFICATE]")
        for m in messages
    ), messages
    assert any(m.endswith("TLS handshake error: ConnectionResetError") for m in messages)


async def test_shutdown_does_not_wait_for_handshakes_in_progress(certs: Certs) -> None:
    """Connections still in their TLS handshake (silent after INFO, or upgrading with
    allow_non_tls) are closed by a shutdown, which does not wait out the TLS timeout."""
    settings = conf(tls_block(certs, "timeout: 30"))
    async with brook.serve(settings=settings) as server:
        silent = [await asyncio.open_connection("127.0.0.1", server.port) for _ in range(5)]
        for reader, _ in silent:
            await reader.readline()  # INFO; the server now waits for a ClientHello
        started = time.monotonic()
        await asyncio.wait_for(server.shutdown(), 10)
        assert time.monotonic() - started < 5
        for reader, writer in silent:
            assert await asyncio.wait_for(reader.read(), 5) == b""
            writer.close()


async def test_nats_py_handshake_first_and_allow_non_tls(certs: Certs) -> None:
    """nats-py's `tls_handshake_first` against `handshake_first`; under `allow_non_tls`,
    nats-py clients with and without a TLS context both connect (nats-py upgrades only
    when INFO says `tls_required`, so both stay plain, as against nats-server; a client
    that upgrades is in tests/conformance/test_tls_conformance.py)."""
    async with brook.serve(settings=conf(tls_block(certs, "handshake_first: true"))) as server:
        nc = await nats.connect(
            server.url, tls=certs.context(), tls_handshake_first=True, allow_reconnect=False
        )
        assert nc._server_info["tls_required"] is True
        await nc.close()
    settings = conf(tls_block(certs) + "\nallow_non_tls: true")
    async with brook.serve(settings=settings) as server:
        plain = await nats.connect(server.url, allow_reconnect=False)
        secure = await nats.connect(server.url, tls=certs.context(), allow_reconnect=False)
        try:
            sub = await plain.subscribe("mixed")
            await plain.flush()
            await secure.publish("mixed", b"from tls to plain")
            assert (await sub.next_msg(timeout=2)).data == b"from tls to plain"
            assert [c.tls for c in server.clients.values()] == [False, False]
        finally:
            await plain.close()
            await secure.close()
