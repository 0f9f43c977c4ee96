"""Per-message TTL end to end: nats-py publishes with `Nats-TTL` to a file stream on Brook.

Expiry runs on the server's real clock, so this one test waits about three seconds in all;
everything that can be checked with a manual clock lives in tests/unit/test_msg_ttl.py.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.js.errors import NotFoundError

import brook

pytestmark = pytest.mark.timeout(20)


async def wait_gone(js: Any, stream: str, seq: int, within_s: float) -> float:
    """Poll until the message is gone; returns how long that took."""
    start = time.monotonic()
    while True:
        try:
            await js.get_msg(stream, seq)
        except NotFoundError:
            return time.monotonic() - start
        assert time.monotonic() - start < within_s, f"{stream} seq {seq} still stored"
        await asyncio.sleep(0.05)


async def test_ttl_expires_on_the_server_clock_and_across_a_restart(tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    async with brook.serve(port=0, store_dir=store) as server:
        nc = await nats.connect(server.url, allow_reconnect=False)
        js = nc.jetstream()
        await js.add_stream(name="T", subjects=["t.>"], storage="file", allow_msg_ttl=True)
        short = await js.publish("t.a", b"short", headers={"Nats-TTL": "1"})
        kept = await js.publish("t.b", b"kept", headers={"Nats-TTL": "never"})
        # No max_age on this stream: only the TTL wakes the server up.
        await wait_gone(js, "T", short.seq, within_s=3)
        later = await js.publish("t.c", b"later", headers={"Nats-TTL": "2s"})
        await nc.close()
    async with brook.serve(port=0, store_dir=store) as server:
        nc = await nats.connect(server.url, allow_reconnect=False)
        js = nc.jetstream()
        assert (await js.get_msg("T", later.seq)).data == b"later"
        await wait_gone(js, "T", later.seq, within_s=4)
        assert (await js.get_msg("T", kept.seq)).data == b"kept"
        state = (await js.stream_info("T")).state
        assert (state.messages, state.last_seq) == (1, later.seq)
        await nc.close()
