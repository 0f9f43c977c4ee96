"""Stream backup and restore, Brook to Brook, with real files, over nats-py (tests/support/
snapshots.py speaks the protocol as the nats CLI does): everything a stream holds comes back
(messages, headers, sequences, gaps, timestamps, consumers' configuration and state), a
snapshot is one moment while publishes and erasures go on, and a restore that fails or is
abandoned leaves nothing behind."""

from __future__ import annotations

import asyncio
import json
import os
import struct
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.errors import NoRespondersError

import brook
from brook import limits
from brook.config.settings import JetStreamSettings, Settings
from tests.support.snapshots import backup, restore, send_chunks, start_restore

pytestmark = pytest.mark.timeout(90)


def js_settings(store: Path, **fields: Any) -> Settings:
    return Settings(jetstream=JetStreamSettings(enabled=True, store_dir=str(store), **fields))


async def api(nc: Any, subject: str, body: Any = b"") -> dict[str, Any]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    reply = await nc.request("$JS.API." + subject, data, timeout=10)
    result: dict[str, Any] = json.loads(reply.data)
    return result


async def contents(nc: Any, stream: str) -> dict[int, Any]:
    """Every stored message by sequence: (subject, headers, data, time)."""
    info = await api(nc, f"STREAM.INFO.{stream}")
    out: dict[int, Any] = {}
    for seq in range(info["state"]["first_seq"], info["state"]["last_seq"] + 1):
        got = await api(nc, f"STREAM.MSG.GET.{stream}", {"seq": seq})
        if "message" in got:
            m = got["message"]
            out[seq] = (m["subject"], m.get("hdrs"), m.get("data"), m["time"])
    return out


def comparable_info(info: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in info.items() if k not in ("ts", "cluster", "type")}


async def fill(nc: Any, stream: str) -> None:
    """A stream with a gapped history: purged head, deleted and erased messages, headers."""
    js = nc.jetstream()
    await js.add_stream(name=stream, subjects=[f"{stream.lower()}.>"])
    for i in range(300):
        headers = {"Idx": str(i), "Multi": "a"} if i % 3 == 0 else None
        data = os.urandom(i % 50) + b"payload %d" % i
        await js.publish(f"{stream.lower()}.{i % 7}", data, headers=headers)
    await api(nc, f"STREAM.PURGE.{stream}", {"seq": 11})  # first_seq becomes 11
    await api(nc, f"STREAM.MSG.DELETE.{stream}", {"seq": 20})  # erased
    await api(nc, f"STREAM.MSG.DELETE.{stream}", {"seq": 21, "no_erase": True})
    await api(nc, f"STREAM.PURGE.{stream}", {"filter": f"{stream.lower()}.3", "keep": 2})


async def consumers(nc: Any, stream: str) -> None:
    """A durable with delivered, acknowledged, pending and redelivered messages; a durable
    that never ran; an ephemeral with a long inactivity threshold."""
    js = nc.jetstream()
    create = {"durable_name": "WORK", "ack_policy": "explicit", "ack_wait": 60_000_000_000}
    await api(nc, f"CONSUMER.CREATE.{stream}.WORK", {"stream_name": stream, "config": create})
    sub = await js.pull_subscribe_bind("WORK", stream)
    msgs = await sub.fetch(20)
    for m in msgs[:8]:
        await m.ack()
    await msgs[10].nak()
    again = await sub.fetch(1)  # the nak'd one, delivered a second time
    assert again[0].metadata.num_delivered == 2
    idle = {"durable_name": "IDLE", "filter_subject": f"{stream.lower()}.1"}
    await api(nc, f"CONSUMER.CREATE.{stream}.IDLE", {"stream_name": stream, "config": idle})
    eph = {"name": "EPH", "inactive_threshold": 3_600_000_000_000, "ack_policy": "none"}
    await api(nc, f"CONSUMER.CREATE.{stream}.EPH", {"stream_name": stream, "config": eph})


CONSUMER_STATE = ("delivered", "ack_floor", "num_ack_pending", "num_redelivered", "num_pending")


async def consumer_view(nc: Any, stream: str) -> dict[str, Any]:
    names = (await api(nc, f"CONSUMER.NAMES.{stream}"))["consumers"]
    out = {}
    for name in names:
        info = await api(nc, f"CONSUMER.INFO.{stream}.{name}")
        state = {k: info[k] for k in CONSUMER_STATE}
        for k in ("delivered", "ack_floor"):  # last_active is not part of a snapshot
            state[k] = {
                "consumer_seq": state[k]["consumer_seq"],
                "stream_seq": state[k]["stream_seq"],
            }
        out[name] = (info["config"], info["created"], state)
    return out


