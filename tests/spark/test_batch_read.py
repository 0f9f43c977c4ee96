"""Batch reads (`spark.read.format("jetstream")`) against Brook and nats-server alike."""

from __future__ import annotations

import datetime as dt
import itertools
import json
import time
from typing import Any

import pytest
from tests.spark.jsutil import JetStream


def reader(spark: Any, js: JetStream, stream: str, **options: str) -> Any:
    r = spark.read.format("jetstream").option("servers", js.url).option("stream", stream)
    for key, value in options.items():
        r = r.option(key, value)
    return r.load()


def seqs(df: Any) -> list[int]:
    return sorted(row.seq for row in df.select("seq").collect())


def test_partitions_cover_the_range_exactly_once(spark: Any, js: JetStream, name: str) -> None:
    js.add_stream(name, [f"{name}.>"])
    js.fill(f"{name}.x", 500)
    for seq in (40, 41, 250):  # interior gaps
        js.delete(name, seq)
    df = reader(spark, js, name, maxRecordsPerPartition="37")
    assert df.rdd.getNumPartitions() == 14  # ceil(500 / 37)
    rows = df.selectExpr("seq", "spark_partition_id() AS p").collect()
    got = [r.seq for r in rows]
    assert sorted(got) == [s for s in range(1, 501) if s not in (40, 41, 250)]
    assert len(set(got)) == len(got)
    # Each partition holds one contiguous piece of the range, in order.
    by_part: dict[int, list[int]] = {}
    for r in rows:
        by_part.setdefault(r.p, []).append(r.seq)
    spans = sorted((min(v), max(v)) for v in by_part.values())
    assert all(a[1] < b[0] for a, b in itertools.pairwise(spans))


def test_min_partitions(spark: Any, js: JetStream, name: str) -> None:
    js.add_stream(name, [f"{name}.>"])
    js.fill(f"{name}.x", 10)
    df = reader(spark, js, name, minPartitions="4")
    assert df.rdd.getNumPartitions() == 4
    assert seqs(df) == list(range(1, 11))


def test_schema_values_and_headers(spark: Any, js: JetStream, name: str) -> None:
    js.add_stream(name, [f"{name}.>"])
    before = dt.datetime.now(dt.UTC)
    js.publish(
        [
            (f"{name}.a", b"one", {"Trace": "t-1", "Nats-Msg-Id": "id-1"}),
            (f"{name}.b", b""),
        ]
    )
    after = dt.datetime.now(dt.UTC)
    df = reader(spark, js, name)
    assert [(f.name, f.dataType.simpleString()) for f in df.schema.fields] == [
        ("stream", "string"),
        ("subject", "string"),
        ("seq", "bigint"),
        ("data", "binary"),
        ("headers", "map<string,array<string>>"),
        ("timestamp", "timestamp"),
    ]
    rows = sorted(df.collect(), key=lambda r: r.seq)
    first, second = rows
    assert (first.stream, first.subject, first.seq, bytes(first.data)) == (
        name,
        f"{name}.a",
        1,
        b"one",
    )
    assert first.headers == {"Trace": ["t-1"], "Nats-Msg-Id": ["id-1"]}
    assert (second.subject, bytes(second.data), second.headers) == (f"{name}.b", b"", None)
    # Spark returns naive datetimes in the session time zone (UTC in these tests).
    stamp = first.timestamp.replace(tzinfo=dt.UTC)
    assert before - dt.timedelta(seconds=1) <= stamp <= after + dt.timedelta(seconds=1)


def test_include_headers_false_drops_the_column(spark: Any, js: JetStream, name: str) -> None:
    js.add_stream(name, [f"{name}.>"])
    js.publish([(f"{name}.a", b"x", {"K": "v"})])
    df = reader(spark, js, name, includeHeaders="false")
    assert df.columns == ["stream", "subject", "seq", "data", "timestamp"]
    assert [bytes(r.data) for r in df.collect()] == [b"x"]


def test_start_and_end_by_sequence_and_json(spark: Any, js: JetStream, name: str) -> None:
    js.add_stream(name, [f"{name}.>"])
    js.fill(f"{name}.x", 20)
    assert seqs(reader(spark, js, name, startingOffsets="15")) == list(range(15, 21))
    assert seqs(
        reader(
            spark,
            js,
            name,
            startingOffsets=json.dumps({name: 5}),
            endingOffsets=json.dumps({name: 9}),
        )
    ) == [5, 6, 7, 8]
    assert seqs(
        reader(spark, js, name, startingOffsets=json.dumps({name: -2}), endingOffsets="3")
    ) == [1, 2]
    assert seqs(reader(spark, js, name, startingOffsets="latest")) == []
    assert seqs(reader(spark, js, name, startingOffsets="25")) == []
    assert seqs(reader(spark, js, name, endingOffsets="1000")) == list(range(1, 21))


