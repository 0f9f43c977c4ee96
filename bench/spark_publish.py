"""The Spark connector's write path without Spark: `source.publish_batches`, Brook and
nats-server side by side.

`publish_batches` is what a Spark write task runs: Arrow record batches in, one HPUB per
row with a derived `Nats-Msg-Id`, PubAcks matched, a report out. This feeds it
`--messages` rows of `--size`-byte payloads in Arrow batches of 10,000 rows (Spark's
`arrow.maxRecordsPerBatch`) into a file stream, `--repeat` times (each time with new ids,
so every message is stored), and prints rows/s with the CPU seconds of this process
(the connector) and of the server: CPU is what a shared 2-core machine distorts least.

    .venv/bin/python -m bench.spark_publish --messages 100000

Never part of the test run; numbers go in ADRs and closing notes.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Iterator

import nats
import pyarrow as pa

from bench.core import brook_server, nats_server, server_cpu_s
from brook_spark.options import parse_write
from brook_spark.source import publish_batches

ARROW_BATCH_ROWS = 10_000


def create_stream(url: str) -> None:
    async def go() -> None:
        nc = await nats.connect(url)
        await nc.jetstream().add_stream(name="BENCH", subjects=["bench.>"], storage="file")
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
    options = parse_write({"servers": url, "subject": "bench.x"}, streaming=False)
    for attempt in range(args.repeat):
        server0, client0 = server_cpu_s(port), time.process_time()
        started = time.perf_counter()
        report = publish_batches(options, batches(args.messages, args.size), f"run{attempt}:0")
        elapsed = time.perf_counter() - started
        assert report.published == args.messages, report
        print(
            f"{name:12} publish_batches {args.messages / elapsed:>10,.0f} rows/s "
            f"({elapsed:5.2f} s) | connector CPU {time.process_time() - client0:5.2f} s | "
            f"server CPU {server_cpu_s(port) - server0:5.2f} s",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--size", type=int, default=100, help="payload bytes")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--servers", default="nats-server,brook")
    args = parser.parse_args()
    for name in args.servers.split(","):
        server = brook_server(jetstream=True) if name == "brook" else nats_server(jetstream=True)
        with server as port:
            run(name, port, args)


if __name__ == "__main__":
    main()
