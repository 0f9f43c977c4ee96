"""The `jetstream` data source: batch and streaming reads and writes on PySpark's Python API.

Shaped like Spark's Kafka source: offsets are stream sequences (`{"<stream>": next_seq}` in
the checkpoint), `startingOffsets`/`endingOffsets`/`startingTimestamp` choose the range,
`maxRecordsPerTrigger` and `minRecordsPerTrigger`+`maxTriggerDelay` shape micro-batches, and
`failOnDataLoss` decides what a purge under a running query means.

Where things run (and why nothing here holds a socket): `partitions()` and the streaming
methods run on the driver side in Python planner processes; `read()` and `write()` run in
executor Python workers on unpickled copies. Everything a task needs travels inside its
partition or on the writer as options; connections are opened lazily by `runtime()`.

See docs/spark.md for the user's guide and docs/adr/0005-spark-connector.md for the design.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from pyspark import TaskContext
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamArrowWriter,
    DataSourceStreamReader,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    ByteType,
    IntegerType,
    LongType,
    MapType,
    ShortType,
    StringType,
    StructType,
)

from brook_spark import commits, jsapi
from brook_spark.fastbatch import FastBatchPublisher
from brook_spark.fetch import RangeRead, read_ddl, read_range
from brook_spark.options import (
    OptionError,
    ReadOptions,
    WriteOptions,
    parse_read,
    parse_write,
)
from brook_spark.plan import Admission, split_range
from brook_spark.publish import Publisher, PublishReport, frames_for, layout_for
from brook_spark.runtime import runtime


class DataLossError(RuntimeError):
    """Messages the query still had to read are gone (purged, expired or deleted)."""


class JetStreamDataSource(DataSource):
    """`spark.read.format("jetstream")` and friends; found by Spark through `pyspark_jetstream`."""

    @classmethod
    def name(cls) -> str:
        return "jetstream"

    def schema(self) -> str:
        value = self.options.get("includeheaders", "true").strip().lower()
        if value not in ("true", "false", "1", "0", "yes", "no"):
            raise OptionError(f"option 'includeHeaders' must be true or false, got {value!r}")
        return read_ddl(value in ("true", "1", "yes"))

    def reader(self, schema: StructType) -> DataSourceReader:
        return JetStreamBatchReader(parse_read(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return JetStreamStreamReader(parse_read(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceArrowWriter:
        _refuse_overwrite(overwrite)
        options = parse_write(self.options, streaming=False)
        check_write_schema(schema, options)
        # Generated here, on the driver: every task, every retry and commit() share it.
        return JetStreamBatchWriter(options, options.write_id or uuid.uuid4().hex)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamArrowWriter:
        _refuse_overwrite(overwrite)
        options = parse_write(self.options, streaming=True)
        check_write_schema(schema, options)
        return JetStreamStreamWriter(options)


def _refuse_overwrite(overwrite: bool) -> None:
    if overwrite:
        raise OptionError(
            "the jetstream sink only appends: a stream cannot be overwritten. "
            'Use .mode("append") (batch) or outputMode("append"/"update") (streaming).'
        )


# --------------------------------------------------------------------------- reading


def _partitions(options: ReadOptions, lo: int, hi: int, allow_direct: bool) -> list[InputPartition]:
    """One partition per contiguous piece of [lo, hi); all a task needs travels inside."""
    direct = allow_direct and len(options.filters) <= 1
    pieces = split_range(
        lo,
        hi,
        min_partitions=options.min_partitions,
        max_records_per_partition=options.max_records_per_partition,
    )
    return [
        InputPartition(
            RangeRead(
                connect=options.connect,
                stream=options.stream,
                lo=a,
                hi=b,
                filters=options.filters,
                direct=direct,
                include_headers=options.include_headers,
            )
        )
        for a, b in pieces
    ]


def _state(options: ReadOptions) -> jsapi.StreamState:
    rt = runtime()

    async def go() -> jsapi.StreamState:
        nc = await rt.client(options.connect)
        return await jsapi.stream_state(nc, options.stream, options.connect.request_timeout_s)

    return rt.run(go(), options.connect.request_timeout_s + 10)


def _seq_at(options: ReadOptions, ts_ns: int, state: jsapi.StreamState) -> int:
    rt = runtime()

    async def go() -> int | None:
        nc = await rt.client(options.connect)
        return await jsapi.seq_at_time(nc, options.stream, ts_ns, options.connect.request_timeout_s)

    seq = rt.run(go(), options.connect.request_timeout_s + 10)
    return state.last_seq + 1 if seq is None else seq


def _start(options: ReadOptions, state: jsapi.StreamState) -> int:
    if options.starting_ts_ns is not None:  # takes precedence, as in Kafka
        return _seq_at(options, options.starting_ts_ns, state)
    return options.starting.resolve(state.first, state.last_seq)


def _loss_message(stream: str, start: int, state: jsapi.StreamState) -> str:
    return (
        f"stream '{stream}': sequences {start}..{state.first - 1} are gone (purged, expired or "
        f"deleted; the stream now starts at {state.first}). Set failOnDataLoss=false to skip "
        "them."
    )


def _read(partition: InputPartition | None) -> Iterator[Any]:
    # With no partitions planned (an empty range) Spark still runs one task, without a value.
    spec = getattr(partition, "value", None)
    if not isinstance(spec, RangeRead):
        return iter(())
    return read_range(spec)


class JetStreamBatchReader(DataSourceReader):
    def __init__(self, options: ReadOptions) -> None:
        self.options = options

    def partitions(self) -> Sequence[InputPartition]:
        options = self.options
        state = _state(options)
        lo = _start(options, state)
        if options.ending_ts_ns is not None:
            hi = _seq_at(options, options.ending_ts_ns, state)
        else:
            hi = options.ending.resolve(state.first, state.last_seq)
        hi = min(hi, state.last_seq + 1)  # the future cannot be read
        if lo < state.first and options.starting.kind == "seq" and options.starting_ts_ns is None:
            if options.fail_on_data_loss and lo < hi:
                raise DataLossError(_loss_message(options.stream, lo, state))
            lo = state.first
        return _partitions(options, lo, hi, state.allow_direct)

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return _read(partition)


class JetStreamStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """One per query, on the driver side; offsets are `{"<stream>": next sequence}`."""

    def __init__(self, options: ReadOptions) -> None:
        self.options = options
        self.admission = Admission(
            min_records=options.min_records_per_trigger,
            max_delay_s=options.max_trigger_delay_s,
            clock=time.monotonic,
        )
        self.target: int | None = None  # the end under Trigger.AvailableNow

    def _offset(self, seq: int) -> dict[str, int]:
        return {self.options.stream: seq}

    def _seq(self, offset: dict[str, Any]) -> int:
        seq = offset.get(self.options.stream)
        if not isinstance(seq, int):
            raise OptionError(
                f"the checkpoint's offset {offset} is not for stream '{self.options.stream}' "
                "(option 'stream'): use a new checkpointLocation when changing streams"
            )
        return seq

    def _checked_start(self, start: int, state: jsapi.StreamState) -> int:
        if state.last_seq + 1 < start:
            raise DataLossError(
                f"stream '{self.options.stream}' ends at sequence {state.last_seq} but the query "
                f"already read up to {start - 1}: the stream was deleted and recreated or reset. "
                "Use a new checkpointLocation."
            )
        if start < state.first and state.first <= state.last_seq + 1:
            if self.options.fail_on_data_loss:
                raise DataLossError(_loss_message(self.options.stream, start, state))
            return state.first
        return start

    def initialOffset(self) -> dict[str, int]:
        return self._offset(_start(self.options, _state(self.options)))

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_records_per_trigger is not None:
            return ReadMaxRows(self.options.max_records_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self.target = _state(self.options).last_seq + 1

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, int]:
        begin = self._seq(start)
        state = _state(self.options)
        first = self._checked_start(begin, state)
        available = state.last_seq + 1
        if self.target is not None:
            available = min(available, self.target)
        max_records = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        end = self.admission.end(
            first, available, max_records=max_records, available_now=self.target is not None
        )
        return self._offset(max(end, begin))

    def reportLatestOffset(self) -> dict[str, int]:
        return self._offset(_state(self.options).last_seq + 1)

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        lo, hi = self._seq(start), self._seq(end)
        if hi <= lo:
            return []
        state = _state(self.options)
        lo = self._checked_start(lo, state)
        return _partitions(self.options, lo, hi, state.allow_direct)

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return _read(partition)

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to do: reads leave no state on the server."""


