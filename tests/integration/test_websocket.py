"""WebSocket clients on a live Brook: nats-py with `ws://` URLs beside TCP clients, one
router, one JetStream, the listener's own credentials; bad clients dropped alone."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.errors import NoServersError

import brook
from brook.config.settings import AuthSettings, User, WebSocketSettings
from tests.support.websocket import WsClient, frame

LISTENER = WebSocketSettings(port=-1, host="127.0.0.1", no_tls=True)


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[Any]:
    async with brook.serve(port=0, store_dir=str(tmp_path), websocket=LISTENER) as srv:
        yield srv


def ws_url(srv: Any) -> str:
    return f"ws://127.0.0.1:{srv.websocket.port}"


async def test_pub_sub_request_between_websocket_and_tcp_clients(server: Any) -> None:
    ws = await nats.connect(ws_url(server), allow_reconnect=False)
    tcp = await nats.connect(server.url, allow_reconnect=False)
    try:
        assert ws._server_info["port"] == server.websocket.port
        from_tcp = await ws.subscribe("to.ws")
        from_ws = await tcp.subscribe("to.tcp")
        await ws.flush()
        await tcp.flush()
        await tcp.publish("to.ws", b"a" * 100_000, headers={"k": "v"})
        await ws.publish("to.tcp", b"b")
        got = await from_tcp.next_msg(timeout=2)
        assert (got.data, got.headers) == (b"a" * 100_000, {"k": "v"})
        assert (await from_ws.next_msg(timeout=2)).data == b"b"

        async def double(msg: Any) -> None:
            await msg.respond(msg.data * 2)

        await ws.subscribe("svc", cb=double)
        await ws.flush()
        assert (await tcp.request("svc", b"xy", timeout=2)).data == b"xyxy"
        assert (await ws.request("svc", b"z", timeout=2)).data == b"zz"
    finally:
        await ws.close()
        await tcp.close()


async def test_many_messages_in_order_both_ways(server: Any) -> None:
    ws = await nats.connect(ws_url(server), allow_reconnect=False)
    try:
        sub = await ws.subscribe("seq")
        for i in range(2000):
            await ws.publish("seq", str(i).encode())
        got = [int((await sub.next_msg(timeout=5)).data) for _ in range(2000)]
        assert got == list(range(2000))
    finally:
        await ws.close()


async def test_jetstream_over_websocket(server: Any) -> None:
    ws = await nats.connect(ws_url(server), allow_reconnect=False)
    try:
        js = ws.jetstream()
        await js.add_stream(name="WS", subjects=["ws.>"])
        acks = [await js.publish(f"ws.{i}", b"m%d" % i) for i in range(10)]
        assert [a.seq for a in acks] == list(range(1, 11))
        psub = await js.pull_subscribe("ws.>", durable="d")
        msgs = await psub.fetch(10, timeout=2)
        assert [m.data for m in msgs] == [b"m%d" % i for i in range(10)]
        for m in msgs:
            await m.ack()
        info = await js.consumer_info("WS", "d")
        assert (info.num_ack_pending, info.delivered.stream_seq) == (0, 10)
    finally:
        await ws.close()


async def test_listener_credentials_apply_to_websocket_clients_only(tmp_path: Path) -> None:
    listener = WebSocketSettings(
        port=-1, host="127.0.0.1", no_tls=True, auth=AuthSettings(users=[User("w", "pw")])
    )
    async with brook.serve(port=0, token="tcp-secret", websocket=listener) as srv:
        ws = await nats.connect(ws_url(srv), user="w", password="pw", allow_reconnect=False)
        tcp = await nats.connect(srv.url, token="tcp-secret", allow_reconnect=False)
        await ws.close()
        await tcp.close()
        for creds in ({"token": "tcp-secret"}, {"user": "w", "password": "wrong"}, {}):
            with pytest.raises((nats.errors.Error, NoServersError, OSError)):
                await nats.connect(ws_url(srv), allow_reconnect=False, max_reconnect_attempts=0,
                                   connect_timeout=2, **creds)  # fmt: skip
        with pytest.raises((nats.errors.Error, NoServersError, OSError)):
            await nats.connect(srv.url, user="w", password="pw", allow_reconnect=False)


async def _round_trip_s(nc: Any) -> float:
    start = time.perf_counter()
    await nc.flush(timeout=2)
    return time.perf_counter() - start


async def test_bad_websocket_clients_dropped_others_unaffected(server: Any) -> None:
    """Garbage frames, a frame over the listener's bound, a NATS payload over
    max_payload, an unmasked... each such client is closed; a WebSocket and a TCP client
    keep their round trips meanwhile."""
    ws = await nats.connect(ws_url(server), allow_reconnect=False)
    tcp = await nats.connect(server.url, allow_reconnect=False)
    try:
        before = max([await _round_trip_s(ws), await _round_trip_s(tcp)])
        port = server.websocket.port
        max_payload = server.settings.max_payload_bytes
        bad_inputs = [
            frame(b"GARBAGE\r\n"),
            b"\xff\xff\xff\xff\xff\xff",  # reserved bits, unknown opcode, 64-bit length
            frame(b"x" * 200, opcode=9),  # a control frame over 125 bytes
            frame(b"PUB a %d\r\n" % (max_payload + 1)),
            frame(b"PUB a 1\r\n") + b"\x82\xff" + (8 * max_payload + 1).to_bytes(8, "big"),
        ]
        for bad in bad_inputs:
            async with WsClient.connect(port) as victim:
                await victim.read_nats(b"\r\n")
                await victim.send(bad)
                frames = await victim.frames_until_closed()
                assert all(opcode == 8 for opcode, _ in frames[1:]), frames
            during = max([await _round_trip_s(ws), await _round_trip_s(tcp)])
            assert during < before + 1.0
        assert (ws.is_connected, tcp.is_connected) == (True, True)
        assert len(server.clients) == 2
    finally:
        await ws.close()
        await tcp.close()


async def test_shutdown_closes_websocket_clients_with_a_close_frame(tmp_path: Path) -> None:
    async with brook.serve(port=0, websocket=LISTENER) as srv:
        port = srv.websocket.port
        async with WsClient.connect(port) as client:
            await client.read_nats(b"\r\n")
            await client.send(frame(b'CONNECT {"verbose":false}\r\nPING\r\n'))
            await client.read_nats(b"PONG\r\n")
            await srv.shutdown()
            assert (await client.read_close())[1:] == (1001, b"Server Shutdown")


async def test_websocket_subscriber_that_stops_reading_meets_the_write_deadline() -> None:
    """As a TCP client: one that takes nothing for `write_deadline` is a slow consumer,
    long before `max_pending`; the publisher and its round trips are unaffected."""
    async with brook.serve(
        port=0, websocket=LISTENER, write_deadline_s=0.5, max_pending_bytes=256 * 1024 * 1024
    ) as srv:
        port = srv.websocket.port
        async with WsClient.connect(port) as stalled:
            await stalled.read_nats(b"\r\n")
            await stalled.send(frame(b'CONNECT {"verbose":false}\r\nSUB flood 1\r\nPING\r\n'))
            await stalled.read_nats(b"PONG\r\n")
            stalled.writer.transport.pause_reading()  # type: ignore[attr-defined]
            publisher = await nats.connect(ws_url(srv), allow_reconnect=False)
            try:
                for _ in range(400):  # 26 MB, far below max_pending
                    await publisher.publish("flood", b"x" * 65536)
                await publisher.flush(timeout=10)
                async with asyncio.timeout(10):
                    while srv.slow_consumers == 0:
                        await asyncio.sleep(0.05)
                assert await _round_trip_s(publisher) < 2
                assert len(srv.clients) == 1
            finally:
                await publisher.close()


async def test_websocket_clients_beside_tls_on_the_client_port(tmp_path: Path) -> None:
    """The client port's `tls {}` is not the WebSocket port's: a `ws://` client speaks
    plain WebSocket and is told no TLS is required, while TCP clients need TLS."""
    from brook.config.conf import parse_conf, settings_from_conf
    from tests.support.certs import make_certs

    certs = make_certs(tmp_path)
    settings = settings_from_conf(
        parse_conf(
            f'tls {{ cert_file: "{certs.cert_file}", key_file: "{certs.key_file}" }}\n'
            "websocket { port: -1, host: 127.0.0.1, no_tls: true }"
        )
    )
    async with brook.serve(settings=settings) as srv:
        ws = await nats.connect(ws_url(srv), allow_reconnect=False)
        tcp = await nats.connect(srv.url, tls=certs.context(), allow_reconnect=False)
        try:
            assert "tls_required" not in ws._server_info
            assert tcp._server_info["tls_required"] is True
            sub = await ws.subscribe("x")
            await ws.flush()
            await tcp.publish("x", b"over tls, to ws")
            assert (await sub.next_msg(timeout=2)).data == b"over tls, to ws"
        finally:
            await ws.close()
            await tcp.close()


async def test_wss_listener_logged_and_listed_as_wss(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A `tls {}` in the block: the listener is logged as nats-server logs it
    (`wss://`, without the no-TLS warning), the ports file lists `wss://` URLs, and a
    client's TLS version is known once it is in."""
    import logging

    from brook.config.conf import parse_conf, settings_from_conf
    from tests.support.certs import make_certs

    certs = make_certs(tmp_path)
    settings = settings_from_conf(
        parse_conf(
            "websocket { port: -1, host: 127.0.0.1, tls { "
            f'cert_file: "{certs.cert_file}", key_file: "{certs.key_file}" }} }}'
        )
    )
    caplog.set_level(logging.INFO, logger="brook.websocket")
    async with brook.serve(settings=settings) as srv:
        port = srv.websocket.port
        nc = await nats.connect(
            f"wss://127.0.0.1:{port}", tls=certs.context(), allow_reconnect=False
        )
        try:
            assert nc._server_info["tls_required"] is True
            [client] = srv.clients.values()
            assert client.tls
            assert client.tls_version in ("1.2", "1.3")
        finally:
            await nc.close()
        assert srv.websocket.reachable_urls() == [f"wss://127.0.0.1:{port}"]
    messages = [r.getMessage() for r in caplog.records]
    assert f"Listening for websocket clients on wss://127.0.0.1:{port}" in messages
    assert not any("DO NOT USE IN PRODUCTION" in m for m in messages)


