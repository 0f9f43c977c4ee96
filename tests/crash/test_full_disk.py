"""Brook on a disk that fills up: `brook serve` as a subprocess with its store on a small
tmpfs, driven with nats-py.

* Publishing until the disk is full: every publish to a file stream is answered at once
  with nats-server's 10023 "insufficient resources" (no timeout), the log says so once
  (no stack trace per message), and reads, memory streams and core NATS go on. A purge
  makes room and publishing resumes by itself; a disk filled by someone else is handled
  the same way.
* Started on a disk with no free byte at all, Brook starts read-mostly (nats-server's
  reply to publishes, reads served) and says so in its log; deleting a stream frees room
  and publishing resumes.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.js.api import AckPolicy, ConsumerConfig, StorageType
from nats.js.errors import APIError

from brook import limits
from brook.jetstream.store.file.indexsnap import SNAPSHOT
from tests.support.brookproc import start_brook
from tests.support.natsserver import free_port
from tests.support.tmpfs import fill_up, free_bytes, small_tmpfs

pytestmark = pytest.mark.timeout(120)

DISK_BYTES = 8 * 1024 * 1024
PAYLOAD = b"p" * 4096
INSUFFICIENT = (503, 10023, "insufficient resources")


def refused(exc: APIError) -> tuple[Any, Any, Any]:
    return exc.code, exc.err_code, exc.description


async def publish_until_refused(js: Any, subject: str) -> int:
    """Publish until the server refuses; returns the last acknowledged sequence. Every
    publish must be answered (a timeout fails the test)."""
    last = 0
    for i in range(2 * DISK_BYTES // len(PAYLOAD)):
        try:
            last = (await js.publish(f"{subject}.{i % 5}", PAYLOAD, timeout=2)).seq
        except APIError as exc:
            error = exc
            break
    else:
        raise AssertionError("the disk never filled up")
    assert refused(error) == INSUFFICIENT
    return last


async def assert_refused_at_once(js: Any, subject: str) -> None:
    started = time.monotonic()
    with pytest.raises(APIError) as info:
        await js.publish(subject, PAYLOAD, timeout=2)
    assert refused(info.value) == INSUFFICIENT
    assert time.monotonic() - started < 1.0


async def publish_when_room(js: Any, subject: str) -> int:
    """Publishing resumes by itself once space is back (after the sync that deletes the
    purged files): poll for a few seconds."""
    deadline = time.monotonic() + 10
    errors: set[tuple[Any, Any, Any]] = set()
    while time.monotonic() < deadline:
        try:
            seq = int((await js.publish(subject, PAYLOAD, timeout=2)).seq)
        except APIError as exc:
            errors.add(refused(exc))
        else:
            assert errors <= {INSUFFICIENT}
            return seq
        await asyncio.sleep(0.1)
    raise AssertionError(f"publishing did not resume; the answers were {errors}")


async def reads_and_other_traffic_go_on(nc: Any, js: Any, last: int) -> None:
    info = await js.stream_info("S")
    assert (info.state.messages, info.state.last_seq) == (last, last)
    assert (await js.get_msg("S", last)).data == PAYLOAD
    psub = await js.pull_subscribe_bind("reader", stream="S")
    msgs = await psub.fetch(3, timeout=2)
    assert [m.metadata.sequence.stream for m in msgs] == [1, 2, 3]
    for m in msgs:
        await m.ack_sync()  # consumer state is written into the reserve
    assert (await js.publish("m.1", b"memory", timeout=2)).stream == "M"
    sub = await nc.subscribe("core.x")
    await nc.publish("core.x", b"core")
    assert (await sub.next_msg(timeout=2)).data == b"core"
    await sub.unsubscribe()


def varz(port: int) -> dict[str, Any]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/varz", timeout=5) as resp:
        doc: dict[str, Any] = json.load(resp)
    return doc


def stop(proc: subprocess.Popen[bytes]) -> int:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    return proc.wait(10)


async def test_full_disk_is_answered_logged_once_and_resumes(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    port, http = free_port(), free_port()
    with small_tmpfs(tmp_path / "disk", DISK_BYTES) as disk:
        proc = start_brook(disk / "store", port, log=log, args=["--http-port", str(http)])
        try:
            nc = await nats.connect(f"nats://127.0.0.1:{port}", allow_reconnect=False)
            js = nc.jetstream(timeout=2)
            await js.add_stream(name="S", subjects=["s.>"])
            await js.add_stream(name="M", subjects=["m.>"], storage=StorageType.MEMORY)
            reader = ConsumerConfig(durable_name="reader", ack_policy=AckPolicy.EXPLICIT)
            await js.add_consumer("S", reader)
            last = await publish_until_refused(js, "s")
            assert last > 1000
            for _ in range(20):
                await assert_refused_at_once(js, "s.more")
            with pytest.raises(APIError) as info:  # a new file stream would not fit either
                await js.add_stream(name="NEW", subjects=["new.>"])
            assert refused(info.value) == INSUFFICIENT
            await reads_and_other_traffic_go_on(nc, js, last)
            store = varz(http)["jetstream"]["brook_store"]
            assert store["full"] is True
            assert store["refused_publishes"] >= 21
            assert store["free_bytes"] < store["reserve_bytes"] + 1024 * 1024

            assert (await js.purge_stream("S")) is True
            assert await publish_when_room(js, "s.after") == last + 1
            assert free_bytes(disk) > DISK_BYTES // 2
            assert varz(http)["jetstream"]["brook_store"]["full"] is False

            # Someone else fills the disk: the same answers, and room again when freed.
            # (The disk space the stream's segment reserved ahead for its buffered writes,
            # ADR 0051, still takes a few publishes first.)
            filler = fill_up(disk)
            taken = await publish_until_refused(js, "s.more") or last + 1
            assert taken - (last + 1) <= limits.STORE_PREALLOCATE_BYTES // len(PAYLOAD)
            await assert_refused_at_once(js, "s.more")
            assert (await js.get_msg("S", last + 1)).data == PAYLOAD
            os.remove(filler)
            assert await publish_when_room(js, "s.after") == taken + 1
            await nc.close()
        finally:
            assert stop(proc) == 0
    text = log.read_text()
    assert text.count("is full:") == 2, text  # once per time the disk filled up
    assert text.count("publishes to file streams resumed") == 2
    assert "Traceback" not in text


async def test_brook_starts_read_mostly_on_a_full_disk(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    port, http = free_port(), free_port()
    with small_tmpfs(tmp_path / "disk", DISK_BYTES) as disk:
        proc = start_brook(disk / "store", port, log=log)
        try:
            nc = await nats.connect(f"nats://127.0.0.1:{port}", allow_reconnect=False)
            js = nc.jetstream(timeout=2)
            await js.add_stream(name="BIG", subjects=["big.>"])
            await js.add_stream(name="S", subjects=["s.>"])
            for i in range(3):
                await js.publish("s.x", b"kept %d" % i)
            await publish_until_refused(js, "big")
            await nc.close()
        finally:
            assert stop(proc) == 0
        # The clean stop saved index snapshots, which the next open deletes once read
        # (ADR 0046): that would make room again. Without them the disk stays full.
        for snap in (disk / "store").rglob(SNAPSHOT):
            snap.unlink()
        fill_up(disk)  # not a byte left: not even for the start-up write test
        assert free_bytes(disk) == 0
        proc = start_brook(disk / "store", port, log=log, args=["--http-port", str(http)])
        try:
            nc = await nats.connect(f"nats://127.0.0.1:{port}", allow_reconnect=False)
            js = nc.jetstream(timeout=2)
            assert (await js.get_msg("S", 2)).data == b"kept 1"
            assert (await js.stream_info("S")).state.messages == 3
            await assert_refused_at_once(js, "s.x")
            assert varz(http)["jetstream"]["brook_store"]["full"] is True
            sub = await nc.subscribe("core.x")
            await nc.publish("core.x", b"core")
            assert (await sub.next_msg(timeout=2)).data == b"core"
            with pytest.raises(APIError) as info:  # its file cannot be written
                await js.add_consumer("S", ConsumerConfig(durable_name="late"))
            assert refused(info.value) == INSUFFICIENT
            assert await js.delete_stream("BIG") is True  # frees room without writing
            assert await publish_when_room(js, "s.x") == 4
            await js.add_consumer("S", ConsumerConfig(durable_name="late"))
            assert (await js.consumer_info("S", "late")).num_pending == 4
            await nc.close()
        finally:
            assert stop(proc) == 0
    text = log.read_text()
    assert "starting read-mostly" in text, text
    assert "publishes to file streams resumed" in text
    assert "Traceback" not in text


async def test_consumer_state_waits_for_room_and_no_ack_is_lost(tmp_path: Path) -> None:
    """A durable consumer's state write on a disk with no byte free: nothing crashes, the
    failure is logged once, an ack_sync is confirmed only once its state is on disk (after
    room returns, by the retry), and a restart then redelivers nothing acknowledged."""
    log = tmp_path / "server.log"
    port = free_port()
    with small_tmpfs(tmp_path / "disk", DISK_BYTES) as disk:
        proc = start_brook(disk / "store", port, log=log)
        try:
            nc = await nats.connect(f"nats://127.0.0.1:{port}", allow_reconnect=False)
            js = nc.jetstream(timeout=2)
            await js.add_stream(name="S", subjects=["s.>"])
            config = ConsumerConfig(durable_name="d", ack_policy=AckPolicy.EXPLICIT, ack_wait=30)
            await js.add_consumer("S", config)
            for i in range(10):
                await js.publish("s.x", b"%d" % i)
            psub = await js.pull_subscribe_bind("d", stream="S")
            msgs = await psub.fetch(10, timeout=2)
            filler = fill_up(disk)
            for m in msgs[:5]:
                await m.ack()  # plain acks: their state write fails and is retried
            confirmed = asyncio.ensure_future(msgs[5].ack_sync(timeout=10))
            await asyncio.sleep(1.5)
            assert not confirmed.done()  # not on disk: not confirmed
            os.remove(filler)
            await confirmed  # the retry wrote it once there was room
            for m in msgs[6:]:
                await m.ack_sync()
            await nc.close()
        finally:
            assert stop(proc) == 0
        proc = start_brook(disk / "store", port, log=log)
        try:
            nc = await nats.connect(f"nats://127.0.0.1:{port}", allow_reconnect=False)
            js = nc.jetstream(timeout=2)
            info = await js.consumer_info("S", "d")
            assert (info.ack_floor.stream_seq, info.num_ack_pending, info.num_pending) == (10, 0, 0)
            await nc.close()
        finally:
            assert stop(proc) == 0
    text = log.read_text()
    assert text.count("could not be written") == 1, text
    assert text.count("written again") == 1
    assert "Traceback" not in text