# --------------------------------------------------------------------------- writing


def check_write_schema(schema: StructType, options: WriteOptions) -> None:
    """Fail on the driver, before any task starts, when the columns cannot be published."""
    fields = {f.name: f.dataType for f in schema.fields}
    data = fields.get("data")
    if data is None:
        raise OptionError(
            "the jetstream sink needs a 'data' column (binary or string); columns are "
            f"{sorted(fields)}"
        )
    if not isinstance(data, BinaryType | StringType):
        raise OptionError(f"column 'data' must be binary or string, not {data.simpleString()}")
    subject = fields.get("subject")
    if subject is None and options.subject is None:
        raise OptionError("the jetstream sink needs a 'subject' column or the 'subject' option")
    if subject is not None and not isinstance(subject, StringType):
        raise OptionError(f"column 'subject' must be a string, not {subject.simpleString()}")
    headers = fields.get("headers")
    if headers is not None:
        ok = (
            isinstance(headers, MapType)
            and isinstance(headers.keyType, StringType)
            and (
                isinstance(headers.valueType, StringType)
                or (
                    isinstance(headers.valueType, ArrayType)
                    and isinstance(headers.valueType.elementType, StringType)
                )
            )
        )
        if not ok:
            raise OptionError(
                "column 'headers' must be map<string, string> or map<string, array<string>>, "
                f"not {headers.simpleString()}"
            )
    id_column = options.msg_id_column or "msg_id"
    id_type = fields.get(id_column)
    if options.msg_id_column is not None and id_type is None:
        raise OptionError(f"option 'msgIdColumn': there is no column '{options.msg_id_column}'")
    if id_type is not None and not isinstance(
        id_type, StringType | LongType | IntegerType | ShortType | ByteType
    ):
        raise OptionError(
            f"column '{id_column}' (the message id) must be a string or an integer, "
            f"not {id_type.simpleString()}"
        )


