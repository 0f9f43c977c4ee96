"""Interest and workqueue retention through nats-py against a live Brook (retention.py).

Every expectation here was first observed on nats-server 2.15.1 (the side-by-side scenarios
are in tests/conformance/test_retention_conformance.py); restarts (clean and SIGKILL) check
that what all consumers acknowledged stays gone and what some consumer still holds stays.
"""

from __future__ import annotations

import json
import signal
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.js.api import RetentionPolicy

import brook
from tests.support.brookproc import start_brook
from tests.support.natsserver import free_port

pytestmark = pytest.mark.timeout(60)

INTEREST = RetentionPolicy.INTEREST
WORKQUEUE = RetentionPolicy.WORK_QUEUE


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[Any]:
    async with brook.serve(port=0, store_dir=str(tmp_path / "store")) as srv:
        yield srv


@pytest.fixture
async def nc(server: Any) -> AsyncIterator[Any]:
    conn = await nats.connect(server.url, allow_reconnect=False)
    yield conn
    await conn.close()


@pytest.fixture
def js(nc: Any) -> Any:
    return nc.jetstream()


async def state(js: Any, stream: str = "R") -> tuple[int, int, int]:
    """(messages, first_seq, last_seq)"""
    s = (await js.stream_info(stream)).state
    return s.messages, s.first_seq, s.last_seq


async def api(nc: Any, subject: str, body: Any = None) -> Any:
    data = b"" if body is None else json.dumps(body).encode()
    return json.loads((await nc.request(subject, data, timeout=5)).data)


async def create(nc: Any, stream: str, name: str, **config: Any) -> Any:
    """A durable consumer through the raw API (the answer, error or info, as sent)."""
    body = {"stream_name": stream, "config": {"durable_name": name, **config}}
    return await api(nc, f"$JS.API.CONSUMER.CREATE.{stream}.{name}", body)


async def pull(js: Any, name: str, n: int, stream: str = "R") -> list[Any]:
    """Fetch exactly `n` messages from the durable pull consumer `name`."""
    psub = await js.pull_subscribe_bind(name, stream=stream)
    msgs: list[Any] = []
    while len(msgs) < n:
        msgs += await psub.fetch(n - len(msgs), timeout=2)
    await psub.unsubscribe()
    return msgs


async def publish(js: Any, *subjects: str) -> list[int]:
    return [(await js.publish(s, b"x")).seq for s in subjects]


async def late_ack(nc: Any, msg: Any) -> None:
    """Ack a message nats-py already NAKed (it refuses to ack it twice), synchronously."""
    await nc.request(msg.reply, b"+ACK", timeout=5)


# ------------------------------------------------------------------ interest


@pytest.mark.parametrize("storage", ["memory", "file"])
async def test_interest_without_consumers_keeps_nothing(js: Any, storage: str) -> None:
    await js.add_stream(name="R", subjects=["r.>"], retention=INTEREST, storage=storage)
    assert await publish(js, "r.a", "r.b") == [1, 2]
    first = await js.publish("r.a", b"x", headers={"Nats-Msg-Id": "m1"})
    again = await js.publish("r.a", b"x", headers={"Nats-Msg-Id": "m1"})
    assert (first.seq, again.seq, again.duplicate) == (3, 3, True)  # dedup still applies
    assert await state(js) == (0, 4, 3)


@pytest.mark.parametrize("storage", ["memory", "file"])
async def test_interest_removes_once_every_consumer_acked(nc: Any, js: Any, storage: str) -> None:
    await js.add_stream(name="R", subjects=["r.>"], retention=INTEREST, storage=storage)
    for name in ("c1", "c2"):
        assert "error" not in await create(nc, "R", name, ack_policy="explicit")
    await publish(js, "r.a", "r.a", "r.a")
    for m in await pull(js, "c1", 3):
        await m.ack_sync()
    assert await state(js) == (3, 1, 3)  # c2 still holds all three
    got = await pull(js, "c2", 3)
    await got[1].ack_sync()
    assert await state(js) == (2, 1, 3)
    await got[0].ack_sync()
    assert await state(js) == (1, 3, 3)
    await got[2].term()  # a terminated message is done with too
    await js.consumer_info("R", "c2")  # a round trip: the TERM has been processed
    assert await state(js) == (0, 4, 3)


