"""The Spark connector's throughput, Brook and nats-server side by side in one run.

For each server (file storage, one stream, 100-byte payloads), in order:

* batch write (PubAck per row): `spark.range(N)` -> `df.write.format("jetstream")` with
  option fastBatch=false, into a stream of its own
* batch write: the same with fast batches (the default: one per task, a flow ack per up to
  500 rows; ADR 0063); this also fills the stream the reads read
* batch read into `count()` (every column is still read: Python sources get no pruning)
* batch read into Parquet
* streaming read: `readStream` with `trigger(availableNow=True)` into the `noop` sink,
  `maxRecordsPerTrigger` of N/4 (four micro-batches)

Rows per second include Spark's job overheads, as a user would see them. The machine's two
cores are shared by Spark's JVM, its Python workers and the server, so each row also gives
the CPU seconds of Spark (the JVM and every Python process under it) and of the server: CPU
is what a busy shared machine distorts least.

Before a server's timed steps, a few rows are written and read back unmeasured: the first
query through the data source starts Spark's Python workers and imports pyarrow, nats-py
and the connector in them (several seconds), which would otherwise be charged to whichever
server comes first. A first row, `spark floor`, reads the connector's schema from a
synthetic Python data source that yields ready Arrow batches and talks to no server: what
Spark itself costs per row and per job on this machine, the ceiling of any read.

    python -m bench.spark [--messages N] [--size BYTES] [--servers brook,nats-server]

Never part of the test run; numbers go in closing notes and docs, not in assertions.
"""

from __future__ import annotations

import argparse
import asyncio
import json
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

from bench.core import brook_server, nats_server, server_cpu_s

ROOT = Path(__file__).resolve().parents[1]
SRC = str(ROOT / "src")
WARM_ROWS = 100
FLOOR_BATCH_ROWS = 10_000


def spark_session() -> Any:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    path = os.environ.get("PYTHONPATH", "")
    missing = [p for p in (SRC, str(ROOT)) if p not in path.split(os.pathsep)]
    if missing:  # the connector, and this module for the floor's data source
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (*missing, path) if p)
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


def create_stream(url: str, name: str = "BENCH", subjects: str = "bench.>") -> None:
    """A file stream with direct gets (the reads) and `allow_batched` (the writes' fast
    batches, ADR 0063; nats-py's StreamConfig has no field for it, hence the raw request)."""

    async def go() -> None:
        nc = await nats.connect(url)
        config: dict[str, object] = {"name": name, "subjects": [subjects], "storage": "file"}
        config.update(allow_direct=True, allow_batched=True)
        reply = await nc.request(f"$JS.API.STREAM.CREATE.{name}", json.dumps(config).encode(), 10)
        assert b'"error"' not in reply.data, reply.data
        await nc.close()

    asyncio.run(go())


def _tree_cpu_s(root: int) -> float:
    """CPU seconds of process `root` and every live process under it (with the children
    they have reaped): Spark's JVM, its Python daemon, workers and planners."""
    tick = os.sysconf("SC_CLK_TCK")
    parents: dict[int, list[int]] = {}
    used: dict[int, float] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:  # exited meanwhile
            continue
        pid = int(entry)
        parents.setdefault(int(fields[1]), []).append(pid)
        used[pid] = sum(int(x) for x in fields[11:15]) / tick
    total, todo = 0.0, [root]
    while todo:
        pid = todo.pop()
        total += used.get(pid, 0.0)
        todo.extend(parents.get(pid, ()))
    return total


class Meter:
    """Wall time and the CPU seconds of Spark and of the server for one timed step."""

    def __init__(self, spark: Any, server_port: int | None) -> None:
        self.jvm_pid: int = spark.sparkContext._gateway.proc.pid
        self.server_port = server_port

    def _cpu(self) -> tuple[float, float]:
        server = server_cpu_s(self.server_port) if self.server_port is not None else 0.0
        return _tree_cpu_s(self.jvm_pid), server

    def timed(self, label: str, rows: int, action: Callable[[], Any]) -> float:
        spark0, server0 = self._cpu()
        started = time.perf_counter()
        action()
        elapsed = time.perf_counter() - started
        spark1, server1 = self._cpu()
        rate = rows / elapsed
        cpu = f"CPU: spark {spark1 - spark0:5.2f} s"
        if self.server_port is not None:
            cpu += f", server {server1 - server0:5.2f} s"
        print(
            f"  {label:28} {rows:>9} rows {elapsed:7.1f} s {rate:>10,.0f} rows/s  {cpu}",
            flush=True,
        )
        return rate