async def test_file_stream_and_its_consumers_come_back_whole(tmp_path: Path) -> None:
    async with brook.serve(port=0, store_dir=str(tmp_path / "a")) as server:
        nc = await nats.connect(server.url)
        await fill(nc, "ORDERS")
        await consumers(nc, "ORDERS")
        info_before = comparable_info(
            await api(nc, "STREAM.INFO.ORDERS", {"deleted_details": True})
        )
        content_before = await contents(nc, "ORDERS")
        consumers_before = await consumer_view(nc, "ORDERS")
        saved = await backup(nc, "ORDERS")
        assert saved.end_headers in (None, {"Status": "204"})
        assert saved.response["state"]["messages"] == info_before["state"]["messages"]
        await nc.close()
    # Into a new server, as a restore from backup files would be.
    async with brook.serve(port=0, store_dir=str(tmp_path / "b")) as server:
        nc = await nats.connect(server.url)
        final = await restore(nc, "ORDERS", saved.meta, saved.data)
        assert final["type"] == "io.nats.jetstream.api.v1.stream_create_response"
        assert "error" not in final, final
        assert (
            comparable_info(await api(nc, "STREAM.INFO.ORDERS", {"deleted_details": True}))
            == info_before
        )
        assert await contents(nc, "ORDERS") == content_before
        assert await consumer_view(nc, "ORDERS") == consumers_before
        # The durable goes on where it was: the next new message, then the nak'd one is due.
        sub = await nc.jetstream().pull_subscribe_bind("WORK", "ORDERS")
        nxt = await sub.fetch(1)
        assert (
            nxt[0].metadata.sequence.stream > consumers_before["WORK"][2]["delivered"]["stream_seq"]
        )
        await nc.close()
    # Durable: the restored stream and its durable consumers survive a restart.
    async with brook.serve(port=0, store_dir=str(tmp_path / "b")) as server:
        nc = await nats.connect(server.url)
        assert await contents(nc, "ORDERS") == content_before
        names = (await api(nc, "CONSUMER.NAMES.ORDERS"))["consumers"]
        assert set(names) == {"WORK", "IDLE"}  # the ephemeral lived in memory only
        await nc.close()
    assert not any((tmp_path / "b" / "restores").iterdir())


async def test_memory_stream_comes_back_whole(tmp_path: Path) -> None:
    async with brook.serve(port=0, store_dir=str(tmp_path)) as server:
        nc = await nats.connect(server.url)
        js = nc.jetstream()
        await js.add_stream(name="MEM", subjects=["mem.>"], storage="memory")
        for i in range(50):
            await js.publish(f"mem.{i % 4}", b"m%d" % i, headers={"I": str(i)})
        await api(nc, "STREAM.MSG.DELETE.MEM", {"seq": 7})
        await api(nc, "STREAM.PURGE.MEM", {"seq": 3})
        await api(
            nc, "CONSUMER.CREATE.MEM.D", {"stream_name": "MEM", "config": {"durable_name": "D"}}
        )
        info_before = comparable_info(await api(nc, "STREAM.INFO.MEM", {"deleted_details": True}))
        content_before = await contents(nc, "MEM")
        saved = await backup(nc, "MEM")
        await js.delete_stream("MEM")
        final = await restore(nc, "MEM", saved.meta, saved.data)
        assert "error" not in final, final
        assert (
            comparable_info(await api(nc, "STREAM.INFO.MEM", {"deleted_details": True}))
            == info_before
        )
        assert await contents(nc, "MEM") == content_before
        assert (await api(nc, "CONSUMER.NAMES.MEM"))["consumers"] == ["D"]
        await nc.close()


async def test_no_consumers_leaves_them_out(tmp_path: Path) -> None:
    async with brook.serve(port=0, store_dir=str(tmp_path)) as server:
        nc = await nats.connect(server.url)
        await fill(nc, "S")
        await consumers(nc, "S")
        saved = await backup(nc, "S", no_consumers=True)
        await nc.jetstream().delete_stream("S")
        final = await restore(nc, "S", saved.meta, saved.data)
        assert final["state"]["consumer_count"] == 0
        assert (await api(nc, "CONSUMER.NAMES.S"))["consumers"] == []
        await nc.close()