async def test_ack_none_releases_at_delivery_and_ack_all_below(nc: Any, js: Any) -> None:
    await js.add_stream(name="R", subjects=["r.>"], retention=INTEREST)
    await create(nc, "R", "none", ack_policy="none")
    await publish(js, "r.a", "r.a")
    assert await state(js) == (2, 1, 2)
    await pull(js, "none", 1)
    assert await state(js) == (1, 2, 2)
    await js.delete_consumer("R", "none")
    await create(nc, "R", "all", ack_policy="all")
    await publish(js, "r.a", "r.a", "r.a")
    got = await pull(js, "all", 3)
    await got[1].ack_sync()  # acknowledges 3 and 4
    assert await state(js) == (1, 5, 5)


async def test_nak_keeps_and_late_ack_releases_a_dead_letter(nc: Any, js: Any) -> None:
    """A message given up on after max_deliver stays (nats-server keeps it for inspection,
    even once every other consumer acked it) until its consumer acks it late."""
    await js.add_stream(name="R", subjects=["r.>"], retention=INTEREST)
    await create(nc, "R", "a", ack_policy="explicit", max_deliver=1)
    await create(nc, "R", "b", ack_policy="explicit")
    await publish(js, "r.a", "r.a")
    late = await pull(js, "a", 2)
    await late[0].nak()  # max_deliver 1: a dead letter now
    await late[1].nak()
    for m in await pull(js, "b", 2):
        await m.ack_sync()
    assert await state(js) == (2, 1, 2)
    await late_ack(nc, late[0])
    assert await state(js) == (1, 2, 2)
    await js.delete_consumer("R", "a")  # its interest in the other dead letter goes too
    assert await state(js) == (0, 3, 2)


async def test_deleting_consumers_releases_their_interest(nc: Any, js: Any) -> None:
    await js.add_stream(name="R", subjects=["r.>"], retention=INTEREST)
    await create(nc, "R", "done", ack_policy="explicit")
    await create(nc, "R", "slow", ack_policy="explicit")
    await publish(js, "r.a", "r.a", "r.a")
    for m in await pull(js, "done", 3):
        await m.ack_sync()
    await pull(js, "slow", 1)  # one pending, two never delivered
    await create(nc, "R", "later", ack_policy="explicit", deliver_policy="new")
    assert await state(js) == (3, 1, 3)
    await js.delete_consumer("R", "slow")  # "later" starts after them: nobody holds them
    assert await state(js) == (0, 4, 3)
    await publish(js, "r.a")
    await js.delete_consumer("R", "later")  # the last consumer going purges the stream
    await js.delete_consumer("R", "done")
    assert await state(js) == (0, 5, 4)


async def test_filtered_consumers_hold_only_their_subjects(nc: Any, js: Any) -> None:
    await js.add_stream(name="R", subjects=["r.>"], retention=INTEREST)
    await create(nc, "R", "fa", ack_policy="explicit", filter_subject="r.a")
    await create(nc, "R", "fb", ack_policy="explicit", filter_subject="r.b")
    assert await publish(js, "r.a", "r.b", "r.c", "r.a") == [1, 2, 3, 4]
    assert await state(js) == (3, 1, 4)  # r.c matched no consumer: not kept
    for m in await pull(js, "fa", 2):
        await m.ack_sync()
    assert await state(js) == (1, 2, 4)
    # Changing a filter releases what only the old filter held.
    await publish(js, "r.b")
    reply = await create(nc, "R", "fb", ack_policy="explicit", filter_subject="r.c")
    assert "error" not in reply
    assert await state(js) == (0, 6, 5)


