"""Writes (`df.write` / `df.writeStream` with format "jetstream"): content and idempotence."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
from tests.spark.jsutil import JetStream


def writer(df: Any, js: JetStream, **options: str) -> Any:
    w = df.write.format("jetstream").mode("append").option("servers", js.url)
    for key, value in options.items():
        w = w.option(key, value)
    return w


def test_round_trip_with_subject_column_headers_and_ids(
    spark: Any, js: JetStream, name: str
) -> None:
    js.add_stream(name, [f"{name}.>"])
    df = spark.createDataFrame(
        [
            (f"{name}.a", bytearray(b"one"), {"K": ["1", "2"], "Other": ["x"]}, "id-1"),
            (f"{name}.b", bytearray(b"two"), None, "id-2"),
            (f"{name}.a", bytearray(b"dup"), None, "id-1"),  # same id: dropped by the server
        ],
        "subject string, data binary, headers map<string, array<string>>, msg_id string",
    ).coalesce(1)
    writer(df, js).save()
    stored = js.stored(name)
    assert [(m.subject, m.data) for m in stored] == [(f"{name}.a", b"one"), (f"{name}.b", b"two")]
    header = stored[0].header.decode()
    # Repeated header keys survive, and the id is the msg_id column.
    for line in ("K: 1\r\n", "K: 2\r\n", "Other: x\r\n"):
        assert line in header
    assert "Nats-Msg-Id: id-1\r\n" in header
    back = spark.read.format("jetstream").option("servers", js.url).option("stream", name).load()
    assert sorted(back.collect(), key=lambda r: r.seq)[0].headers == {
        "K": ["1", "2"],
        "Other": ["x"],
        "Nats-Msg-Id": ["id-1"],
    }


def test_string_data_subject_option_and_string_headers(
    spark: Any, js: JetStream, name: str
) -> None:
    js.add_stream(name, [f"{name}.>"])
    df = spark.createDataFrame(
        [("héllo", {"A": "b"}), ("world", None)], "data string, headers map<string, string>"
    )
    writer(df, js, subject=f"{name}.fixed", stream=name).save()
    stored = js.stored(name)
    assert sorted(m.data for m in stored) == ["héllo".encode(), b"world"]
    assert {m.subject for m in stored} == {f"{name}.fixed"}
    assert any(b"A: b\r\n" in m.header for m in stored)


def test_same_write_id_twice_publishes_once(spark: Any, js: JetStream, name: str) -> None:
    js.add_stream(name, [f"{name}.>"])
    df = spark.range(0, 500, numPartitions=3).selectExpr("CAST(id AS STRING) AS data")
    writer(df, js, subject=f"{name}.x", writeId="job-42").save()
    writer(df, js, subject=f"{name}.x", writeId="job-42").save()  # a rerun of the same job
    assert js.state(name)["messages"] == 500
    writer(df, js, subject=f"{name}.x").save()  # a new job: new ids
    assert js.state(name)["messages"] == 1000


@pytest.mark.parametrize("allow_batched", [False, True], ids=["per-row", "fast-batch"])
def test_retried_task_leaves_no_duplicates(
    spark: Any, js: JetStream, name: str, allow_batched: bool
) -> None:
    """A writer task fails after publishing half its rows; Spark retries the whole task.

    The stream first holds at most 1500 messages (discard new), so the first attempt gets
    PubAck errors after 1500 publishes and fails. A watcher lifts the limit once the
    stream is full and Spark reports the failed attempt (lifted sooner, a fast server
    could take the rest before the attempt saw its error); the retry publishes all 3000
    rows again, and the server drops the first 1500 as duplicates of what the failed
    attempt wrote. With `allow_batched` the rows go as a fast batch (ADR 0063): the
    refused row ends it, the rest fall back to a publish each, whose error fails the
    task; the retry's fast batch skips the duplicates.
    """
    js.add_stream(name, [f"{name}.>"], max_msgs=1500, discard="new", allow_batched=allow_batched)
    lifted = threading.Event()
    sc = spark.sparkContext
    tracker = sc.statusTracker()

    def failed_tasks() -> int:
        stages = [
            s for job in tracker.getJobIdsForGroup(name) for s in tracker.getJobInfo(job).stageIds
        ]
        return sum(tracker.getStageInfo(s).numFailedTasks for s in stages)

    def lift_limit_when_full() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if js.state(name)["messages"] >= 1500 and failed_tasks() >= 1:
                config = js.api(f"$JS.API.STREAM.INFO.{name}")["config"]
                config["max_msgs"] = -1
                answer = js.api(f"$JS.API.STREAM.UPDATE.{name}", config)
                assert "error" not in answer, answer
                lifted.set()
                return
            time.sleep(0.01)

    watcher = threading.Thread(target=lift_limit_when_full, daemon=True)
    watcher.start()
    df = spark.range(0, 3000, numPartitions=1).selectExpr("concat('row-', id) AS data")
    sc.setJobGroup(name, "writer retry")
    try:
        writer(df, js, subject=f"{name}.x").save()
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
    watcher.join(5)
    assert lifted.is_set()
    assert failed_tasks() >= 1  # the first attempt did fail after publishing
    state = js.state(name)
    assert (state["messages"], state["last_seq"]) == (3000, 3000)
    assert sorted(m.data for m in js.stored(name)) == sorted(
        f"row-{i}".encode() for i in range(3000)
    )


@pytest.mark.parametrize("allow_batched", [False, True], ids=["per-row", "fast-batch"])
def test_streaming_write_replay_after_the_duplicate_window_is_skipped(
    spark: Any, js: JetStream, name: str, checkpoint: Path, allow_batched: bool
) -> None:
    source, target = f"{name}_IN", f"{name}_OUT"
    js.add_stream(source, [f"{source}.>"])
    # A tiny duplicate window: only the commit marker can stop a late replay.
    js.add_stream(target, [f"{target}.>"], duplicate_window=0.2, allow_batched=allow_batched)
    js.fill(f"{source}.x", 60)

    def run() -> None:
        df = (
            spark.readStream.format("jetstream")
            .option("servers", js.url)
            .option("stream", source)
            .option("startingOffsets", "earliest")
            .option("maxRecordsPerTrigger", "25")
            .load()
            .selectExpr("data", f"concat('{target}.', subject) AS subject")
        )
        query = (
            df.writeStream.format("jetstream")
            .option("servers", js.url)
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination(120)
        assert query.exception() is None

    run()
    assert js.state(target)["messages"] == 60
    (checkpoint / "commits" / "2").unlink()
    (checkpoint / "commits" / ".2.crc").unlink(missing_ok=True)
    time.sleep(0.5)  # past the duplicate window
    js.fill(f"{source}.x", 5, start=61)
    run()
    stored = js.stored(target)
    assert len(stored) == 65
    assert sorted(m.data for m in stored) == sorted(f"m{i}".encode() for i in range(1, 66))


def test_overwrite_is_rejected(spark: Any, brook: JetStream, name: str, checkpoint: Path) -> None:
    df = spark.createDataFrame([("x",)], "data string")
    with pytest.raises(Exception, match=r'only appends.*\.mode\("append"\)'):
        df.write.format("jetstream").mode("overwrite").option("servers", brook.url).option(
            "subject", "a.b"
        ).save()
    counts = (
        spark.readStream.format("jetstream")
        .option("servers", brook.url)
        .option("stream", name)
        .load()
        .groupBy("subject")
        .count()
        .selectExpr("CAST(count AS STRING) AS data", "subject")
    )
    brook.add_stream(name, [f"{name}.>"])
    query = (
        counts.writeStream.format("jetstream")
        .outputMode("complete")
        .option("servers", brook.url)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
    )
    with pytest.raises(Exception, match="only appends"):
        query.start().awaitTermination(60)


def test_bad_write_schemas_fail_before_publishing(spark: Any, brook: JetStream, name: str) -> None:
    no_data = spark.createDataFrame([("x",)], "payload string")
    with pytest.raises(Exception, match="needs a 'data' column"):
        writer(no_data, brook, subject="a.b").save()
    no_subject = spark.createDataFrame([("x",)], "data string")
    with pytest.raises(Exception, match="'subject' column or the 'subject' option"):
        writer(no_subject, brook).save()
    with pytest.raises(Exception, match="option 'msgIdColumn': there is no column 'key'"):
        writer(no_subject, brook, subject="a.b", msgIdColumn="key").save()
    with pytest.raises(Exception, match=r"option 'subject'.*wildcards"):
        writer(no_subject, brook, subject="a.*").save()


def test_publish_without_a_stream_fails_clearly(spark: Any, js: JetStream, name: str) -> None:
    df = spark.createDataFrame([("x",)], "data string")
    with pytest.raises(Exception, match=f"no stream captures subject 'NOSTREAM_{name}.x'"):
        writer(df, js, subject=f"NOSTREAM_{name}.x").save()