@dataclass
class WriteCommit(WriterCommitMessage):
    partition: int
    published: int
    duplicates: int
    first_seq: int
    last_seq: int
    query_id: str | None = None
    skipped: bool = False
    batched: int = 0  # rows acknowledged in fast batches (fastbatch.py): stored or duplicate


def publish_batches(options: WriteOptions, batches: Iterator[Any], id_prefix: str) -> PublishReport:
    """Publish every row of a task's Arrow batches; returns when all are acknowledged."""
    rt = runtime()
    timeout = options.connect.request_timeout_s

    async def open_publisher() -> tuple[Publisher | FastBatchPublisher, int]:
        nc = await rt.client(options.connect)
        kind = FastBatchPublisher if options.fast_batch else Publisher
        publisher = kind(nc, options.max_pending, timeout)
        await publisher.open()
        return publisher, int(nc.max_payload)

    publisher, max_payload = rt.run(open_publisher(), timeout + 10)
    try:
        row = 0
        layout = None
        for batch in batches:
            if layout is None:
                layout = layout_for(batch.schema, options.msg_id_column)
            frames = frames_for(
                batch,
                layout,
                default_subject=options.subject,
                id_prefix=id_prefix,
                first_row=row,
                expected_stream=options.stream,
                max_payload=max_payload,
                reply_prefix=publisher.reply_prefix,
                reply_suffix=publisher.reply_suffix,
                reply_base=publisher.reply_base,
            )
            rt.run(publisher.send(row, frames))
            row += batch.num_rows
        return rt.run(publisher.finish())
    finally:
        rt.run(publisher.close(), timeout)


def _task() -> TaskContext:
    context = TaskContext.get()
    if context is None:  # pragma: no cover - Spark always runs write() in a task
        raise RuntimeError("write() must run inside a Spark task")
    return context


class JetStreamBatchWriter(DataSourceArrowWriter):
    """Message ids `<writeId>:<partition>:<row>`: a retried task repeats them exactly."""

    def __init__(self, options: WriteOptions, write_id: str) -> None:
        self.options = options
        self.write_id = write_id

    def write(self, iterator: Iterator[Any]) -> WriteCommit:
        partition = _task().partitionId()
        report = publish_batches(self.options, iterator, f"{self.write_id}:{partition}")
        return WriteCommit(
            partition,
            report.published,
            report.duplicates,
            report.first_seq,
            report.last_seq,
            batched=report.batched,
        )

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        """Every row is acknowledged by now; nothing further to make durable."""

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """Published messages cannot be withdrawn; a rerun with the same writeId dedups them."""


class JetStreamStreamWriter(DataSourceStreamArrowWriter):
    """Message ids `<queryId>:<batchId>:<partition>:<row>` plus a commit marker per query."""

    def __init__(self, options: WriteOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[Any]) -> WriteCommit:
        context = _task()
        query_id = context.getLocalProperty("sql.streaming.queryId")
        batch_text = context.getLocalProperty("streaming.sql.batchId")
        if query_id is None or batch_text is None:
            raise RuntimeError("streaming write without a query id or batch id from Spark")
        batch_id = int(batch_text)
        partition = context.partitionId()
        rt = runtime()
        options = self.options

        async def marker() -> int | None:
            nc = await rt.client(options.connect)
            return await commits.last_committed(nc, options.commit_bucket, query_id)

        committed = rt.run(marker(), options.connect.request_timeout_s + 10)
        if committed is not None and batch_id <= committed:
            # A replay of a batch this sink already committed: publishing again could
            # duplicate messages once the duplicate window has passed.
            return WriteCommit(partition, 0, 0, 0, 0, query_id=query_id, skipped=True)
        report = publish_batches(options, iterator, f"{query_id}:{batch_id}:{partition}")
        return WriteCommit(
            partition,
            report.published,
            report.duplicates,
            report.first_seq,
            report.last_seq,
            query_id=query_id,
            batched=report.batched,
        )

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        query_id = next(
            (m.query_id for m in messages if isinstance(m, WriteCommit) and m.query_id), None
        )
        if query_id is None:
            return  # no task ran, so nothing was published
        rt = runtime()
        options = self.options

        async def record() -> None:
            nc = await rt.client(options.connect)
            await commits.record_commit(nc, options.commit_bucket, query_id, batchId)

        rt.run(record(), options.connect.request_timeout_s + 10)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """The batch will be replayed with the same ids; dedup drops what did arrive."""
