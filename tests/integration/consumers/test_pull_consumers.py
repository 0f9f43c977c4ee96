"""Pull consumers through nats-py's JetStream API against Brook (create, fetch, acks,
redelivery, info, names/list, delete)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.js.api import AckPolicy, ConsumerConfig
from nats.js.errors import NotFoundError

import brook
from tests.support.raw import PONG, Msg, RawClient

S = 1_000_000_000

pytestmark = pytest.mark.timeout(30)


async def test_goal_sequence(js: Any) -> None:
    await js.publish("s.a", b"1")
    psub = await js.pull_subscribe("s.>", durable="d")
    msgs = await psub.fetch(1, timeout=2)
    assert len(msgs) == 1
    assert msgs[0].subject == "s.a"
    assert msgs[0].data == b"1"
    assert msgs[0].metadata.sequence.stream == 1
    assert msgs[0].metadata.num_delivered == 1
    await msgs[0].ack()
    await asyncio.sleep(0.05)
    info = await js.consumer_info("S", "d")
    assert info.name == "d"
    assert info.stream_name == "S"
    assert info.config.durable_name == "d"
    assert info.delivered.stream_seq == 1
    assert info.ack_floor.stream_seq == 1
    assert info.num_ack_pending == 0
    assert info.num_pending == 0
    assert await js.delete_consumer("S", "d") is True
    with pytest.raises(NotFoundError):
        await js.consumer_info("S", "d")
    with pytest.raises(NotFoundError):
        await js.delete_consumer("S", "d")


async def test_fetch_more_than_available(js: Any) -> None:
    for i in range(3):
        await js.publish(f"s.{i}", str(i).encode())
    psub = await js.pull_subscribe("s.>", durable="d")
    loop = asyncio.get_running_loop()
    started = loop.time()
    msgs = await psub.fetch(10, timeout=2)
    assert loop.time() - started < 1.5  # ended by the server's 404, not the client timeout
    assert [m.data for m in msgs] == [b"0", b"1", b"2"]
    assert [m.subject for m in msgs] == ["s.0", "s.1", "s.2"]
    for m in msgs:
        await m.ack()
    # nats-py raises its TimeoutError or, now and then, asyncio's: both are TimeoutError.
    with pytest.raises(TimeoutError):  # nothing left: 404 then client timeout
        await psub.fetch(10, timeout=0.5)
    with pytest.raises(TimeoutError):
        await psub.fetch(1, timeout=0.5)  # a long poll that expires (408)
    # A message arriving during a long poll is delivered to it.
    task = asyncio.ensure_future(psub.fetch(1, timeout=2))
    await asyncio.sleep(0.2)
    await js.publish("s.late", b"late")
    msgs = await task
    assert [m.data for m in msgs] == [b"late"]


async def test_ack_sync_nak_term_in_progress(js: Any) -> None:
    for i in range(3):
        await js.publish("s.x", str(i).encode())
    psub = await js.pull_subscribe("s.>", durable="d")
    msgs = await psub.fetch(3, timeout=2)
    assert len(msgs) == 3
    await msgs[0].ack_sync()  # the server answers the ack's reply
    await msgs[1].in_progress()
    await msgs[2].term()
    await msgs[1].nak()
    again = await psub.fetch(1, timeout=2)
    assert again[0].data == b"1"
    assert again[0].metadata.num_delivered == 2
    await again[0].ack_sync()
    info = await js.consumer_info("S", "d")
    assert info.num_ack_pending == 0
    assert info.num_redelivered == 0
    assert info.delivered.consumer_seq == 4
    assert info.ack_floor.stream_seq == 3


async def test_redelivery_after_ack_wait(js: Any) -> None:
    await js.publish("s.a", b"x")
    psub = await js.pull_subscribe(
        "s.>", durable="d", config=ConsumerConfig(ack_wait=0.3, ack_policy=AckPolicy.EXPLICIT)
    )
    first = await psub.fetch(1, timeout=2)
    assert first[0].metadata.num_delivered == 1
    second = await psub.fetch(1, timeout=2)  # redelivered once ack_wait has passed
    assert second[0].data == b"x"
    assert second[0].metadata.num_delivered == 2
    assert second[0].metadata.sequence.stream == 1
    info = await js.consumer_info("S", "d")
    assert info.num_redelivered == 1
    await second[0].ack()


async def test_ephemeral_pull_consumer(js: Any) -> None:
    await js.publish("s.a", b"1")
    psub = await js.pull_subscribe("s.>", durable=None)
    msgs = await psub.fetch(1, timeout=2)
    assert msgs[0].data == b"1"
    await msgs[0].ack()
    info = await psub.consumer_info()
    assert info.config.durable_name is None
    assert info.config.inactive_threshold  # the ephemeral default
    # Server-named ephemeral (CONSUMER.CREATE.<S>).
    created = await js.add_consumer("S", ConsumerConfig(ack_policy=AckPolicy.EXPLICIT))
    assert created.name
    assert len(created.name) == 8
    assert (await js.consumer_info("S", created.name)).name == created.name


async def test_ephemeral_is_removed_when_inactive(js: Any) -> None:
    created = await js.add_consumer(
        "S", ConsumerConfig(ack_policy=AckPolicy.EXPLICIT, inactive_threshold=0.3)
    )
    await asyncio.sleep(0.8)
    with pytest.raises(NotFoundError):
        await js.consumer_info("S", created.name)


async def test_names_list_and_stream_state(js: Any) -> None:
    await js.add_consumer("S", ConsumerConfig(durable_name="b", ack_policy=AckPolicy.EXPLICIT))
    await js.add_consumer("S", ConsumerConfig(durable_name="a", ack_policy=AckPolicy.EXPLICIT))
    assert sorted(c.name for c in await js.consumers_info("S")) == ["a", "b"]
    si = await js.stream_info("S")
    assert si.state.consumer_count == 2
    # Idempotent create, conflicting create.
    await js.add_consumer("S", ConsumerConfig(durable_name="a", ack_policy=AckPolicy.EXPLICIT))
    await js.delete_consumer("S", "a")
    si = await js.stream_info("S")
    assert si.state.consumer_count == 1


async def test_consumer_names_raw(nc: Any, js: Any) -> None:
    await js.add_consumer("S", ConsumerConfig(durable_name="x", ack_policy=AckPolicy.EXPLICIT))
    reply = json.loads((await nc.request("$JS.API.CONSUMER.NAMES.S", b"", timeout=2)).data)
    assert reply["type"] == "io.nats.jetstream.api.v1.consumer_names_response"
    assert reply["consumers"] == ["x"]
    assert reply["total"] == 1
    reply = json.loads((await nc.request("$JS.API.CONSUMER.LIST.S", b"", timeout=2)).data)
    assert [c["name"] for c in reply["consumers"]] == ["x"]


async def test_missing_consumer_gets_no_responders(nc: Any, js: Any) -> None:
    with pytest.raises(nats.errors.NoRespondersError):
        await nc.request("$JS.API.CONSUMER.MSG.NEXT.S.nope", b"1", timeout=1)


async def test_delete_sends_consumer_deleted_to_waiting(nc: Any, js: Any) -> None:
    await js.add_consumer("S", ConsumerConfig(durable_name="d", ack_policy=AckPolicy.EXPLICIT))
    sub = await nc.subscribe("pull.inbox")
    await nc.publish("$JS.API.CONSUMER.MSG.NEXT.S.d", b'{"batch":1}', reply="pull.inbox")
    await nc.flush()
    await js.delete_consumer("S", "d")
    msg = await sub.next_msg(timeout=2)
    assert msg.headers is not None
    assert msg.headers.get("Status") == "409"
    assert msg.headers.get("Description") == "Consumer Deleted"


async def test_request_whose_inbox_went_away_is_skipped(nc: Any, js: Any) -> None:
    """A waiting request without expiry whose client unsubscribed must not swallow the next
    message (nats-server checks the reply's interest before serving a request)."""
    await js.add_consumer("S", ConsumerConfig(durable_name="gone", ack_wait=30))
    dead = await nc.subscribe("dead.inbox")
    await nc.publish("$JS.API.CONSUMER.MSG.NEXT.S.gone", b'{"batch":1}', reply="dead.inbox")
    await nc.flush()
    await dead.unsubscribe()
    psub = await js.pull_subscribe_bind("gone", "S")
    await js.publish("s.a", b"for the living")
    msgs = await psub.fetch(1, timeout=2)
    assert [m.data for m in msgs] == [b"for the living"]


async def test_request_on_an_inbox_nobody_listens_to_takes_nothing(nc: Any, js: Any) -> None:
    """nats-py's PullSubscribeTest::test_pull_subscribe_limits: after `unsubscribe()` a
    fetch on the old inbox must leave the message pending (num_pending 1, as nats-server
    reports), not deliver it into the void where it would wait for its ack_wait."""
    await js.add_consumer("S", ConsumerConfig(durable_name="d", ack_wait=30))
    await js.publish("s.a", b"last message")
    await nc.publish("$JS.API.CONSUMER.MSG.NEXT.S.d", b'{"batch":1}', reply="nobody.here")
    await nc.flush()
    info = await js.consumer_info("S", "d")
    assert (info.num_pending, info.num_ack_pending, info.num_waiting) == (1, 0, 0)
    assert info.delivered.stream_seq == 0


async def test_request_past_its_expiry_gets_408_not_the_message(tmp_path: Path) -> None:
    """nats-py's PullSubscribeTest::test_fetch_heartbeats: a message stored after a pull
    request expired, before the timer that ends the request has fired, went to the
    request (whose client had given up) instead of staying for the next fetch. The
    engine's clock is a manual one here, so "after the expiry" is exact."""
    async with brook.serve(port=0, store_dir=str(tmp_path / "store")) as server:
        clock = [1_000 * S]
        server.jetstream.now_ns = lambda: clock[0]
        nc = await nats.connect(server.url, allow_reconnect=False)
        js = nc.jetstream()
        await js.add_stream(name="S", subjects=["s.>"])
        await js.add_consumer("S", ConsumerConfig(durable_name="d", ack_wait=30))
        sub = await nc.subscribe("fetch.inbox")
        request = json.dumps({"batch": 1, "expires": S})
        await nc.publish("$JS.API.CONSUMER.MSG.NEXT.S.d", request.encode(), reply="fetch.inbox")
        await nc.flush()
        clock[0] += S  # the request's expiry; its timer is a real second away
        await js.publish("s.a", b"for the next fetch")
        status = await sub.next_msg(timeout=2)
        assert status.headers is not None
        assert status.headers.get("Status") == "408"
        info = await js.consumer_info("S", "d")
        assert (info.num_pending, info.num_ack_pending) == (1, 0)
        psub = await js.pull_subscribe_bind("d", "S")
        assert [m.data for m in await psub.fetch(1, timeout=2)] == [b"for the next fetch"]
        await nc.close()


async def test_expiry_by_max_age_updates_num_pending(nc: Any) -> None:
    js = nc.jetstream()
    await js.add_stream(name="AGE", subjects=["age.>"], max_age=0.4)
    for i in range(3):
        await js.publish("age.a", str(i).encode())
    await js.add_consumer("AGE", ConsumerConfig(durable_name="c"))
    assert (await js.consumer_info("AGE", "c")).num_pending == 3
    for _ in range(40):
        await asyncio.sleep(0.1)
        if (await js.stream_info("AGE")).state.messages == 0:
            break
    assert (await js.consumer_info("AGE", "c")).num_pending == 0


async def test_reset_moves_the_consumer_and_survives_a_restart(tmp_path: Path) -> None:
    """CONSUMER.RESET (nats-server 2.14+): pending deliveries are forgotten, the next fetch
    starts at the reset sequence with fresh delivery counts, and the reset is on disk before
    it is answered; a consumer that does not exist gets no answer, as from nats-server."""
    store = str(tmp_path / "store")
    async with brook.serve(port=0, store_dir=store) as server:
        nc = await nats.connect(server.url, allow_reconnect=False)
        js = nc.jetstream()
        await js.add_stream(name="S", subjects=["s.>"])
        for i in range(5):
            await js.publish(f"s.{i}", str(i).encode())
        await js.add_consumer("S", ConsumerConfig(durable_name="d", ack_policy=AckPolicy.EXPLICIT))
        psub = await js.pull_subscribe_bind("d", "S")
        msgs = await psub.fetch(3, timeout=2)
        await msgs[0].ack_sync()
        reply = await nc.request("$JS.API.CONSUMER.RESET.S.d", b'{"seq": 2}', timeout=5)
        answer = json.loads(reply.data)
        assert answer["type"] == "io.nats.jetstream.api.v1.consumer_reset_response"
        assert answer["reset_seq"] == 2
        assert answer["delivered"] == {"consumer_seq": 0, "stream_seq": 1}
        assert (answer["num_ack_pending"], answer["num_pending"]) == (0, 4)
        with pytest.raises(nats.errors.TimeoutError):
            await nc.request("$JS.API.CONSUMER.RESET.S.nope", b"", timeout=0.5)
        await nc.close()
    async with brook.serve(port=0, store_dir=store) as server:
        nc = await nats.connect(server.url, allow_reconnect=False)
        js = nc.jetstream()
        info = await js.consumer_info("S", "d")
        assert (info.delivered.stream_seq, info.ack_floor.stream_seq) == (1, 1)
        psub = await js.pull_subscribe_bind("d", "S")
        again = await psub.fetch(1, timeout=2)
        meta = again[0].metadata
        assert (meta.sequence.stream, meta.sequence.consumer, meta.num_delivered) == (2, 1, 1)
        await nc.close()


async def test_waiting_requests_get_409_server_shutdown(tmp_path: Path) -> None:
    """A graceful stop answers every waiting pull request with what it still wanted, so
    clients ask again once reconnected (nats.py's ordered consumer resumes so)."""
    async with brook.serve(port=0, store_dir=str(tmp_path / "store")) as server:
        nc = await nats.connect(server.url, allow_reconnect=False)
        js = nc.jetstream()
        await js.add_stream(name="S", subjects=["s.>"])
        await js.add_consumer("S", ConsumerConfig(durable_name="d", ack_policy=AckPolicy.EXPLICIT))
        await nc.close()
        async with RawClient.connect_url(server.url) as raw:
            await raw.handshake()
            await raw.send(b"SUB in.a 1\r\nSUB in.b 2\r\n")
            requests = [(b"in.a", b'{"batch":3}'), (b"in.b", b'{"batch":2,"max_bytes":512}')]
            for reply, body in requests:
                await raw.send(
                    b"PUB $JS.API.CONSUMER.MSG.NEXT.S.d %b %d\r\n%b\r\n" % (reply, len(body), body)
                )
            await raw.send(b"PING\r\n")
            await raw.read_ops(until=lambda op: op == PONG)
            await server.shutdown()
            ops = await raw.read_ops(timeout=5, allow_eof=True)
    frames = sorted((op.subject, op.header) for op in ops if isinstance(op, Msg))
    assert frames == [
        (b"in.a", b"NATS/1.0 409 Server Shutdown\r\nNats-Pending-Messages: 3\r\n"
                  b"Nats-Pending-Bytes: 0\r\n\r\n"),
        (b"in.b", b"NATS/1.0 409 Server Shutdown\r\nNats-Pending-Messages: 2\r\n"
                  b"Nats-Pending-Bytes: 512\r\n\r\n"),
    ]  # fmt: skip