async def test_push_consumer_without_subscriber_still_holds(nc: Any, js: Any) -> None:
    await js.add_stream(name="R", subjects=["r.>"], retention=INTEREST)
    await create(nc, "R", "p", ack_policy="explicit", deliver_subject="nobody.listens")
    await create(nc, "R", "pn", ack_policy="none", deliver_subject="nobody.either")
    await publish(js, "r.a", "r.a")
    assert await state(js) == (2, 1, 2)
    sub = await nc.subscribe("nobody.either")
    await sub.next_msg(timeout=2)
    await sub.next_msg(timeout=2)
    await sub.unsubscribe()
    assert await state(js) == (2, 1, 2)  # "p" still holds them


async def test_publish_without_interest_skips_limits_but_applies_rollup(nc: Any, js: Any) -> None:
    await js.add_stream(
        name="R",
        subjects=["r.>"],
        retention=INTEREST,
        max_msgs=1,
        discard="new",
        allow_rollup_hdrs=True,
    )
    await create(nc, "R", "fa", ack_policy="explicit", filter_subject="r.a")
    assert await publish(js, "r.a", "r.b") == [1, 2]  # r.b is not refused by max_msgs
    with pytest.raises(nats.js.errors.APIError, match="maximum messages exceeded"):
        await js.publish("r.a", b"x")
    ack = await js.publish("r.b", b"x", headers={"Nats-Rollup": "all"})
    assert ack.seq == 3
    assert await state(js) == (0, 4, 3)


# ------------------------------------------------------------------ workqueue


@pytest.mark.parametrize("storage", ["memory", "file"])
async def test_workqueue_removes_on_ack_and_keeps_after_delete(
    nc: Any, js: Any, storage: str
) -> None:
    await js.add_stream(name="R", subjects=["r.>"], retention=WORKQUEUE, storage=storage)
    await publish(js, "r.a", "r.b", "r.a")
    assert await state(js) == (3, 1, 3)  # kept without consumers
    await create(nc, "R", "wa", ack_policy="explicit", filter_subject="r.a", max_deliver=1)
    got = await pull(js, "wa", 2)
    await got[0].ack_sync()
    await got[1].nak()  # max_deliver 1: a dead letter, kept
    assert await state(js) == (2, 2, 3)
    await js.delete_consumer("R", "wa")  # a workqueue keeps messages for the next one
    assert await state(js) == (2, 2, 3)
    await create(nc, "R", "all", ack_policy="explicit")
    for m in await pull(js, "all", 2):
        await m.ack_sync()
    assert await state(js) == (0, 4, 3)


async def test_workqueue_late_ack_of_dead_letter_removes_it(nc: Any, js: Any) -> None:
    await js.add_stream(name="R", subjects=["r.>"], retention=WORKQUEUE)
    await create(nc, "R", "w", ack_policy="explicit", max_deliver=1)
    await publish(js, "r.a")
    (m,) = await pull(js, "w", 1)
    await m.nak()
    assert await state(js) == (1, 1, 1)
    await late_ack(nc, m)
    assert await state(js) == (0, 2, 1)


WQ_ERRORS = {
    10084: "consumer in pull mode requires explicit ack policy on workqueue stream",
    10098: "workqueue stream requires explicit ack",
    10099: "multiple non-filtered consumers not allowed on workqueue stream",
    10100: "filtered consumer not unique on workqueue stream",
    10101: "consumer must be deliver all on workqueue stream",
}


