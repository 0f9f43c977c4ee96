"""Stream management and publishing through nats-py's JetStream API against Brook."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.js.api import StorageType, StreamConfig
from nats.js.errors import APIError, BadRequestError, NotFoundError

import brook

pytestmark = pytest.mark.timeout(30)


@pytest.fixture(params=["memory", "file"])
def storage(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
async def js_server(tmp_path: Path) -> AsyncIterator[Any]:
    async with brook.serve(port=0, store_dir=str(tmp_path / "store")) as server:
        yield server


@pytest.fixture
async def js(js_server: Any) -> AsyncIterator[Any]:
    nc = await nats.connect(js_server.url, allow_reconnect=False)
    yield nc.jetstream()
    await nc.close()


async def test_add_info_update_delete(js: Any, storage: str) -> None:
    info = await js.add_stream(name="ORDERS", subjects=["orders.>"], storage=storage)
    assert info.config.name == "ORDERS"
    assert getattr(info.config.storage, "value", info.config.storage) == storage
    assert info.config.duplicate_window == 120.0
    assert info.state.messages == 0
    # Idempotent create; a different config under the same name is refused.
    await js.add_stream(name="ORDERS", subjects=["orders.>"], storage=storage)
    with pytest.raises(BadRequestError) as err:
        await js.add_stream(name="ORDERS", subjects=["orders.>"], storage=storage, max_msgs=5)
    assert err.value.err_code == 10058
    updated = await js.update_stream(
        StreamConfig(
            name="ORDERS",
            subjects=["orders.>"],
            storage=StorageType(storage),
            max_msgs=5,
            description="v2",
        )
    )
    assert (updated.config.max_msgs, updated.config.description) == (5, "v2")
    await js.delete_stream("ORDERS")
    with pytest.raises(NotFoundError):
        await js.stream_info("ORDERS")


async def test_publish_ack_dedup_and_expected_headers(js: Any, storage: str) -> None:
    await js.add_stream(name="P", subjects=["p.>"], storage=storage)
    first = await js.publish("p.a", b"one", headers={"Nats-Msg-Id": "m1"})
    assert (first.stream, first.seq, first.duplicate) == ("P", 1, None)
    again = await js.publish("p.a", b"one", headers={"Nats-Msg-Id": "m1"})
    assert (again.seq, again.duplicate) == (1, True)
    ok = await js.publish("p.b", b"two", headers={"Nats-Expected-Last-Sequence": "1"})
    assert ok.seq == 2
    with pytest.raises(BadRequestError) as wrong:
        await js.publish("p.b", b"two", headers={"Nats-Expected-Last-Sequence": "1"})
    assert wrong.value.err_code == 10071
    assert wrong.value.description == "wrong last sequence: 2"
    with pytest.raises(BadRequestError) as other:
        await js.publish("p.c", b"x", stream="OTHER")
    assert other.value.err_code == 10060
    state = (await js.stream_info("P")).state
    assert (state.messages, state.first_seq, state.last_seq) == (2, 1, 2)


async def test_batch_publishes_are_refused_and_not_stored(js_server: Any, storage: str) -> None:
    """A stream without `allow_atomic`/`allow_batched` refuses
    a `Nats-Batch-Id` publish with 10174 and a fast-batch (`.$FI` reply) one with 10205,
    and stores neither, acknowledged or not; `Nats-Batch-Sequence` alone is no batch."""
    nc = await nats.connect(js_server.url, allow_reconnect=False)
    js = nc.jetstream()
    await js.add_stream(name="B", subjects=["b.>"], storage=storage)
    batch = {"Nats-Batch-Id": "b1", "Nats-Batch-Sequence": "1"}
    with pytest.raises(BadRequestError) as atomic:
        await js.publish("b.a", b"1", headers=batch)
    assert (atomic.value.err_code, atomic.value.description) == (
        10174,
        "atomic publish is disabled",
    )
    await nc.publish("b.a", b"no reply", headers={"Nats-Batch-Id": "b2"})
    answers = await nc.subscribe("in.b3.10.fail.1.0.$FI")
    await nc.publish("b.a", b"fast", reply="in.b3.10.fail.1.0.$FI")
    refused = json.loads((await answers.next_msg(timeout=2)).data)
    assert refused["error"]["err_code"] == 10205
    ack = await js.publish("b.a", b"plain", headers={"Nats-Batch-Sequence": "1"})
    assert ack.seq == 1, "nothing of the batches took a sequence"
    assert (await js.stream_info("B")).state.messages == 1
    await nc.close()


async def test_headers_and_payload_stored_byte_exact(js: Any, storage: str) -> None:
    await js.add_stream(name="B", subjects=["b"], storage=storage)
    payload = bytes(range(256)) * 64
    await js.publish("b", payload, headers={"X-One": "1", "X-Two": "a: b"})
    await js.publish("b", b"")
    msg = await js.get_msg("B", 1)
    assert msg.data == payload
    assert msg.headers == {"X-One": "1", "X-Two": "a: b"}
    empty = await js.get_msg("B", 2)
    assert (empty.data, empty.headers) in ((b"", None), (None, None))


async def test_get_by_sequence_last_and_next_by_subject(js: Any, storage: str) -> None:
    await js.add_stream(name="G", subjects=["g.>"], storage=storage)
    for subject, data in (("g.a", b"1"), ("g.b", b"2"), ("g.a", b"3"), ("g.c", b"4")):
        await js.publish(subject, data)
    assert (await js.get_msg("G", 2)).data == b"2"
    assert (await js.get_last_msg("G", "g.a")).seq == 3
    assert (await js.get_last_msg("G", "g.*")).seq == 4
    nxt = await js.get_msg("G", seq=1, next=True, subject="g.b")
    assert (nxt.seq, nxt.subject) == (2, "g.b")
    with pytest.raises(NotFoundError):
        await js.get_msg("G", 99)


async def test_delete_message_and_purge_variants(js: Any, storage: str) -> None:
    await js.add_stream(name="D", subjects=["d.>"], storage=storage)
    for i in range(6):
        await js.publish("d.a" if i % 2 == 0 else "d.b", b"%d" % i)
    assert await js.delete_msg("D", 2)
    with pytest.raises(BadRequestError) as gone:
        await js.delete_msg("D", 2)
    assert gone.value.err_code == 10043
    info = await js.stream_info("D")
    assert (info.state.messages, info.state.num_deleted) == (5, 1)
    await js.purge_stream("D", subject="d.a", keep=1)  # keeps seq 5 of d.a (1, 3, 5)
    await js.purge_stream("D", seq=5)  # removes everything below 5
    info = await js.stream_info("D")
    assert (info.state.messages, info.state.first_seq) == (2, 5)
    await js.purge_stream("D")
    info = await js.stream_info("D")
    assert (info.state.messages, info.state.first_seq, info.state.last_seq) == (0, 7, 6)
    assert (await js.publish("d.a", b"after")).seq == 7


async def test_limits_discard_old_and_new(js: Any, storage: str) -> None:
    await js.add_stream(name="OLD", subjects=["old"], storage=storage, max_msgs=3)
    for i in range(5):
        await js.publish("old", b"%d" % i)
    state = (await js.stream_info("OLD")).state
    assert (state.messages, state.first_seq, state.last_seq) == (3, 3, 5)
    await js.add_stream(name="NEW", subjects=["new"], storage=storage, max_msgs=2, discard="new")
    await js.publish("new", b"1")
    await js.publish("new", b"2")
    with pytest.raises(APIError) as full:
        await js.publish("new", b"3")
    assert full.value.err_code == 10077
    await js.add_stream(name="PER", subjects=["per.*"], storage=storage, max_msgs_per_subject=2)
    for i in range(4):
        await js.publish("per.x", b"%d" % i)
    await js.publish("per.y", b"y")
    info = await js.stream_info("PER", subjects_filter=">")
    assert info.state.subjects == {"per.x": 2, "per.y": 1}


async def test_names_and_list_page_and_filter(js: Any) -> None:
    for i in range(300):
        await js.add_stream(name=f"S{i:03d}", subjects=[f"s.{i}"], storage="memory")
    first = await js.streams_info()
    second = await js.streams_info(offset=len(first))
    assert (len(first), len(second)) == (256, 44), "LIST pages hold 256 streams"
    names = [i.config.name for i in first + second]
    assert names == [f"S{i:03d}" for i in range(300)], "sorted by name, each exactly once"
    assert await js.find_stream_name_by_subject("s.42") == "S042"


async def test_info_subjects_filter_matching_nothing_has_no_subjects(js: Any) -> None:
    """nats-py's JSMTest::test_jsm_stream_info_options: `subjects` is None, never `{}`."""
    await js.add_stream(name="F", subjects=["f.>"], storage="memory")
    for i in range(3):
        await js.publish(f"f.{i}", b"A")
    info = await js.stream_info("F", subjects_filter=">")
    assert info.state.subjects == {"f.0": 1, "f.1": 1, "f.2": 1}
    info = await js.stream_info("F", subjects_filter="nothing")
    assert (info.state.messages, info.state.subjects) == (3, None)
    assert (await js.stream_info("F")).state.subjects is None


