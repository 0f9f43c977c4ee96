"""The Spark connector's write path without Spark: `source.publish_batches`, Brook and
nats-server side by side.

`publish_batches` is what a Spark write task runs: Arrow record batches in, one HPUB per
row with a derived `Nats-Msg-Id`, PubAcks matched, a report out. This feeds it
`--messages` rows of `--size`-byte payloads in Arrow batches of 10,000 rows (Spark's
`arrow.maxRecordsPerBatch`) into a file stream with `allow_batched`, `--repeat` times (each
time with new ids, so every message is stored), and prints rows/s with the CPU seconds of
this process (the connector) and of the server: CPU is what a shared 2-core machine distorts
least. Each `--modes` entry is a row: `fast` (the task's rows as one ADR-50 fast batch,
fastbatch.py) or `per-row` (option fastBatch=false: a PubAck per row).

    .venv/bin/python -m bench.spark_publish --messages 100000

Never part of the test run; numbers go in ADRs and closing notes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections.abc import Callable, Iterator

import nats
import pyarrow as pa

from bench.core import brook_server, nats_server, server_cpu_s
from brook_spark.options import WriteOptions, parse_write
from brook_spark.source import publish_batches

ARROW_BATCH_ROWS = 10_000


def create_stream(url: str) -> None:
    async def go() -> None:
        nc = await nats.connect(url)
        config: dict[str, object] = {"name": "BENCH", "subjects": ["bench.>"], "storage": "file"}
        config["allow_batched"] = True  # nats-py's StreamConfig has no field for it
        await nc.request("$JS.API.STREAM.CREATE.BENCH", json.dumps(config).encode(), 10)
        await nc.close()

    asyncio.run(go())


def batches(rows: int, size: int) -> Iterator[pa.RecordBatch]:
    pad = "x" * max(0, size - 20)
    for lo in range(0, rows, ARROW_BATCH_ROWS):
        ids = range(lo, min(lo + ARROW_BATCH_ROWS, rows))
        yield pa.record_batch({"data": pa.array([f"{i:020d}{pad}" for i in ids])})


def run(name: str, port: int, args: argparse.Namespace) -> None:
    url = f"nats://127.0.0.1:{port}"
    create_stream(url)
    for attempt in range(args.repeat):
        for mode in args.modes.split(","):
            fast = {"fast": "true", "per-row": "false"}[mode]
            options = parse_write(
                {"servers": url, "subject": "bench.x", "fastBatch": fast}, streaming=False
            )
            run_one(name, port, args, options, f"{mode}{attempt}:0")


def run_one(
    name: str, port: int, args: argparse.Namespace, options: WriteOptions, id_prefix: str
) -> None:
    server0, client0 = server_cpu_s(port), time.process_time()
    started = time.perf_counter()
    report = publish_batches(options, batches(args.messages, args.size), id_prefix)
    elapsed = time.perf_counter() - started
    assert report.published + report.batched == args.messages, report
    mode = "fast" if options.fast_batch else "per-row"
    print(
        f"{name:12} {mode:8} {args.messages / elapsed:>10,.0f} rows/s "
        f"({elapsed:5.2f} s) | connector CPU {time.process_time() - client0:5.2f} s | "
        f"server CPU {server_cpu_s(port) - server0:5.2f} s",
        flush=True,
    )


def callgrind_workload(fast: bool) -> Callable[[int, int, Callable[[], None]], None]:
    """`bench.callgrind`'s `spark-write` (a PubAck per row) and `spark-write-fast` (one
    fast batch): the server's instructions per row of a Spark write task's publishes."""

    def run(port: int, n: int, zero: Callable[[], None]) -> None:
        url = f"nats://127.0.0.1:{port}"
        create_stream(url)
        flag = "true" if fast else "false"
        # Under valgrind a window's acks can take longer than the default timeout.
        given = {"servers": url, "subject": "bench.x", "fastBatch": flag, "requestTimeout": "300"}
        options = parse_write(given, streaming=False)
        publish_batches(options, batches(100, 100), "warm:0")  # connection and stream warm
        zero()
        report = publish_batches(options, batches(n, 100), "cg:0")
        assert (report.batched if fast else report.published) == n, report  # no fallback

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--size", type=int, default=100, help="payload bytes")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--servers", default="nats-server,brook")
    parser.add_argument("--modes", default="per-row,fast", help="per-row and/or fast")
    args = parser.parse_args()
    for name in args.servers.split(","):
        server = brook_server(jetstream=True) if name == "brook" else nats_server(jetstream=True)
        with server as port:
            run(name, port, args)


if __name__ == "__main__":
    main()