async def test_workqueue_consumer_rules(nc: Any, js: Any) -> None:
    await js.add_stream(name="R", subjects=["r.>"], retention=WORKQUEUE)

    async def error(name: str, **config: Any) -> int | None:
        reply = await create(nc, "R", name, **config)
        if "error" not in reply:
            return None
        err = reply["error"]
        assert (err["code"], err["description"]) == (400, WQ_ERRORS[err["err_code"]])
        return int(err["err_code"])

    assert await error("x", ack_policy="none") == 10084
    assert await error("x", ack_policy="all") == 10098
    assert await error("x", ack_policy="none", deliver_subject="d.x") == 10098
    assert await error("x", ack_policy="explicit", deliver_policy="new") == 10101
    assert await error("a", ack_policy="explicit", filter_subject="r.a") is None
    assert await error("b", ack_policy="explicit", filter_subject="r.b") is None
    assert await error("x", ack_policy="explicit") == 10099
    assert await error("x", ack_policy="explicit", filter_subject="r.*") == 10100
    assert await error("x", ack_policy="explicit", filter_subjects=["r.c", "r.b"]) == 10100
    # Updates: a new filter may not overlap another consumer's, and that is checked before
    # the fields that may not change (ack policy) ...
    assert await error("a", ack_policy="explicit", filter_subject="r.b") == 10100
    assert await error("a", ack_policy="all", filter_subject="r.b") == 10100
    assert await error("a", ack_policy="explicit", filter_subject="r.a") is None  # same
    # ... while an update to no filter at all passes, as on nats-server.
    assert await error("a", ack_policy="explicit") is None
    assert await error("c", ack_policy="explicit", filter_subject="r.c") == 10100


# ------------------------------------------------------------------ stream updates


async def test_switching_limits_to_interest_and_back(nc: Any, js: Any) -> None:
    await js.add_stream(name="L", subjects=["l.>"])
    await publish(js, "l.a", "l.a", "l.a")
    await js.update_stream(name="L", subjects=["l.>"], retention=INTEREST)
    assert await state(js, "L") == (0, 4, 3)  # no consumers: nothing is kept
    await create(nc, "L", "c", ack_policy="explicit", filter_subject="l.a")
    await js.update_stream(name="L", subjects=["l.>"])  # back to limits
    await publish(js, "l.a", "l.b", "l.a")
    got = await pull(js, "c", 2, stream="L")
    await got[1].ack_sync()
    assert await state(js, "L") == (3, 4, 6)  # limits: acks remove nothing
    await js.update_stream(name="L", subjects=["l.>"], retention=INTEREST)
    # 6 was acked by the only consumer matching it; 4 is pending; 5 (l.b) no consumer
    # ever matched, and nats-server keeps it.
    assert await state(js, "L") == (2, 4, 6)
    await got[0].ack_sync()  # interest again: the ack removes it
    assert await state(js, "L") == (1, 5, 6)
    reply = await api(
        nc,
        "$JS.API.STREAM.UPDATE.L",
        {"name": "L", "subjects": ["l.>"], "retention": "workqueue"},
    )
    assert reply["error"] == {
        "code": 500,
        "err_code": 10052,
        "description": "stream configuration update can not change retention policy "
        "to/from workqueue",
    }


# ------------------------------------------------------------------ restarts


