"""A write task's rows as one ADR-50 fast batch (fastbatch.py, ADR 0063), without Spark.

`source.publish_batches` is what a Spark write task runs; here against Brook and nats-server
alike. The first test holds the server behaviour the connector relies on (dedup inside a
fast batch, the refusal of a stream without `allow_batched`) side by side, byte for byte.
"""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any

import nats
import pyarrow as pa
import pytest
from tests.spark.jsutil import JetStream

from brook_spark.options import parse_write
from brook_spark.publish import PublishError
from brook_spark.source import publish_batches

# (batch id, message ids): each batch's last message commits it (op 2).
PROBE = [("b1", ["m1", "m2", "m3", "m4", "m5"]), ("b2", ["m3", "m6", "m4"]), ("b3", ["m1", "m2"])]


def fast_batch_replies(url: str, stream: str, allow_batched: bool) -> list[tuple[str, bytes]]:
    """Each probe batch's messages as a fast batch (flow 2, gap mode fail); every reply."""

    async def go() -> list[tuple[str, bytes]]:
        nc = await nats.connect(url, allow_reconnect=False)
        config = {"name": stream, "subjects": [f"{stream}.>"], "allow_batched": allow_batched}
        await nc.request(f"$JS.API.STREAM.CREATE.{stream}", json.dumps(config).encode(), 5)
        replies: list[tuple[str, bytes]] = []
        done = asyncio.Event()

        async def on_reply(msg: Any) -> None:
            replies.append((msg.subject.split(".", 2)[2], msg.data))
            if b'"type"' not in msg.data:
                done.set()  # a PubAck or an error ends the batch

        await nc.subscribe("_FB.>", cb=on_reply)
        for batch, ids in PROBE:
            done.clear()
            for i, msg_id in enumerate(ids, 1):
                op = 0 if i == 1 else 2 if i == len(ids) else 1
                reply = f"_FB.{batch}.2.fail.{i}.{op}.$FI"
                headers = {"Nats-Msg-Id": msg_id}
                await nc.publish(f"{stream}.x", msg_id.encode(), reply=reply, headers=headers)
            await asyncio.wait_for(done.wait(), 5)
            await asyncio.sleep(0.05)  # any reply after the batch's end would show
        await nc.close()
        return replies

    return asyncio.run(asyncio.wait_for(go(), 30))


def test_fast_batch_dedup_and_refusal_match_nats_server(
    brook_url: str, nats_url: str, name: str
) -> None:
    """`Nats-Msg-Id` dedup applies inside a fast batch: a duplicate is skipped without a
    reply and counted; a batch of duplicates ends with seq 0. A stream without
    `allow_batched` refuses every message with 10205 and stores nothing."""
    for allow in (True, False):
        stream = f"{name}{int(allow)}"
        brook = fast_batch_replies(brook_url, stream, allow)
        assert brook == fast_batch_replies(nats_url, stream, allow)
        if allow:
            ends = [data for _, data in brook if b'"batch"' in data]
            assert ends == [
                b'{"stream":"%b","seq":%d,"batch":"%b","count":%d}' % (stream.encode(), *end)
                for end in ((5, b"b1", 5), (6, b"b2", 3), (0, b"b3", 2))
            ]
        else:
            assert all(b'"err_code":10205' in data for _, data in brook)
            assert len(brook) == 10


def rows(lo: int, hi: int) -> pa.RecordBatch:
    return pa.record_batch({"data": [b"%d" % i for i in range(lo, hi)]})


def write(js: JetStream, name: str, batches: list[pa.RecordBatch], **extra: str) -> Any:
    options = parse_write(
        {"servers": js.url, "subject": f"{name}.x", "stream": name, **extra}, streaming=False
    )
    return publish_batches(options, iter(batches), "job:0")


