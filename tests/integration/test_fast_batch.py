"""Fast batch publishes (`allow_batched`) on a real server: every reply of a batch waits
for the fsync of what it reports, an idle batch is dropped by its timer, and the
configured limits bound the batches in flight. (Replies are compared with nats-server's
in tests/conformance/test_fast_batch_conformance.py.)"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import nats
import pytest

import brook
from brook.config.conf import parse_conf, settings_from_conf
from tests.support.monitor import varz

pytestmark = pytest.mark.timeout(30)


def _syncs(server: Any, stream: str) -> int:
    return int(server.jetstream.get(stream).store.statistics()["syncs"])


async def _send(nc: Any, sub: Any, reply: str, data: bytes = b"x") -> dict[str, Any]:
    await nc.publish("f.x", data, reply=reply)
    reply_msg = await sub.next_msg(timeout=5)
    body: dict[str, Any] = json.loads(reply_msg.data)
    return body


async def test_flow_acks_and_the_puback_wait_for_the_fsync(tmp_path: Path) -> None:
    async with brook.serve(store_dir=str(tmp_path)) as server:
        nc = await nats.connect(server.url)
        await nc.jetstream().add_stream(name="F", subjects=["f.>"], allow_batched=True)
        sub = await nc.subscribe("fi.>")
        before = _syncs(server, "F")
        assert await _send(nc, sub, "fi.b.1.fail.1.0.$FI") == {"type": "ack", "seq": 0, "msgs": 1}
        ack = json.loads((await sub.next_msg(timeout=5)).data)
        assert ack == {"type": "ack", "seq": 1, "msgs": 1}
        assert _syncs(server, "F") > before, "the flow ack of message 1 came after its fsync"
        for seq in (2, 3):
            before = _syncs(server, "F")
            ack = await _send(nc, sub, f"fi.b.1.fail.{seq}.1.$FI")
            assert ack == {"type": "ack", "seq": seq, "msgs": 1}
            assert _syncs(server, "F") > before, f"the flow ack of {seq} came after its fsync"
        before = _syncs(server, "F")
        ack = await _send(nc, sub, "fi.b.1.fail.4.2.$FI")
        assert ack == {"stream": "F", "seq": 4, "batch": "b", "count": 4}
        assert _syncs(server, "F") > before
        await nc.close()


async def test_an_idle_fast_batch_is_dropped_by_its_timer_and_limits_apply(
    tmp_path: Path,
) -> None:
    conf = "jetstream { limits { batch { timeout: 300ms, max_inflight_per_stream: 1 } } }"
    settings = settings_from_conf(parse_conf(conf))
    async with brook.serve(http_port=-1, store_dir=str(tmp_path), settings=settings) as server:
        nc = await nats.connect(server.url)
        await nc.jetstream().add_stream(name="F", subjects=["f.>"], allow_batched=True)
        sub = await nc.subscribe("fi.>")
        assert (await _send(nc, sub, "fi.a.0.fail.1.0.$FI"))["type"] == "ack"
        stats = (await varz(server))["jetstream"]["brook_batches"]
        assert stats["fast_inflight"] == 1
        assert stats["max_fast_inflight_per_stream"] == 1
        assert stats["max_fast_inflight_total"] == 50_000  # nats-server's default
        assert stats["max_inflight_per_stream"] == 1  # the setting bounds both kinds
        second = await _send(nc, sub, "fi.b.0.fail.1.0.$FI")
        assert second["error"] == {
            "code": 429,
            "err_code": 10211,
            "description": "batch publish too many inflight",
        }
        await asyncio.sleep(0.8)  # nothing touches batch "a": its timer drops it
        assert (await varz(server))["jetstream"]["brook_batches"]["fast_inflight"] == 0
        late = await _send(nc, sub, "fi.a.0.fail.2.1.$FI")
        assert late["error"]["err_code"] == 10208  # unknown batch
        assert (await nc.jetstream().stream_info("F")).state.messages == 1
        await nc.close()


async def test_consumers_get_a_fast_batchs_messages_as_they_are_stored(tmp_path: Path) -> None:
    async with brook.serve(store_dir=str(tmp_path)) as server:
        nc = await nats.connect(server.url)
        js = nc.jetstream()
        await js.add_stream(name="F", subjects=["f.>"], allow_batched=True)
        pull = await js.pull_subscribe("f.>", durable="C")
        sub = await nc.subscribe("fi.>")
        waiting = asyncio.create_task(pull.fetch(1, timeout=5))  # a waiting pull request
        await asyncio.sleep(0.2)
        await _send(nc, sub, "fi.c.0.fail.1.0.$FI", b"1")
        first = await waiting  # served as the message is stored, before the batch ends
        assert [m.data for m in first] == [b"1"]
        await nc.publish("f.x", b"2", reply="fi.c.0.fail.2.1.$FI")
        ack = await _send(nc, sub, "fi.c.0.fail.3.2.$FI", b"3")
        assert ack == {"stream": "F", "seq": 3, "batch": "c", "count": 3}
        rest = await pull.fetch(2, timeout=2)
        assert [m.data for m in rest] == [b"2", b"3"]
        await nc.close()