async def test_wss_handshake_timeout_and_garbage_leave_other_clients_alone(
    tmp_path: Path,
) -> None:
    """On a wss:// port, a client silent past the tls `timeout` and one sending garbage
    instead of a ClientHello are closed (the latter after a fatal TLS alert, as
    nats-server's); a connected client's round trips go on."""
    from brook.config.conf import parse_conf, settings_from_conf
    from tests.support.certs import make_certs
    from tests.support.tlsalert import alert_records

    certs = make_certs(tmp_path)
    settings = settings_from_conf(
        parse_conf(
            "websocket { port: -1, host: 127.0.0.1, tls { timeout: 0.5, "
            f'cert_file: "{certs.cert_file}", key_file: "{certs.key_file}" }} }}'
        )
    )
    async with brook.serve(settings=settings) as srv:
        port = srv.websocket.port
        nc = await nats.connect(
            f"wss://127.0.0.1:{port}", tls=certs.context(), allow_reconnect=False
        )
        try:
            silent = await asyncio.open_connection("127.0.0.1", port)
            garbage = await asyncio.open_connection("127.0.0.1", port)
            garbage[1].write(b"\x16\x03\x01\x00\x10" + b"\xff" * 16 + b"GET / HTTP/1.1\r\n\r\n")
            started = time.monotonic()
            reply = await asyncio.wait_for(garbage[0].read(), 5)
            assert [alert[0] for alert in alert_records(reply)] == [2]  # fatal, then EOF
            await nc.flush(timeout=2)
            assert await asyncio.wait_for(silent[0].read(), 5) == b""  # closed, nothing sent
            assert 0.4 < time.monotonic() - started < 4
            await nc.flush(timeout=2)
            for _, writer in (silent, garbage):
                writer.close()
        finally:
            await nc.close()