def floor_source() -> type:
    """A Python data source with the read schema that yields ready Arrow batches (no server)."""
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    class FloorReader(DataSourceReader):
        def __init__(self, rows: int, partitions: int) -> None:
            self.rows = rows
            self.count = partitions

        def partitions(self) -> list[InputPartition]:
            share, extra = divmod(self.rows, self.count)
            return [InputPartition(share + (i < extra)) for i in range(self.count)]

        def read(self, partition: InputPartition) -> Iterator[Any]:
            import pyarrow as pa

            from brook_spark.fetch import HEADERS_TYPE, TIMESTAMP_TYPE, read_schema

            rows: int = partition.value
            k = min(rows, FLOOR_BATCH_ROWS)
            batch = pa.RecordBatch.from_arrays(
                [
                    pa.repeat(pa.scalar("BENCH", pa.string()), k),
                    pa.array(["bench.x"] * k, pa.string()),
                    pa.array(range(1, k + 1), pa.int64()),
                    pa.array([b"x" * 100] * k, pa.binary()),
                    pa.nulls(k, HEADERS_TYPE),
                    pa.array([1_700_000_000_000_000] * k, pa.int64()).cast(TIMESTAMP_TYPE),
                ],
                schema=read_schema(True),
            )
            while rows > 0:
                yield batch.slice(0, min(rows, k))
                rows -= k

    class FloorSource(DataSource):
        @classmethod
        def name(cls) -> str:
            return "bench_floor"

        def schema(self) -> str:
            from brook_spark.fetch import read_ddl

            return read_ddl(True)

        def reader(self, schema: Any) -> DataSourceReader:
            return FloorReader(int(self.options["rows"]), int(self.options["partitions"]))

    return FloorSource


def run_floor(spark: Any, messages: int) -> float:
    spark.dataSource.register(floor_source())
    partitions = max(1, -(-messages // 100_000))  # as the connector splits by default

    def count() -> None:
        df = spark.read.format("bench_floor").option("rows", str(messages))
        got = df.option("partitions", str(partitions)).load().count()
        assert got == messages, got

    count()  # starts the Python workers, unmeasured
    return Meter(spark, None).timed("spark floor (no server)", messages, count)


def warm_up(spark: Any, url: str) -> None:
    """Write and read back a few rows, unmeasured: Spark's Python workers start and import
    the connector here, not in the first timed step."""
    create_stream(url, "WARM", "warm.>")
    rows = spark.range(0, WARM_ROWS, numPartitions=4).selectExpr("CAST(id AS STRING) AS data")
    rows.write.format("jetstream").mode("append").option("servers", url).option(
        "subject", "warm.x"
    ).save()
    got = spark.read.format("jetstream").option("servers", url).option("stream", "WARM").load()
    assert got.count() == WARM_ROWS


def run_server(spark: Any, port: int, messages: int, size: int) -> dict[str, float]:
    url = f"nats://127.0.0.1:{port}"
    warm_up(spark, url)
    create_stream(url)
    timed = Meter(spark, port).timed
    rates: dict[str, float] = {}
    pad = "x" * max(0, size - 20)
    source = spark.range(0, messages, numPartitions=4).selectExpr(
        f"concat(lpad(CAST(id AS STRING), 20, '0'), '{pad}') AS data"
    )
    create_stream(url, "BENCHP", "benchp.>")

    def write(subject: str, fast: str) -> None:
        source.write.format("jetstream").mode("append").option("servers", url).option(
            "subject", subject
        ).option("fastBatch", fast).save()

    rates["batch write (PubAck per row)"] = timed(
        "batch write (PubAck per row)", messages, lambda: write("benchp.x", "false")
    )
    rates["batch write"] = timed("batch write", messages, lambda: write("bench.x", "true"))

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
    print(f"spark: {args.messages} rows of the read schema", flush=True)
    floor = run_floor(spark, args.messages)
    results: dict[str, dict[str, float]] = {}
    for name, server in servers(args.servers.split(",")):
        print(f"{name}: {args.messages} messages of {args.size} bytes", flush=True)
        with server as port:
            results[name] = run_server(spark, port, args.messages, args.size)
    if len(results) == 2:
        print(f"\n{'rows/s':28} {'nats-server':>12} {'brook':>12} {'ratio':>7}")
        for key in results["brook"]:
            n, b = results["nats-server"][key], results["brook"][key]
            print(f"{key:28} {n:>12,.0f} {b:>12,.0f} {b / n:>7.2f}")
        print(f"{'spark floor (no server)':28} {floor:>12,.0f}")
    spark.stop()


if __name__ == "__main__":
    main()