async def test_account_info_counts(js: Any) -> None:
    await js.add_stream(name="AI", subjects=["ai"], storage="memory")
    await js.publish("ai", b"x" * 10)
    info = await js.account_info()
    assert info.streams == 1
    assert info.memory > 0
    assert info.api.total == 1, "API requests before this one: the stream create"


async def test_file_streams_survive_restart(tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    async with brook.serve(port=0, store_dir=store) as server:
        nc = await nats.connect(server.url)
        js = nc.jetstream()
        await js.add_stream(name="KEEP", subjects=["keep.>"], max_msgs_per_subject=5)
        await js.add_stream(name="MEM", subjects=["mem"], storage="memory")
        for i in range(10):
            await js.publish("keep.a", b"%d" % i, headers={"Nats-Msg-Id": f"id-{i}"})
        await js.publish("mem", b"gone after restart")
        await js.delete_msg("KEEP", 8)
        await nc.close()
    async with brook.serve(port=0, store_dir=store) as server:
        nc = await nats.connect(server.url)
        js = nc.jetstream()
        keep = await js.stream_info("KEEP")
        assert keep.config.max_msgs_per_subject == 5
        assert (keep.state.messages, keep.state.first_seq, keep.state.last_seq) == (4, 6, 10)
        assert (await js.get_msg("KEEP", 10)).data == b"9"
        dup = await js.publish("keep.a", b"9", headers={"Nats-Msg-Id": "id-9"})
        assert (dup.seq, dup.duplicate) == (10, True), "dedup window survives a restart"
        with pytest.raises(nats.js.errors.NotFoundError):  # as on nats-server: 10059
            await js.stream_info("MEM")
        await nc.close()


async def test_config_fields_are_kept_or_refused_never_dropped(tmp_path: Path) -> None:
    """`persist_mode: async`, `placement` and `consumer_limits` are kept, across a restart
    too; a field nats-server does not know is refused, not ignored."""
    store = str(tmp_path / "store")
    async with brook.serve(port=0, store_dir=store) as server:
        nc = await nats.connect(server.url, allow_reconnect=False)

        async def create(config: dict[str, Any]) -> dict[str, Any]:
            subject = f"$JS.API.STREAM.CREATE.{config['name']}"
            reply = await nc.request(subject, json.dumps(config).encode(), timeout=5)
            return dict(json.loads(reply.data))

        created = await create({"name": "A", "persist_mode": "async"})
        assert created["config"]["persist_mode"] == "async"
        typo = await create({"name": "T", "max_msg": 5})
        assert typo["error"]["err_code"] == 10025
        assert typo["error"]["description"] == 'invalid JSON: json: unknown field "max_msg"'
        kept = {
            "name": "K",
            "persist_mode": "default",
            "placement": {"cluster": "east", "tags": ["ssd"]},
            "consumer_limits": {"max_ack_pending": 7, "inactive_threshold": 9_000_000_000},
        }
        created = await create(kept)
        assert created["config"]["placement"] == {"cluster": "east", "tags": ["ssd"]}
        assert "persist_mode" not in created["config"]  # the default, left out as nats-server
        await nc.close()
    async with brook.serve(port=0, store_dir=store) as server:
        nc = await nats.connect(server.url, allow_reconnect=False)
        info = json.loads((await nc.request("$JS.API.STREAM.INFO.A", b"", timeout=5)).data)
        assert info["config"]["persist_mode"] == "async"
        info = json.loads((await nc.request("$JS.API.STREAM.INFO.K", b"", timeout=5)).data)
        assert info["config"]["placement"] == {"cluster": "east", "tags": ["ssd"]}
        assert info["config"]["consumer_limits"] == {
            "inactive_threshold": 9_000_000_000,
            "max_ack_pending": 7,
        }
        again = await nc.request("$JS.API.STREAM.CREATE.K", json.dumps(kept).encode(), timeout=5)
        assert "error" not in json.loads(again.data), "the same config: an idempotent create"
        await nc.close()


async def test_publish_to_subject_without_stream_is_no_responders(js: Any) -> None:
    from nats.js.errors import NoStreamResponseError

    with pytest.raises(NoStreamResponseError):
        await js.publish("nobody.captures.this", b"x")


async def test_core_subscribers_still_receive_stream_subjects(js_server: Any) -> None:
    nc = await nats.connect(js_server.url)
    js = nc.jetstream()
    await js.add_stream(name="C", subjects=["c.>"], storage="memory")
    sub = await nc.subscribe("c.>")
    ack = await js.publish("c.1", b"both")
    assert ack.seq == 1
    msg = await sub.next_msg(timeout=2)
    assert msg.data == b"both"
    await nc.close()


async def test_direct_get_through_nats_py(js: Any, storage: str) -> None:
    await js.add_stream(name="DIR", subjects=["dir.>"], storage=storage, allow_direct=True)
    await js.publish("dir.a", b"one", headers={"X-Keep": "yes"})
    await js.publish("dir.b", b"two")
    await js.publish("dir.a", b"three")
    by_seq = await js.get_msg("DIR", 1, direct=True)
    assert (by_seq.data, by_seq.subject) == (b"one", "dir.a")
    assert by_seq.headers["X-Keep"] == "yes", "stored headers come first, byte-exact"
    assert (by_seq.headers["Nats-Stream"], by_seq.headers["Nats-Sequence"]) == ("DIR", "1")
    last = await js.get_last_msg("DIR", "dir.a", direct=True)
    assert (last.seq, last.data) == (3, b"three")
    with pytest.raises(NotFoundError):
        await js.get_msg("DIR", 99, direct=True)


async def test_damaged_stream_definition_never_deletes_messages(tmp_path: Path) -> None:
    store = tmp_path / "store"
    async with brook.serve(port=0, store_dir=str(store)) as server:
        nc = await nats.connect(server.url)
        js = nc.jetstream()
        await js.add_stream(name="SAFE", subjects=["safe"])
        for i in range(3):
            await js.publish("safe", b"%d" % i)
        await nc.close()
    definition = store / "streams" / "SAFE" / "stream.json"
    good = definition.read_bytes()
    definition.write_bytes(good[: len(good) // 2])  # torn write of the definition
    async with brook.serve(port=0, store_dir=str(store)) as server:
        nc = await nats.connect(server.url)
        with pytest.raises(NotFoundError):
            await nc.jetstream().stream_info("SAFE")  # skipped and reported, not recreated
        await nc.close()
    assert any((store / "streams" / "SAFE" / "data" / "msgs").iterdir()), "data left alone"
    definition.write_bytes(good)
    async with brook.serve(port=0, store_dir=str(store)) as server:
        nc = await nats.connect(server.url)
        assert (await nc.jetstream().stream_info("SAFE")).state.messages == 3
        await nc.close()


async def test_atomic_batch_through_nats_py(js_server: Any) -> None:
    """nats-py's `allow_atomic` (as its test_stream_allow_atomic sets it) and a batch
    published with its header dicts: staged messages answered empty, the commit's PubAck
    naming the batch, every message delivered to a consumer after the commit only."""
    nc = await nats.connect(js_server.url, allow_reconnect=False)
    js = nc.jetstream()
    await js.add_stream(name="ATOMIC", subjects=["atomic.>"], allow_atomic=True)
    assert (await js.stream_info("ATOMIC")).config.allow_atomic is True
    sub = await js.subscribe("atomic.>")
    for seq in (1, 2):
        headers = {"Nats-Batch-Id": "b", "Nats-Batch-Sequence": str(seq)}
        assert (await nc.request("atomic.x", b"%d" % seq, headers=headers)).data == b""
    with pytest.raises(nats.errors.TimeoutError):
        await sub.next_msg(timeout=0.2)  # nothing stored before the commit
    headers = {"Nats-Batch-Id": "b", "Nats-Batch-Sequence": "3", "Nats-Batch-Commit": "1"}
    ack = json.loads((await nc.request("atomic.y", b"3", headers=headers)).data)
    assert ack == {"stream": "ATOMIC", "seq": 3, "batch": "b", "count": 3}
    got = [(await sub.next_msg(timeout=2)).data for _ in range(3)]
    assert got == [b"1", b"2", b"3"]
    await nc.close()