async def test_snapshot_is_one_moment_while_publishes_and_erasures_go_on(tmp_path: Path) -> None:
    """The snapshot's bytes are read while the stream changes: new messages after the
    moment of the snapshot are not in it, and a message erased (overwritten on disk) after
    that moment is still in it, even when its bytes are read after the erasure."""
    async with brook.serve(port=0, store_dir=str(tmp_path)) as server:
        nc = await nats.connect(server.url)
        js = nc.jetstream()
        await js.add_stream(name="BIG", subjects=["big.>"])
        for i in range(600):  # incompressible: about 50 chunks of 128 KiB
            await js.publish(f"big.{i % 10}", os.urandom(10_000))
        erased = list(range(590, 601))  # in the segment's last bytes, read last
        before = {seq: await api(nc, "STREAM.MSG.GET.BIG", {"seq": seq}) for seq in erased}
        inbox = nc.new_inbox()
        sub = await nc.subscribe(inbox)
        req = {"deliver_subject": inbox, "window_size": 128 * 1024}  # one chunk at a time
        response = await api(nc, "STREAM.SNAPSHOT.BIG", req)
        assert response["state"]["last_seq"] == 600
        data = bytearray()
        while True:
            msg = await sub.next_msg(timeout=10)
            if not msg.data:
                break
            data += msg.data
            if erased:  # while the snapshot is being read: erase, and publish more
                await api(nc, "STREAM.MSG.DELETE.BIG", {"seq": erased.pop()})
                await js.publish("big.new", b"after the snapshot")
            if msg.reply:
                await nc.publish(msg.reply, b"")
        assert not erased
        assert (await api(nc, "STREAM.INFO.BIG"))["state"]["messages"] == 600  # -11 +11
        meta = {"config": response["config"], "state": response["state"]}
        await js.delete_stream("BIG")
        final = await restore(nc, "BIG", meta, bytes(data))
        assert "error" not in final, final
        assert final["state"]["last_seq"] == 600
        assert final["state"]["messages"] == 600
        for seq, message in before.items():
            assert await api(nc, "STREAM.MSG.GET.BIG", {"seq": seq}) == message
        await nc.close()


