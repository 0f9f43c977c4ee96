"""The Spark connector's throughput, Brook and nats-server side by side in one run.

For each server (file storage, one stream, 100-byte payloads), in order:

* batch write: `spark.range(N)` -> `df.write.format("jetstream")` (this also fills the stream)
* batch read into `count()` (every column is still read: Python sources get no pruning)
* batch read into Parquet
* streaming read: `readStream` with `trigger(availableNow=True)` into the `noop` sink,
  `maxRecordsPerTrigger` of N/4 (four micro-batches)

Rows per second include Spark's job overheads, as a user would see them. The machine's two
cores are shared by Spark's JVM, its Python workers and the server.

    python -m bench.spark [--messages N] [--size BYTES] [--servers brook,nats-server]

Never part of the test run; numbers go in closing notes and docs, not in assertions.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import nats

from bench.core import brook_server, nats_server

SRC = str(Path(__file__).resolve().parents[1] / "src")


def spark_session() -> Any:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    path = os.environ.get("PYTHONPATH", "")
    if SRC not in path.split(os.pathsep):
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (SRC, path) if p)
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("brook-spark-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.memory", "2g")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def create_stream(url: str) -> None:
    async def go() -> None:
        nc = await nats.connect(url)
        await nc.jetstream().add_stream(
            name="BENCH", subjects=["bench.>"], storage="file", allow_direct=True
        )
        await nc.close()

    asyncio.run(go())


def timed(label: str, rows: int, action: Callable[[], Any]) -> float:
    started = time.perf_counter()
    action()
    elapsed = time.perf_counter() - started
    rate = rows / elapsed
    print(f"  {label:28} {rows:>9} rows {elapsed:7.1f} s {rate:>10,.0f} rows/s", flush=True)
    return rate


def run_server(spark: Any, url: str, messages: int, size: int) -> dict[str, float]:
    create_stream(url)
    rates: dict[str, float] = {}
    pad = "x" * max(0, size - 20)
    source = spark.range(0, messages, numPartitions=4).selectExpr(
        f"concat(lpad(CAST(id AS STRING), 20, '0'), '{pad}') AS data"
    )
    rates["batch write"] = timed(
        "batch write",
        messages,
        lambda: (
            source.write.format("jetstream")
            .mode("append")
            .option("servers", url)
            .option("subject", "bench.x")
            .save()
        ),
    )

    def read() -> Any:
        return (
            spark.read.format("jetstream").option("servers", url).option("stream", "BENCH").load()
        )

    def count() -> None:
        got = read().count()
        assert got == messages, got

    rates["batch read -> count()"] = timed("batch read -> count()", messages, count)
    out = Path(tempfile.mkdtemp(prefix="brook-spark-bench-"))
    try:
        rates["batch read -> Parquet"] = timed(
            "batch read -> Parquet",
            messages,
            lambda: read().write.mode("overwrite").parquet(str(out / "parquet")),
        )

        def stream() -> None:
            query = (
                spark.readStream.format("jetstream")
                .option("servers", url)
                .option("stream", "BENCH")
                .option("startingOffsets", "earliest")
                .option("maxRecordsPerTrigger", str(max(1, messages // 4)))
                .load()
                .writeStream.format("noop")
                .option("checkpointLocation", str(out / "checkpoint"))
                .trigger(availableNow=True)
                .start()
            )
            query.awaitTermination()

        rates["streaming read (noop sink)"] = timed("streaming read (noop sink)", messages, stream)
    finally:
        shutil.rmtree(out, ignore_errors=True)
    return rates


def servers(names: list[str]) -> Iterator[tuple[str, AbstractContextManager[int]]]:
    for name in names:
        yield name, brook_server(jetstream=True) if name == "brook" else nats_server(jetstream=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--size", type=int, default=100, help="payload bytes")
    parser.add_argument("--servers", default="nats-server,brook")
    args = parser.parse_args()
    spark = spark_session()
    spark.range(10).count()  # JVM and worker warm-up, not measured
    results: dict[str, dict[str, float]] = {}
    for name, server in servers(args.servers.split(",")):
        print(f"{name}: {args.messages} messages of {args.size} bytes", flush=True)
        with server as port:
            results[name] = run_server(spark, f"nats://127.0.0.1:{port}", args.messages, args.size)
    if len(results) == 2:
        print(f"\n{'rows/s':28} {'nats-server':>12} {'brook':>12} {'ratio':>7}")
        for key in results["brook"]:
            n, b = results["nats-server"][key], results["brook"][key]
            print(f"{key:28} {n:>12,.0f} {b:>12,.0f} {b / n:>7.2f}")
    spark.stop()


if __name__ == "__main__":
    main()
