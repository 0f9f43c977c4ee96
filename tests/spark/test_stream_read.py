"""Streaming reads (`spark.readStream.format("jetstream")`): offsets, limits, restarts, loss."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
from tests.spark.jsutil import JetStream


def stream_reader(spark: Any, js: JetStream, stream: str, **options: str) -> Any:
    r = spark.readStream.format("jetstream").option("servers", js.url).option("stream", stream)
    for key, value in options.items():
        r = r.option(key, value)
    return r.load()


class Batches:
    """A foreachBatch sink that records (batch id, sorted sequences) per micro-batch."""

    def __init__(self) -> None:
        self.seen: list[tuple[int, list[int]]] = []

    def __call__(self, df: Any, batch_id: int) -> None:
        self.seen.append((batch_id, sorted(r.seq for r in df.select("seq").collect())))

    def run(self, df: Any, checkpoint: Path) -> None:
        query = (
            df.writeStream.foreachBatch(self)
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination(120)
        assert not query.isActive

    def data_batches(self) -> list[tuple[int, list[int]]]:
        return [(b, s) for b, s in self.seen if s]


def test_available_now_with_max_records_gives_several_batches(
    spark: Any, js: JetStream, name: str, checkpoint: Path
) -> None:
    js.add_stream(name, [f"{name}.>"])
    js.fill(f"{name}.x", 100)
    sink = Batches()
    sink.run(
        stream_reader(spark, js, name, startingOffsets="earliest", maxRecordsPerTrigger="30"),
        checkpoint,
    )
    batches = sink.data_batches()
    assert [len(s) for _, s in batches] == [30, 30, 30, 10]
    assert [seq for _, s in batches for seq in s] == list(range(1, 101))
    # The checkpoint's offsets are stream sequences, Kafka-style JSON.
    offsets = (checkpoint / "offsets" / "3").read_text().splitlines()
    assert json.loads(offsets[-1]) == {name: 101}


def test_starting_offsets_default_to_latest(
    spark: Any, js: JetStream, name: str, checkpoint: Path
) -> None:
    js.add_stream(name, [f"{name}.>"])
    js.fill(f"{name}.x", 5)
    sink = Batches()
    sink.run(stream_reader(spark, js, name), checkpoint)
    assert sink.data_batches() == []
    js.fill(f"{name}.x", 3, start=6)
    sink.run(stream_reader(spark, js, name), checkpoint)
    assert [s for _, s in sink.data_batches()] == [[6, 7, 8]]


def test_start_by_sequence_and_filter(
    spark: Any, js: JetStream, name: str, checkpoint: Path
) -> None:
    js.add_stream(name, [f"{name}.>"])
    js.publish([(f"{name}.{'ab'[i % 2]}", b"x") for i in range(20)])
    sink = Batches()
    df = stream_reader(spark, js, name, startingOffsets="5", filterSubjects=f"{name}.a")
    sink.run(df, checkpoint)
    assert [seq for _, s in sink.data_batches() for seq in s] == list(range(5, 21, 2))


def test_restart_replays_the_uncommitted_batch_exactly(
    spark: Any, js: JetStream, name: str, checkpoint: Path
) -> None:
    js.add_stream(name, [f"{name}.>"])
    js.fill(f"{name}.x", 100)
    df = stream_reader(spark, js, name, startingOffsets="earliest", maxRecordsPerTrigger="40")
    first = Batches()
    first.run(df, checkpoint)
    assert [(b, len(s)) for b, s in first.data_batches()] == [(0, 40), (1, 40), (2, 20)]
    # A crash after the sink wrote batch 2 but before Spark recorded its commit.
    (checkpoint / "commits" / "2").unlink()
    (checkpoint / "commits" / ".2.crc").unlink(missing_ok=True)
    js.fill(f"{name}.x", 30, start=101)
    second = Batches()
    second.run(df, checkpoint)
    replayed = second.data_batches()
    assert replayed[0] == (2, list(range(81, 101)))  # the same range, the same rows
    assert [b for b, _ in replayed] == [2, 3]
    assert replayed[1] == (3, list(range(101, 131)))
    final = {b: s for b, s in first.data_batches() + replayed}
    everything = [seq for b in sorted(final) for seq in final[b]]
    assert everything == list(range(1, 131))  # no gaps, no duplicates


def test_restart_into_parquet_has_no_duplicates(
    spark: Any, js: JetStream, name: str, tmp_path: Path
) -> None:
    js.add_stream(name, [f"{name}.>"])
    js.fill(f"{name}.x", 50)
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"

    def run() -> None:
        df = stream_reader(spark, js, name, startingOffsets="earliest", maxRecordsPerTrigger="20")
        query = (
            df.writeStream.format("parquet")
            .option("path", str(out))
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination(120)

    run()
    (checkpoint / "commits" / "2").unlink()
    (checkpoint / "commits" / ".2.crc").unlink(missing_ok=True)
    js.fill(f"{name}.x", 5, start=51)
    run()
    got = sorted(r.seq for r in spark.read.parquet(str(out)).select("seq").collect())
    assert got == list(range(1, 56))


def test_fail_on_data_loss_after_purge(
    spark: Any, js: JetStream, name: str, tmp_path: Path
) -> None:
    js.add_stream(name, [f"{name}.>"])
    js.fill(f"{name}.x", 10)
    sink = Batches()
    df = stream_reader(spark, js, name, startingOffsets="earliest")
    sink.run(df, tmp_path / "strict")
    js.fill(f"{name}.x", 10, start=11)  # 11..20, not yet read
    js.purge(name, seq=16)  # 11..15 are lost to the query
    strict = stream_reader(spark, js, name, startingOffsets="earliest")
    query = (
        strict.writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(tmp_path / "strict"))
        .trigger(availableNow=True)
        .start()
    )
    with pytest.raises(Exception, match=r"sequences 11\.\.15 are gone"):
        query.awaitTermination(120)
    # The same checkpoint with failOnDataLoss=false skips the gap and goes on.
    shutil.copytree(tmp_path / "strict", tmp_path / "lenient")
    lenient = Batches()
    lenient.run(
        stream_reader(spark, js, name, startingOffsets="earliest", failOnDataLoss="false"),
        tmp_path / "lenient",
    )
    assert [seq for _, s in lenient.data_batches() for seq in s] == list(range(16, 21))


def test_min_records_per_trigger_waits_for_records_or_the_delay(
    spark: Any, js: JetStream, name: str, tmp_path: Path
) -> None:
    """As Kafka's minOffsetsPerTrigger: the first batch fires at once, later ones wait."""
    js.add_stream(name, [f"{name}.>"])
    js.fill(f"{name}.x", 10)

    def run(delay: str, checkpoint: Path) -> Batches:
        sink = Batches()
        df = stream_reader(
            spark,
            js,
            name,
            startingOffsets="earliest",
            minRecordsPerTrigger="1000",
            maxTriggerDelay=delay,
        )
        query = (
            df.writeStream.foreachBatch(sink)
            .option("checkpointLocation", str(checkpoint))
            .trigger(processingTime="100 milliseconds")
            .start()
        )
        try:
            deadline = time.monotonic() + 30
            while not sink.data_batches() and time.monotonic() < deadline:
                time.sleep(0.05)
            js.fill(f"{name}.x", 10, start=11)
            time.sleep(2.5)
        finally:
            query.stop()
        return sink

    patient = run("1h", tmp_path / "patient")
    assert [s for _, s in patient.data_batches()] == [list(range(1, 11))]
    eager = run("1s", tmp_path / "eager")  # the delay passes: the 10 new records go
    assert [seq for _, s in eager.data_batches() for seq in s] == list(range(1, 31))
