"""`brook bench` against a live Brook with small message counts: each benchmark moves the
messages it says it did (checked on the server's side), and reports them as a table or
as JSON. Numbers of speed are never asserted."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import nats.errors
import pytest

from brook.cli.benchstats import latency_summary, percentile, split
from tests.cli.runner import cli, ok
from tests.cli.targets import KINDS, open_target

pytestmark = pytest.mark.timeout(30)


async def test_bench_pub_publishes_msgs_and_reports_a_table(
    server: Any, nc: Any, tmp_path: Path
) -> None:
    got: list[Any] = []

    async def on_message(msg: Any) -> None:
        got.append(msg)

    await nc.subscribe("bench.>", cb=on_message)
    await nc.flush()
    result = await ok(
        server.url, "bench", "pub", "bench.core", "--msgs", "300", "--clients", "2",
        "--size", "64B", "-H", "K:V",
    )  # fmt: skip
    await nc.flush()
    assert len(got) == 300
    assert {(len(m.data), m.headers["K"]) for m in got} == {(64, "V")}
    assert "Starting Core NATS publisher benchmark [clients=2, msg-size=64 B, msgs=300, " in (
        result.err
    )
    lines = [line.split() for line in result.out.splitlines()]
    assert result.out.splitlines()[1].startswith("Core NATS publisher stats: ")
    throughput = lines.index(["Client", "Msgs", "Msgs/s", "MiB/s", "Duration"])
    assert lines[throughput - 2] == ["Throughput"]
    assert [row[:2] for row in lines[throughput + 1 : throughput + 4]] == [
        ["#1", "150"], ["#2", "150"], ["all", "300"],
    ]  # fmt: skip
    latency = lines.index(["Client", "min", "avg", "p50", "p90", "p99", "p99.9", "max"])
    assert lines[latency - 2] == ["Latency", "per", "operation", "(µs)"]
    assert [row[0] for row in lines[latency + 1 :]] == ["#1", "#2", "all"]

    csv_file = tmp_path / "bench.csv"
    await ok(
        server.url,
        "bench",
        "pub",
        "bench.csv",
        "--msgs",
        "10",
        "--clients",
        "2",
        "--csv",
        str(csv_file),
    )
    rows = [line.split(",") for line in csv_file.read_text().splitlines()]
    assert rows[0][:7] == [
        "#RunID",
        "ClientID",
        "MsgCount",
        "MsgBytes",
        "MsgsPerSec",
        "BytesPerSec",
        "DurationSecs",
    ]
    assert rows[0][-1] == "StdDevLatencyMicroSecs"
    assert [(r[1], r[2], r[3]) for r in rows[1:]] == [("P0", "5", "640"), ("P1", "5", "640")]
    doc = (await ok(server.url, "bench", "pub", "bench.json", "--msgs", "50", "--json")).json()
    assert doc["benchmark"] == "pub"
    assert doc["msgs"] == 50
    assert doc["bytes"] == 50 * 128
    assert [c["msgs"] for c in doc["clients"]] == [50]
    assert set(doc["latency_us"]) == {"min", "avg", "p50", "p90", "p99", "p99_9", "max", "stddev"}
    assert doc["msgs_per_sec"] > 0


async def test_bench_sub_counts_what_a_publisher_sends(server: Any, nc: Any) -> None:
    task = asyncio.create_task(
        cli(server.url, "bench", "sub", "bench.in", "--msgs", "100", "--clients", "2", "--json")
    )
    while not task.done():
        for _ in range(50):
            await nc.publish("bench.in", b"x" * 10)
        await asyncio.wait([task], timeout=0.02)
    result = task.result()
    assert result.code == 0, result.err
    doc = result.json()
    assert doc["msgs"] == 200  # every subscriber reads --msgs
    assert [c["msgs"] for c in doc["clients"]] == [100, 100]
    assert doc["latency_us"] is None
    assert doc["bytes"] == 200 * 10


async def test_bench_service_request_and_serve(server: Any, nc: Any) -> None:
    async def respond(msg: Any) -> None:
        await msg.respond(b"ok")

    await nc.subscribe("bench.svc", cb=respond)
    await nc.flush()
    doc = (
        await ok(server.url, "bench", "service", "request", "bench.svc", "--msgs", "40", "--json")
    ).json()
    assert doc["msgs"] == 40
    assert doc["latency_us"]["p99"] >= doc["latency_us"]["p50"] > 0

    task = asyncio.create_task(
        cli(server.url, "bench", "service", "serve", "bench.served", "--msgs", "5")
    )
    answers: list[bytes] = []
    while not task.done():
        try:
            answers.append((await nc.request("bench.served", b"q", timeout=0.2)).data)
        except (nats.errors.NoRespondersError, nats.errors.TimeoutError):
            await asyncio.sleep(0.01)
    assert task.result().code == 0
    assert answers[:5] == [b"q"] * 5
    missing = await cli(server.url, "bench", "service", "request", "bench.nobody", "--msgs", "1")
    assert missing.code == 1
    assert "no responders on 'bench.nobody'" in missing.err


@pytest.fixture(params=KINDS)
async def target(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Any]:
    async with open_target(request.param, tmp_path) as url_and_js:
        yield url_and_js


async def test_bench_jetstream_publish_then_consume(target: Any) -> None:
    url, js = target
    sync = ("js", "pub", "sync", "bench.js", "--create", "--msgs", "60", "--storage", "memory")
    doc = (await ok(url, "bench", *sync, "--json")).json()
    assert doc["msgs"] == 60
    info = await js.stream_info("benchstream")
    assert info.config.subjects == ["bench.js"]
    assert info.state.messages == 60
    batches = ("js", "pub", "async", "bench.js", "--purge", "--msgs", "100", "--batch", "30")
    doc = (await ok(url, "bench", *batches, "--json")).json()
    assert doc["clients"][0]["operations_timed"] == 4  # a latency per batch
    info = await js.stream_info("benchstream")
    assert (info.state.messages, info.state.first_seq) == (100, 61)

    doc = (
        await ok(url, "bench", "js", "ordered", "--msgs", "100", "--clients", "2", "--json")
    ).json()
    assert doc["msgs"] == 200

    result = await ok(
        url, "bench", "js", "consume", "--msgs", "100", "--clients", "2", "--batch", "25"
    )
    assert "JetStream durable consumer (fetch) stats" in result.out
    consumer = await js.consumer_info("benchstream", "nats-bench")
    assert (consumer.delivered.stream_seq, consumer.num_ack_pending, consumer.num_pending) == (
        160,
        0,
        0,
    )
    short = await cli(url, "bench", "js", "fetch", "--msgs", "1", "--timeout", "0.2s")
    assert short.code == 1
    assert "only 0 of 1 messages arrived" in short.err


async def test_bench_kv_put_then_get(target: Any) -> None:
    url, js = target
    doc = (
        await ok(
            url, "bench", "kv", "put", "--msgs", "40", "--clients", "2", "--size", "8", "--json"
        )
    ).json()
    assert (doc["msgs"], doc["clients"][1]["operations_timed"]) == (40, 20)
    kv = await js.key_value("benchbucket")
    assert sorted(await kv.keys(), key=int) == [str(n) for n in range(40)]
    assert (await kv.get("39")).value == bytes(8)
    doc = (
        await ok(url, "bench", "kv", "get", "--msgs", "40", "--randomize", "40", "--json")
    ).json()
    assert doc["msgs"] == 40
    assert doc["bytes"] == 40 * 8
    missing = await cli(url, "bench", "kv", "get", "--msgs", "41")
    assert missing.code == 1
    assert "key '40' not found in bucket 'benchbucket'" in missing.err


def test_stats_follow_natscli() -> None:
    assert split(10, 3) == [4, 3, 3]
    ordered = list(range(1000, 101_000, 1000))  # 1..100 µs
    assert percentile(ordered, 50) == 50.0
    assert percentile(ordered, 99.9) == 100.0
    summary = latency_summary(ordered)
    assert summary is not None
    assert (summary["min"], summary["p90"], summary["max"]) == (1.0, 90.0, 100.0)
    assert latency_summary([]) is None