def stored_ids(js: JetStream, name: str) -> list[str]:
    """Every stored message's `Nats-Msg-Id`, in stream order, over one connection."""

    async def go() -> list[str]:
        nc = await nats.connect(js.url, allow_reconnect=False)
        info = await nc.request(f"$JS.API.STREAM.INFO.{name}", b"", 10)
        ids = []
        for seq in range(1, json.loads(info.data)["state"]["last_seq"] + 1):
            body = json.dumps({"seq": seq}).encode()
            reply = await nc.request(f"$JS.API.STREAM.MSG.GET.{name}", body, 10)
            header = base64.b64decode(json.loads(reply.data)["message"]["hdrs"]).decode()
            ids.append(header.split("Nats-Msg-Id: ")[1].split("\r\n")[0])
        await nc.close()
        return ids

    return asyncio.run(asyncio.wait_for(go(), 60))


def test_rows_go_as_one_fast_batch_and_a_rerun_stores_nothing(js: JetStream, name: str) -> None:
    js.add_stream(name, [f"{name}.>"], allow_batched=True)
    batches = [rows(lo, lo + 700) for lo in (0, 700, 1400)]
    first = write(js, name, batches)
    assert (first.batched, first.published, first.duplicates, first.last_seq) == (2100, 0, 0, 2100)
    again = write(js, name, batches)  # a retried task: same ids, every row a duplicate
    assert (again.batched, again.published, again.last_seq) == (2100, 0, 0)
    more = write(js, name, [*batches, rows(2100, 2200)])  # only the new rows are stored
    assert (more.batched, more.last_seq) == (2200, 2200)
    assert js.state(name)["messages"] == 2200
    assert stored_ids(js, name) == [f"job:0:{i}" for i in range(2200)]
    msg = js.api(f"$JS.API.STREAM.MSG.GET.{name}", {"seq": 2200})["message"]
    assert base64.b64decode(msg["data"]) == b"2199"
    # A window smaller than nats-server's flow: the flow asked for shrinks with it.
    small = write(js, name, [rows(0, 50)], maxPending="8", writeId="x")
    assert (small.batched, small.published) == (50, 0)


def test_stream_without_allow_batched_takes_a_publish_per_row(js: JetStream, name: str) -> None:
    js.add_stream(name, [f"{name}.>"])
    report = write(js, name, [rows(0, 500), rows(500, 900)])
    assert (report.batched, report.published, report.first_seq, report.last_seq) == (
        0,
        900,
        1,
        900,
    )
    assert stored_ids(js, name) == [f"job:0:{i}" for i in range(900)]


def test_fast_batch_off_by_option(js: JetStream, name: str) -> None:
    js.add_stream(name, [f"{name}.>"], allow_batched=True)
    report = write(js, name, [rows(0, 300)], fastBatch="false")
    assert (report.batched, report.published) == (0, 300)


def test_a_refused_row_ends_the_fast_batch_and_fails_as_a_publish_does(
    js: JetStream, name: str
) -> None:
    """Row 1000 exceeds `max_msgs` (discard new): the rows before it are stored once, the
    rest go through the per-message path, whose error fails the task as before."""
    js.add_stream(name, [f"{name}.>"], allow_batched=True, max_msgs=1000, discard="new")
    with pytest.raises(PublishError, match="maximum messages exceeded"):
        write(js, name, [rows(0, 1500)])
    assert stored_ids(js, name) == [f"job:0:{i}" for i in range(1000)]


def test_spark_write_to_an_allow_batched_stream_publishes_each_row_once(
    spark: Any, js: JetStream, name: str
) -> None:
    js.add_stream(name, [f"{name}.>"], allow_batched=True)
    df = spark.range(0, 3000, numPartitions=3).selectExpr("CAST(id AS STRING) AS data")
    for _ in range(2):  # a rerun of the same job publishes nothing
        df.write.format("jetstream").mode("append").option("servers", js.url).option(
            "subject", f"{name}.x"
        ).option("writeId", "job-7").save()
    assert js.state(name)["messages"] == 3000
    ids = stored_ids(js, name)
    assert sorted(ids) == sorted(f"job-7:{p}:{r}" for p in range(3) for r in range(1000))
