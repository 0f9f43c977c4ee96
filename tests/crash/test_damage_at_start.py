"""Damage a crash or a bad disk leaves in a stream's files, found when Brook starts, seen
through a real server and nats-py: what was dropped is logged (stream, file, offsets,
sequences), shown in stream info (`state.lost`, nats-server's field) and in monitoring
(`/varz` jetstream.brook_store), and a sequence whose record was torn off is never handed
out again (a consumer that saw the old message would skip the new one).
"""

from __future__ import annotations

import os
from pathlib import Path

import nats
import pytest
from nats.js.api import AckPolicy, ConsumerConfig, LostStreamData

import brook
from brook.jetstream.store.file import format as fmt
from brook.jetstream.store.file.format import Damage
from tests.support.monitor import varz

pytestmark = pytest.mark.timeout(60)


def last_segment(store: Path, stream: str) -> Path:
    return sorted((store / "streams" / stream / "data" / "msgs").glob("*.seg"))[-1]


def message_records(path: Path) -> dict[int, tuple[int, int]]:
    """Stream sequence -> (offset, length) of every MSG record in a segment file."""
    data = path.read_bytes()
    return {
        r[3]: (r[0], r[1])
        for r in fmt.scan(data, len(data))
        if not isinstance(r, Damage) and r[2] == fmt.T_MSG
    }


async def test_a_torn_record_never_gives_its_sequence_to_another_message(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = tmp_path / "store"
    async with brook.serve(port=0, store_dir=str(store)) as server:
        nc = await nats.connect(server.url)
        js = nc.jetstream()
        await js.add_stream(name="S", subjects=["s.>"])
        await js.add_stream(name="Q", subjects=["q.>"])
        await js.add_consumer("Q", ConsumerConfig(durable_name="d", ack_policy=AckPolicy.EXPLICIT))
        for i in range(5):
            assert (await js.publish("s.x", b"old %d" % i)).seq == i + 1
            assert (await js.publish("q.x", b"old %d" % i)).seq == i + 1
        psub = await js.pull_subscribe_bind("d", stream="Q")
        seen = [m.metadata.sequence.stream for m in await psub.fetch(5, timeout=2)]
        assert seen == [1, 2, 3, 4, 5]  # the consumer saw message 5 (not acked)
        await nc.close()
    for name in ("S", "Q"):  # a crash tears message 5's record
        seg = last_segment(store, name)
        offset, length = message_records(seg)[5]
        os.truncate(seg, offset + length // 2)
    caplog.clear()
    async with brook.serve(port=0, store_dir=str(store)) as server:
        nc = await nats.connect(server.url)
        js = nc.jetstream()
        for name in ("S", "Q"):
            state = (await js.stream_info(name)).state
            assert (state.messages, state.last_seq) == (4, 5)
            assert state.lost == LostStreamData(msgs=[5], bytes=length - length // 2)
        assert (await js.publish("s.x", b"new")).seq == 6
        assert (await js.publish("q.x", b"new")).seq == 6
        psub = await js.pull_subscribe_bind("d", stream="Q")
        msgs = await psub.fetch(5, timeout=2)
        # The new message reaches the consumer that had seen the old 5.
        assert [(m.metadata.sequence.stream, m.data) for m in msgs if m.data == b"new"] == [
            (6, b"new")
        ]
        await nc.close()
    for name in ("S", "Q"):
        assert f"stream {name}: torn_tail: msgs/" in caplog.text
        assert f"stream {name}: sequence 5 lost (msgs/" in caplog.text


async def test_damage_found_at_start_is_logged_and_shown(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = tmp_path / "store"
    async with brook.serve(port=0, store_dir=str(store)) as server:
        nc = await nats.connect(server.url)
        js = nc.jetstream()
        await js.add_stream(name="S", subjects=["s.>"])
        for i in range(20):
            await js.publish("s.x", b"message %d" % i)
        await nc.close()
    seg = last_segment(store, "S")
    records = message_records(seg)
    data = bytearray(seg.read_bytes())
    data[records[10][0] + 40] ^= 0xFF  # a flipped bit in message 10
    seg.write_bytes(bytes(data[: records[20][0] + 30]))  # and message 20 torn
    caplog.clear()
    async with brook.serve(port=0, http_port=-1, store_dir=str(store)) as server:
        nc = await nats.connect(server.url)
        js = nc.jetstream()
        state = (await js.stream_info("S")).state
        assert (state.messages, state.last_seq) == (18, 20)
        assert state.lost == LostStreamData(msgs=[10, 20], bytes=records[10][1] + 30)
        assert (await js.get_msg("S", 11)).data == b"message 10"
        damaged = (await varz(server))["jetstream"]["brook_store"]["damaged_streams"]
        await nc.close()
    name = f"msgs/{seg.name}"
    assert damaged == {
        "S": {
            "repaired": True,
            "num_findings": 2,
            "findings": [
                {
                    "kind": "corrupt",
                    "file": name,
                    "offset": records[10][0],
                    "length": records[10][1],
                    "detail": "bad CRC",
                },
                {
                    "kind": "torn_tail",
                    "file": name,
                    "offset": records[20][0],
                    "length": 30,
                    "detail": "incomplete header",
                },
            ],
            "lost": [
                {"file": name, "first": 10, "last": 10},
                {"file": name, "first": 20, "last": 20},
            ],
        }
    }
    log = caplog.text
    assert "stream S: opening its store found 2 problem(s) (repaired); 2 sequence(s) lost" in log
    assert f"stream S: corrupt: {name}@{records[10][0]} ({records[10][1]} bytes): bad CRC" in log
    assert f"stream S: torn_tail: {name}@{records[20][0]} (30 bytes): incomplete header" in log
    assert f"stream S: sequence 10 lost ({name})" in log
    assert f"stream S: sequence 20 lost ({name})" in log
