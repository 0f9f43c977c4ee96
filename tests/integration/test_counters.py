"""Counter streams through nats-py against Brook: what the conformance scenarios cannot
show side by side (totals longer than Python's int-to-text limit) and nats-py's own use
of the PubAck's `val`. The checks nats-server makes are compared with it in
tests/conformance/test_counters_conformance.py."""

from __future__ import annotations

import json
from pathlib import Path

import nats
import pytest
from nats.js.api import StreamConfig

import brook

pytestmark = pytest.mark.timeout(30)


async def test_nats_py_reads_the_total_from_its_pub_ack(tmp_path: Path) -> None:
    async with brook.serve(port=0, store_dir=str(tmp_path)) as server:
        nc = await nats.connect(server.url, allow_reconnect=False)
        js = nc.jetstream()
        info = await js.add_stream(
            StreamConfig(name="HITS", subjects=["hits.>"], allow_msg_counter=True)
        )
        assert info.config.allow_msg_counter is True
        assert info.config.metadata is not None
        assert info.config.metadata["_nats.req.level"] == "2"
        totals = []
        for step in ("5", "3", "-2"):
            ack = await js.publish("hits.page", b"", headers={"Nats-Incr": step})
            totals.append(ack.val)
        assert totals == ["5", "8", "6"]
        last = await js.get_last_msg("HITS", "hits.page")
        assert json.loads(last.data or b"") == {"val": "6"}
        assert (last.headers or {}).get("Nats-Incr") == "-2"
        await nc.close()


async def test_totals_of_any_length_are_exact(tmp_path: Path) -> None:
    """Go's big.Int has no size limit; Python's int refuses text of more than 4300 digits.
    A 5000-digit increment, twice, gives a 5000-digit total, as nats-server would."""
    big = "9" * 5000
    async with brook.serve(port=0, store_dir=str(tmp_path)) as server:
        nc = await nats.connect(server.url, allow_reconnect=False)
        js = nc.jetstream()
        await js.add_stream(StreamConfig(name="BIG", subjects=["big"], allow_msg_counter=True))
        assert (await js.publish("big", b"", headers={"Nats-Incr": big})).val == big
        ack = await js.publish("big", b"", headers={"Nats-Incr": big})
        assert ack.val == "1" + "9" * 4999 + "8"  # 2 * (10**5000 - 1)
        ack = await js.publish("big", b"", headers={"Nats-Incr": "-" + big + big})
        assert ack.val == "-" + "9" * 4999 + "8" + "0" * 4999 + "1"
        await nc.close()