def test_start_and_end_by_time(spark: Any, js: JetStream, name: str) -> None:
    js.add_stream(name, [f"{name}.>"])
    js.fill(f"{name}.x", 5)
    time.sleep(0.05)
    t1 = dt.datetime.now(dt.UTC)
    time.sleep(0.05)
    js.fill(f"{name}.x", 5, start=6)
    time.sleep(0.05)
    t2_ms = int(time.time() * 1000)
    time.sleep(0.05)
    js.fill(f"{name}.x", 5, start=11)
    iso = t1.isoformat().replace("+00:00", "Z")
    assert seqs(reader(spark, js, name, startingTimestamp=iso)) == list(range(6, 16))
    assert seqs(reader(spark, js, name, startingTimestamp=iso, endingTimestamp=str(t2_ms))) == list(
        range(6, 11)
    )
    # A time after every message reads nothing; a time before all reads everything.
    assert (
        seqs(reader(spark, js, name, startingTimestamp=str(int(time.time() * 1000) + 60_000))) == []
    )
    assert seqs(reader(spark, js, name, startingTimestamp="0")) == list(range(1, 16))


def test_one_filter_with_gaps_uses_direct_get(spark: Any, js: JetStream, name: str) -> None:
    js.add_stream(name, [f"{name}.>"])
    subjects = [f"{name}.{'abc'[i % 3]}" for i in range(60)]
    js.publish([(s, str(i + 1).encode()) for i, s in enumerate(subjects)])
    js.delete(name, 4)  # an 'a' message
    expected = [i + 1 for i, s in enumerate(subjects) if s.endswith(".a") and i + 1 != 4]
    df = reader(spark, js, name, filterSubjects=f"{name}.a", maxRecordsPerPartition="7")
    assert seqs(df) == expected
    assert {r.subject for r in df.select("subject").collect()} == {f"{name}.a"}
    # A wildcard filter works the same.
    assert len(seqs(reader(spark, js, name, filterSubjects=f"{name}.*"))) == 59


def test_several_filters_use_a_consumer(spark: Any, js: JetStream, name: str) -> None:
    js.add_stream(name, [f"{name}.>"])
    subjects = [f"{name}.{'abc'[i % 3]}" for i in range(60)]
    js.publish([(s, str(i + 1).encode()) for i, s in enumerate(subjects)])
    js.delete(name, 3)  # a 'c' message
    expected = [i + 1 for i, s in enumerate(subjects) if not s.endswith(".b") and i + 1 != 3]
    df = reader(
        spark,
        js,
        name,
        filterSubjects=json.dumps([f"{name}.a", f"{name}.c"]),
        maxRecordsPerPartition="9",
        startingOffsets="2",
        endingOffsets="59",
    )
    assert seqs(df) == [s for s in expected if 2 <= s < 59]
    # Reader consumers are removed when their task ends.
    assert js.api(f"$JS.API.CONSUMER.NAMES.{name}").get("consumers") in (None, [])


def test_consumer_fallback_when_direct_get_is_off(spark: Any, js: JetStream, name: str) -> None:
    js.add_stream(name, [f"{name}.>"], allow_direct=False)
    js.publish([(f"{name}.x", b"a", {"H": "1"}), (f"{name}.y", b"b"), (f"{name}.x", b"c")])
    rows = sorted(reader(spark, js, name, minPartitions="2").collect(), key=lambda r: r.seq)
    assert [(r.seq, r.subject, bytes(r.data), r.headers) for r in rows] == [
        (1, f"{name}.x", b"a", {"H": ["1"]}),
        (2, f"{name}.y", b"b", None),
        (3, f"{name}.x", b"c", None),
    ]
    assert rows[0].timestamp is not None


def test_fail_on_data_loss_after_purge(spark: Any, js: JetStream, name: str) -> None:
    js.add_stream(name, [f"{name}.>"])
    js.fill(f"{name}.x", 10)
    js.purge(name, seq=6)  # removes 1..5
    with pytest.raises(Exception, match="failOnDataLoss"):
        reader(spark, js, name, startingOffsets="3").count()
    assert seqs(reader(spark, js, name, startingOffsets="3", failOnDataLoss="false")) == list(
        range(6, 11)
    )
    # 'earliest' is not data loss: it means whatever the stream still has.
    assert seqs(reader(spark, js, name)) == list(range(6, 11))


def test_empty_stream_and_missing_stream(spark: Any, js: JetStream, name: str) -> None:
    js.add_stream(name, [f"{name}.>"])
    assert reader(spark, js, name).count() == 0
    with pytest.raises(Exception, match=r"stream 'NOPE_.*' not found \(option 'stream'\)"):
        reader(spark, js, f"NOPE_{name}").count()