async def test_clean_restart_keeps_retention_consistent(tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    async with brook.serve(port=0, store_dir=store) as srv:
        conn = await nats.connect(srv.url)
        js = conn.jetstream()
        await js.add_stream(name="R", subjects=["r.>"], retention=INTEREST)
        await js.add_stream(name="E", subjects=["e.>"], retention=INTEREST)
        await create(conn, "R", "fast", ack_policy="explicit")
        await create(conn, "R", "slow", ack_policy="explicit", max_deliver=1)
        await publish(js, *["r.a"] * 5)
        for m in await pull(js, "fast", 5):
            await m.ack_sync()
        slow = await pull(js, "slow", 3)
        await slow[0].ack_sync()
        await slow[1].nak()  # at max_deliver: given up on when it next comes up (below)
        (fourth,) = await pull(js, "slow", 1)  # a dead letter now, kept across the restart
        assert fourth.metadata.sequence.stream == 4
        await fourth.ack_sync()
        # Only an ephemeral consumer holds E's messages: Brook does not restore it.
        await js.pull_subscribe("e.>", stream="E")
        await publish(js, "e.a", "e.a")
        assert await state(js, "E") == (2, 1, 2)
        await conn.close()
    async with brook.serve(port=0, store_dir=store) as srv:
        conn = await nats.connect(srv.url)
        js = conn.jetstream()
        assert await state(js) == (3, 2, 5)
        assert await state(js, "E") == (0, 3, 2)
        for m in await pull(js, "slow", 1):  # 5 (3 is pending, its ack wait is 30 s)
            await m.ack_sync()
        info = await js.consumer_info("R", "slow")
        assert (info.num_ack_pending, info.num_pending) == (1, 0)
        assert await state(js) == (2, 2, 5)
        await late_ack(conn, slow[1])  # the late ack of the dead letter, across the restart
        assert await state(js) == (1, 3, 5)
        await conn.close()


async def test_damaged_consumer_file_removes_nothing_at_start(tmp_path: Path) -> None:
    """A consumer that cannot be restored may hold messages: the start-up sweep is skipped."""
    store = tmp_path / "store"
    async with brook.serve(port=0, store_dir=str(store)) as srv:
        conn = await nats.connect(srv.url)
        js = conn.jetstream()
        await js.add_stream(name="R", subjects=["r.>"], retention=INTEREST)
        await create(conn, "R", "done", ack_policy="explicit")
        await create(conn, "R", "held", ack_policy="explicit")
        await publish(js, "r.a", "r.a")
        for m in await pull(js, "done", 2):
            await m.ack_sync()
        await conn.close()
    (store / "streams" / "R" / "consumers" / "held.json").write_text("{not json")
    async with brook.serve(port=0, store_dir=str(store)) as srv:
        conn = await nats.connect(srv.url)
        js = conn.jetstream()
        assert await state(js) == (2, 1, 2)
        await conn.close()


async def test_sigkill_keeps_retention_consistent(tmp_path: Path) -> None:
    """Acks in flight when the server is killed: after the restart every message is either
    gone (all its consumers were done) or delivered again; none is both or neither."""
    store = tmp_path / "store"
    port = free_port()
    url = f"nats://127.0.0.1:{port}"
    proc = start_brook(store, port)
    try:
        conn = await nats.connect(url, allow_reconnect=False)
        js = conn.jetstream()
        await js.add_stream(name="R", subjects=["r.>"], retention=INTEREST)
        await js.add_stream(name="W", subjects=["w.>"], retention=WORKQUEUE)
        for name in ("i1", "i2"):
            await create(conn, "R", name, ack_policy="explicit", ack_wait=500_000_000)
        await create(conn, "W", "w", ack_policy="explicit", ack_wait=500_000_000)
        await publish(js, *["r.a"] * 20)
        await publish(js, *["w.a"] * 20)
        for m in await pull(js, "i1", 20):
            await m.ack_sync()
        i2 = await pull(js, "i2", 20)
        for m in i2[:10]:
            await m.ack_sync()  # 1..10: acknowledged by both, durably
        wq = await pull(js, "w", 20, stream="W")
        for m in wq[:10]:
            await m.ack_sync()
        for m in i2[10:15] + wq[10:15]:
            await m.ack()  # in flight when the server dies
        await conn.flush()
        proc.send_signal(signal.SIGKILL)
        proc.wait(5)
        await conn.close()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
    proc = start_brook(store, port)
    try:
        conn = await nats.connect(url, allow_reconnect=False)
        js = conn.jetstream()
        for stream, name in (("R", "i2"), ("W", "w")):
            left = await state(js, stream)
            assert 5 <= left[0] <= 10, (stream, left)
            assert left[2] == 20, (stream, left)
            psub = await js.pull_subscribe_bind(name, stream=stream)
            seqs: list[int] = []
            while len(seqs) < left[0]:
                for m in await psub.fetch(left[0] - len(seqs), timeout=3):
                    seqs.append(m.metadata.sequence.stream)
                    await m.ack_sync()
            assert sorted(seqs) == list(range(21 - left[0], 21)), (stream, seqs)
            assert await state(js, stream) == (0, 21, 20)
        await conn.close()
    finally:
        proc.kill()
        proc.wait(5)