async def test_abandoned_restore_leaves_nothing(tmp_path: Path) -> None:
    async with brook.serve(
        port=0, settings=js_settings(tmp_path, restore_idle_timeout_s=0.5)
    ) as server:
        nc = await nats.connect(server.url)
        await fill(nc, "S")
        saved = await backup(nc, "S")
        await nc.jetstream().delete_stream("S")
        started = await start_restore(nc, "S", saved.meta)
        half = saved.data[: len(saved.data) // 2]
        await send_chunks(nc, started["deliver_subject"], half, 1024)
        assert any((tmp_path / "restores").iterdir())
        await asyncio.sleep(1.0)  # past the idle timeout
        with pytest.raises(NoRespondersError):
            await nc.request(started["deliver_subject"], b"more", timeout=2)
        assert "S" not in ((await api(nc, "STREAM.NAMES"))["streams"] or [])
        assert not any((tmp_path / "restores").iterdir())
        assert not (tmp_path / "streams" / "S").exists()
        final = await restore(nc, "S", saved.meta, saved.data)  # the name is free
        assert "error" not in final, final
        await nc.close()


async def test_restore_refuses_what_is_not_a_brook_snapshot(
    tmp_path: Path, nats_server_url: str
) -> None:
    nats_nc = await nats.connect(nats_server_url)
    await nats_nc.jetstream().add_stream(name="FOREIGN", subjects=["foreign.>"])
    await nats_nc.jetstream().publish("foreign.1", b"x")
    foreign = await backup(nats_nc, "FOREIGN")
    await nats_nc.jetstream().delete_stream("FOREIGN")
    await nats_nc.close()
    async with brook.serve(port=0, store_dir=str(tmp_path)) as server:
        nc = await nats.connect(server.url)
        final = await restore(nc, "FOREIGN", foreign.meta, foreign.data)
        assert final["error"]["err_code"] == 10062
        assert "nats-server" in final["error"]["description"], final
        meta = {"config": {"name": "G", "subjects": ["g"]}}
        for garbage in (b"\xff\x06\x00\x00sNaPpY" + os.urandom(300), b"plain text"):
            final = await restore(nc, "G", meta, garbage)
            assert final["error"]["err_code"] == 10062, final
        assert (await api(nc, "STREAM.NAMES"))["streams"] is None
        assert not any((tmp_path / "restores").iterdir())
        await nc.close()


async def test_restore_limits(tmp_path: Path) -> None:
    async with brook.serve(port=0, store_dir=str(tmp_path / "src")) as server:
        nc = await nats.connect(server.url)
        await fill(nc, "S")
        saved = await backup(nc, "S")
        await nc.close()
    settings = js_settings(tmp_path / "small", restore_max_bytes=len(saved.data) - 1)
    async with brook.serve(port=0, settings=settings) as server:
        nc = await nats.connect(server.url)
        started = await start_restore(nc, "S", saved.meta)
        reply = await nc.request(started["deliver_subject"], saved.data, timeout=5)
        error = json.loads(reply.data)["error"]
        assert error["err_code"] == 10062
        assert "restore_max_bytes" in error["description"]
        assert (await api(nc, "STREAM.NAMES"))["streams"] is None
        await nc.close()
    settings = js_settings(tmp_path / "full", max_file_store_bytes=1000)
    async with brook.serve(port=0, settings=settings) as server:
        nc = await nats.connect(server.url)
        final = await restore(nc, "S", saved.meta, saved.data)
        assert final["error"] == {
            "code": 500,
            "err_code": 10047,
            "description": "insufficient storage resources available",
        }
        assert not any((tmp_path / "full" / "restores").iterdir())
        await nc.close()


async def test_a_stream_created_during_the_upload_wins(tmp_path: Path) -> None:
    async with brook.serve(port=0, store_dir=str(tmp_path)) as server:
        nc = await nats.connect(server.url)
        await fill(nc, "S")
        saved = await backup(nc, "S")
        await nc.jetstream().delete_stream("S")
        started = await start_restore(nc, "S", saved.meta)
        await send_chunks(nc, started["deliver_subject"], saved.data)
        await nc.jetstream().add_stream(name="S", subjects=["other.>"])
        final = json.loads((await nc.request(started["deliver_subject"], b"", timeout=30)).data)
        assert final["error"]["err_code"] == 10130
        info = await api(nc, "STREAM.INFO.S")
        assert info["config"]["subjects"] == ["other.>"]
        assert info["state"]["messages"] == 0
        assert not any((tmp_path / "restores").iterdir())
        await nc.close()


def _crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
    return crc ^ 0xFFFFFFFF


async def test_snapshot_bytes_are_a_valid_snappy_framed_stream(tmp_path: Path) -> None:
    """What the nats CLI's backup decodes while it receives (an S2 reader, which reads the
    snappy framing): the stream identifier, then chunks of known types whose masked CRC-32C
    is right, checked here by an implementation independent of the one that wrote them."""
    import cramjam

    async with brook.serve(port=0, store_dir=str(tmp_path)) as server:
        nc = await nats.connect(server.url)
        await nc.jetstream().add_stream(name="S", subjects=["s"])
        await nc.jetstream().publish("s", b"framed" * 1000)
        data = (await backup(nc, "S")).data
        await nc.close()
    assert data.startswith(b"\xff\x06\x00\x00sNaPpY")
    pos, seen = 10, 0
    while pos < len(data):
        kind, length = data[pos], int.from_bytes(data[pos + 1 : pos + 4], "little")
        body = data[pos + 4 : pos + 4 + length]
        assert len(body) == length
        assert kind in (0x00, 0x01), kind
        (masked,) = struct.unpack("<I", body[:4])
        raw = body[4:] if kind == 1 else bytes(cramjam.snappy.decompress_raw(body[4:]))
        assert len(raw) <= 65536
        crc = _crc32c(raw)
        assert masked == ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF
        pos += 4 + length
        seen += 1
    assert seen >= 1


async def test_a_restored_stream_keeps_the_servers_segment_settings(tmp_path: Path) -> None:
    """A restored file stream's store is made as the engine makes every one: its segments
    roll at the server's `segment_slots_max` (ADR 0061), not at the default."""
    slots = limits.SEGMENT_SLOTS_MIN
    settings = js_settings(tmp_path, segment_slots_max=slots)
    async with brook.serve(port=0, settings=settings) as server:
        nc = await nats.connect(server.url)
        js = nc.jetstream()
        await js.add_stream(name="R", subjects=["r.>"])
        await js.publish("r.0", b"before")
        saved = await backup(nc, "R")
        await js.delete_stream("R")
        final = await restore(nc, "R", saved.meta, saved.data)
        assert "error" not in final, final
        count = 3 * slots
        for i in range(count):
            await nc.publish(f"r.{i % 5}", b"x")
        await nc.flush()
        for _ in range(400):
            info = await api(nc, "STREAM.INFO.R")
            if info["state"]["messages"] == count + 1:
                break
            await asyncio.sleep(0.025)
        assert info["state"]["messages"] == count + 1
        await nc.close()
    assert _segment_files(tmp_path / "streams" / "R") >= 3


def _segment_files(directory: Path) -> int:
    return sum(1 for p in directory.rglob("*.seg") if p.is_file())
