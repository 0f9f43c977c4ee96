"""Reading one sequence range [lo, hi) of a stream, chunk by chunk, as Arrow record batches.

Two strategies, chosen on the driver when the range is planned:

* **Batched direct get** (the default): `$JS.API.DIRECT.GET.<stream>` with
  `{"seq": s, "batch": n, "max_bytes": b}` (plus `next_by_subj` for one filter). The server
  streams the messages and closes with `204 EOB` (or `404` when nothing is left). No
  server-side state is created, so any number of tasks may read in parallel and a failed
  task leaves nothing behind.
* **Consumer fallback**, when the stream has `allow_direct: false` or several filters are
  given: an ephemeral pull consumer (ack none, memory storage, `opt_start_seq = lo`,
  `filter_subjects`) fetched with `no_wait` pulls, deleted at the end (and reaped by its
  inactivity threshold if the task dies).

Either way the range is the contract: messages with `seq >= hi` are never emitted, so the
partitions of a micro-batch cover it exactly once, and a replay of the same range after a
restart reads the same messages. Message handling happens in the raw handler on the
runtime's loop; the generator in `read_range` only waits for chunks and converts them,
fetching the next chunk while Spark consumes the current one.
"""

from __future__ import annotations

import asyncio
import bisect
import concurrent.futures
import contextlib
import itertools
import json
import re
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from brook_spark import framescan, jsapi
from brook_spark.options import ConnectOptions
from brook_spark.runtime import runtime
from brook_spark.wire import (
    DIRECT_HEADERS,
    HEADER_LINE,
    SCAN_COMPILED,
    RawClient,
    TimestampParser,
    group_headers,
    parse_header_lines,
    parse_status,
)

DIRECT_BATCH_MAX = 10_000  # messages per direct-get request
DIRECT_MAX_BYTES = 8 * 1024 * 1024  # bytes per direct-get request (the server sends at least one)
PULL_BATCH_MAX = 2_000  # messages per pull request in the fallback
CONSUMER_INACTIVE_NS = 60 * 1_000_000_000

DIRECT_HEADER_KEYS = frozenset(k.encode() for k in DIRECT_HEADERS)
HEADERS_TYPE = pa.map_(pa.string(), pa.list_(pa.string()))
TIMESTAMP_TYPE = pa.timestamp("us", tz="UTC")


def read_schema(include_headers: bool) -> pa.Schema:
    fields = [
        pa.field("stream", pa.string()),
        pa.field("subject", pa.string()),
        pa.field("seq", pa.int64()),
        pa.field("data", pa.binary()),
    ]
    if include_headers:
        fields.append(pa.field("headers", HEADERS_TYPE))
    fields.append(pa.field("timestamp", TIMESTAMP_TYPE))
    return pa.schema(fields)


def read_ddl(include_headers: bool) -> str:
    headers = "headers map<string, array<string>>, " if include_headers else ""
    return f"stream string, subject string, seq long, data binary, {headers}timestamp timestamp"


@dataclass(frozen=True)
class RangeRead:
    """Everything an executor needs to read one partition; pickled into the partition."""

    connect: ConnectOptions
    stream: str
    lo: int
    hi: int
    filters: tuple[str, ...]
    direct: bool
    include_headers: bool


class Columns:
    """Column lists for one chunk; appended to by the handler on the loop thread."""

    __slots__ = ("data", "headers", "seqs", "subjects", "timestamps")

    def __init__(self) -> None:
        self.subjects: list[str] = []
        self.seqs: list[int] = []
        self.data: list[bytes] = []
        self.headers: list[list[tuple[str, list[str]]] | None] = []
        self.timestamps: list[int] = []

    def __len__(self) -> int:
        return len(self.seqs)

    def to_batch(self, stream: str, schema: pa.Schema, include_headers: bool) -> pa.RecordBatch:
        n = len(self.seqs)
        arrays = [
            pa.repeat(pa.scalar(stream, pa.string()), n),
            pa.array(self.subjects, pa.string()),
            pa.array(self.seqs, pa.int64()),
            pa.array(self.data, pa.binary()),
        ]
        if include_headers:
            arrays.append(pa.array(self.headers, HEADERS_TYPE))
        arrays.append(pa.array(self.timestamps, pa.int64()).cast(TIMESTAMP_TYPE))
        return pa.RecordBatch.from_arrays(arrays, schema=schema)


_SEQ = re.compile(rb"\r\nNats-Sequence: *(\d+)")
_SUBJECT = re.compile(rb"\r\nNats-Subject: *([^\r]*)")
_TIME = re.compile(rb"\r\nNats-Time-Stamp: *([^\r]*)")
_USER_LINE = re.compile(
    rb"\r\n(?!Nats-(?:Stream|Subject|Sequence|Time-Stamp|Num-Pending|Last-Sequence"
    rb"|UpTo-Sequence):)[^\r\n]"
)
_NS_TYPE = pa.timestamp("ns", tz="UTC")


class RawReplies:
    """One direct-get chunk as the raw (payload, header block) pairs, decoded in bulk.

    The handler on the loop only keeps the two `bytes` each reply already is; `to_batch`
    (on the Spark task's thread) extracts `Nats-Sequence`, `Nats-Subject` and
    `Nats-Time-Stamp` in one compiled pass over the blocks (`framescan.direct_columns`,
    ADR 0059), or, interpreted, joins them into one buffer and runs one regex pass each;
    it casts the timestamps with Arrow, and parses row by row only the blocks that carry
    user headers (ADR 0047). Rows at or beyond `hi` (the range's end) are cut off, as
    `_ChunkReader._append` does. A chunk whose blocks do not carry each direct-get header
    exactly once (a server that writes them differently) is decoded row by row instead.
    """

    __slots__ = ("data", "headers", "hi")

    def __init__(self, hi: int) -> None:
        self.hi = hi
        self.data: list[bytes] = []
        self.headers: list[bytes] = []

    def __len__(self) -> int:
        return len(self.data)

    def last_seq(self) -> int | None:
        if not self.headers:
            return None
        match = _SEQ.search(self.headers[-1])
        return int(match.group(1)) if match else None

    def to_batch(self, stream: str, schema: pa.Schema, include_headers: bool) -> pa.RecordBatch:
        blocks = self.headers
        n = len(blocks)
        user_rows: list[int] | None = None
        blob = b""
        if SCAN_COMPILED:  # one compiled pass over the blocks (ADR 0059)
            columns = framescan.direct_columns(blocks)
            if columns is None:
                return self._rows().to_batch(stream, schema, include_headers)
            seqs, subjects, stamps, user_rows = columns
        else:
            blob = b"\n".join(blocks)
            seqs = list(map(int, _SEQ.findall(blob)))
            subjects = _SUBJECT.findall(blob)
            stamps = _TIME.findall(blob)
            if not len(seqs) == len(subjects) == len(stamps) == n:
                return self._rows().to_batch(stream, schema, include_headers)
        while n and seqs[n - 1] >= self.hi:
            n -= 1
        try:
            times = pa.array(stamps[:n], pa.binary()).cast(pa.string()).cast(_NS_TYPE)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):  # a numeric zone offset
            return self._rows().to_batch(stream, schema, include_headers)
        arrays = [
            pa.repeat(pa.scalar(stream, pa.string()), n),
            pa.array(subjects[:n], pa.binary()).cast(pa.string()),
            pa.array(seqs[:n], pa.int64()),
            pa.array(self.data[:n], pa.binary()),
        ]
        if include_headers:
            if user_rows is None:
                user_rows = self._user_rows(blob, n)
            arrays.append(self._user_headers(user_rows, n))
        arrays.append(times.cast(TIMESTAMP_TYPE, safe=False))
        return pa.RecordBatch.from_arrays(arrays, schema=schema)

    def _user_rows(self, blob: bytes, n: int) -> list[int]:
        """The rows among the first `n` whose blocks carry user headers (usually none):
        one regex pass over the joined blocks."""
        blocks = self.headers[:n]
        end = sum(map(len, blocks)) + n  # each block and the b"\n" that joins it to the next
        if _USER_LINE.search(blob, 0, end) is None:
            return []
        starts = [0, *itertools.accumulate(len(b) + 1 for b in blocks)]
        return sorted(
            {bisect.bisect_right(starts, m.start()) - 1 for m in _USER_LINE.finditer(blob, 0, end)}
        )

    def _user_headers(self, rows: list[int], n: int) -> pa.Array:
        """The headers column: only `rows` (those with user headers) are parsed; compiled,
        all in one pass into the column's flat lists (every row a Spark write stored has
        its `Nats-Msg-Id`; ADR 0059)."""
        if not rows or rows[0] >= n:
            return pa.nulls(n, HEADERS_TYPE)
        if SCAN_COMPILED:
            row_offsets, keys, key_offsets, values, nulls = framescan.user_headers(
                self.headers, rows, n
            )
            try:
                items = pa.ListArray.from_arrays(
                    pa.array(key_offsets, pa.int32()),
                    pa.array(values, pa.binary()).cast(pa.string()),
                )
                return pa.MapArray.from_arrays(
                    pa.array(row_offsets, pa.int32()),
                    pa.array(keys, pa.binary()).cast(pa.string()),
                    items,
                    type=HEADERS_TYPE,
                    mask=pa.array(nulls, pa.bool_()),
                )
            except pa.ArrowInvalid:  # not UTF-8: decoded with replacement characters below
                pass
        user: list[list[tuple[str, list[str]]] | None] = [None] * n
        for row in rows:
            if row < n:
                user[row] = group_headers(parse_header_lines(self.headers[row])) or None
        return pa.array(user, HEADERS_TYPE)

    def _rows(self) -> Columns:
        """The row-by-row decode, for chunks the bulk decode does not recognise."""
        cols = Columns()
        ts = TimestampParser()
        for data, header in zip(self.data, self.headers, strict=True):
            subject, seq, user, ts_us = decode_direct_header(header, ts)
            if seq >= self.hi:
                break
            cols.subjects.append(subject)
            cols.seqs.append(seq)
            cols.data.append(data)
            cols.headers.append(group_headers(user) if user else None)
            cols.timestamps.append(ts_us)
        return cols


def decode_direct_header(
    header: bytes, ts: TimestampParser
) -> tuple[str, int, list[tuple[str, str]] | None, int]:
    """(subject, seq, user headers or None, epoch micros) of one direct-get reply."""
    msg_subject = ""
    seq = 0
    ts_us = 0
    user: list[tuple[str, str]] | None = None
    for line in header[header.find(b"\r\n") + 2 :].split(b"\r\n"):
        key, sep, value = line.partition(b":")
        if not sep:
            continue
        if key == b"Nats-Sequence":
            seq = int(value)
        elif key == b"Nats-Subject":
            msg_subject = value.strip().decode()
        elif key == b"Nats-Time-Stamp":
            ts_us = ts.micros(value.strip().decode())
        elif key not in DIRECT_HEADER_KEYS:
            if user is None:
                user = []
            user.append(
                (
                    key.strip().decode("utf-8", "replace"),
                    value.strip().decode("utf-8", "replace"),
                )
            )
    return msg_subject, seq, user, ts_us


@dataclass
class Chunk:
    columns: Columns | RawReplies
    done: bool
    next_seq: int


class _ChunkReader:
    """Common shape: open(), chunk(start) -> Chunk, close(); all on the runtime loop."""

    def __init__(self, nc: RawClient, spec: RangeRead) -> None:
        self.nc = nc
        self.spec = spec
        self.timeout_s = spec.connect.request_timeout_s
        self.ts = TimestampParser()
        self._columns = Columns()
        self._future: asyncio.Future[Chunk] | None = None
        self._last_seq = 0
        self._beyond = False
        self._progress_at = 0.0

    async def open(self) -> None:
        raise NotImplementedError

    async def chunk(self, start: int) -> Chunk:
        raise NotImplementedError

    async def close(self) -> None:
        raise NotImplementedError

    def _finish(self, done: bool) -> None:
        future = self._future
        if future is None or future.done():
            return
        done = done or self._beyond or self._last_seq + 1 >= self.spec.hi
        future.set_result(Chunk(self._columns, done, self._last_seq + 1))

    def _fail(self, exc: Exception) -> None:
        if self._future is not None and not self._future.done():
            self._future.set_exception(exc)

    def _append(
        self, subject: str, seq: int, data: bytes, user: list[tuple[str, str]] | None, ts_us: int
    ) -> None:
        self._progress_at = time.monotonic()
        if seq >= self.spec.hi:
            self._beyond = True
            return
        cols = self._columns
        cols.subjects.append(subject)
        cols.seqs.append(seq)
        cols.data.append(data)
        if self.spec.include_headers:
            cols.headers.append(group_headers(user) if user else None)
        cols.timestamps.append(ts_us)
        self._last_seq = seq

    async def _wait(self) -> Chunk:
        """The chunk, failing only when no message arrived for `requestTimeout`.

        A large chunk from a slow server may take longer than the timeout as a whole; what
        matters is that it keeps coming.
        """
        future = self._future
        assert future is not None
        self._progress_at = time.monotonic()
        while True:
            remaining = self._progress_at + self.timeout_s - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(
                    f"stream '{self.spec.stream}': no reply within {self.timeout_s}s while "
                    f"reading sequences {self.spec.lo}..{self.spec.hi - 1} "
                    "(option 'requestTimeout')"
                )
            await asyncio.wait({future}, timeout=remaining)
            if future.done():
                return future.result()


class DirectReader(_ChunkReader):
    """Batched direct gets; the replies are kept raw and decoded in bulk (`RawReplies`)."""

    async def open(self) -> None:
        self._inbox = self.nc.new_inbox()
        self._count = 0
        self._expect = b""
        self._raw = RawReplies(self.spec.hi)
        self._sub = await self.nc.raw_subscribe(self._inbox + ".*", self._on_msg)

    async def close(self) -> None:
        await self.nc.raw_unsubscribe(self._sub)

    async def chunk(self, start: int) -> Chunk:
        self._count += 1
        reply = f"{self._inbox}.{self._count}"
        self._expect = reply.encode()
        self._raw = RawReplies(self.spec.hi)
        self._last_seq = start - 1
        self._future = asyncio.get_running_loop().create_future()
        body: dict[str, Any] = {
            "seq": start,
            "batch": max(1, min(self.spec.hi - start, DIRECT_BATCH_MAX)),
            "max_bytes": DIRECT_MAX_BYTES,
        }
        if self.spec.filters:
            body["next_by_subj"] = self.spec.filters[0]
        await self.nc.publish(
            f"$JS.API.DIRECT.GET.{self.spec.stream}", json.dumps(body).encode(), reply=reply
        )
        return await self._wait()

    def _finish(self, done: bool) -> None:
        future = self._future
        if future is None or future.done():
            return
        last = self._raw.last_seq()
        if last is not None:
            self._last_seq = last
        done = done or self._last_seq + 1 >= self.spec.hi
        future.set_result(Chunk(self._raw, done, self._last_seq + 1))

    def _on_msg(self, subject: bytes, reply: bytes, data: bytes, header: bytes | None) -> None:
        if subject != self._expect:
            return  # a late reply to an abandoned request
        if header is None:
            self._fail(RuntimeError("direct get reply without headers"))
            return
        if header.startswith(HEADER_LINE):  # a message: kept raw, decoded in bulk
            self._progress_at = time.monotonic()
            raw = self._raw
            raw.data.append(data)
            raw.headers.append(header)
            return
        status = parse_status(header)
        if status is None:
            self._fail(RuntimeError(f"unexpected direct get reply header {header[:40]!r}"))
            return
        code, description = status
        if code == 204:
            pending = dict(parse_header_lines(header)).get("Nats-Num-Pending", "1")
            self._finish(done=pending == "0")
        elif code == 404:
            self._finish(done=True)
        elif code == 503:
            self._fail(
                RuntimeError(
                    f"stream '{self.spec.stream}' does not answer direct gets (503); "
                    "was allow_direct turned off while reading?"
                )
            )
        else:
            self._fail(
                RuntimeError(f"direct get on '{self.spec.stream}' failed: {code} {description}")
            )


class ConsumerReader(_ChunkReader):
    async def open(self) -> None:
        self._inbox = self.nc.new_inbox()
        self._name = f"spark_{uuid.uuid4().hex[:20]}"
        self._wanted = 0
        self._got = 0
        self._sub = await self.nc.raw_subscribe(self._inbox, self._on_msg)
        config: dict[str, Any] = {
            "ack_policy": "none",
            "deliver_policy": "by_start_sequence",
            "opt_start_seq": self.spec.lo,
            "mem_storage": True,
            "num_replicas": 1,
            "inactive_threshold": CONSUMER_INACTIVE_NS,
        }
        if len(self.spec.filters) == 1:
            config["filter_subject"] = self.spec.filters[0]
        elif self.spec.filters:
            config["filter_subjects"] = list(self.spec.filters)
        self._pending = await jsapi.create_consumer(
            self.nc, self.spec.stream, self._name, config, self.timeout_s
        )

    async def close(self) -> None:
        await self.nc.raw_unsubscribe(self._sub)
        with contextlib.suppress(Exception):  # the inactivity threshold removes it anyway
            await jsapi.delete_consumer(self.nc, self.spec.stream, self._name, self.timeout_s)

    async def chunk(self, start: int) -> Chunk:
        self._columns = Columns()
        self._last_seq = start - 1
        self._future = asyncio.get_running_loop().create_future()
        if self._pending <= 0:
            self._finish(done=True)
            return await self._wait()
        self._wanted = min(self._pending, PULL_BATCH_MAX)
        self._got = 0
        request = {"batch": self._wanted, "no_wait": True}
        await self.nc.publish(
            f"$JS.API.CONSUMER.MSG.NEXT.{self.spec.stream}.{self._name}",
            json.dumps(request).encode(),
            reply=self._inbox,
        )
        return await self._wait()

    def _on_msg(self, subject: bytes, reply: bytes, data: bytes, header: bytes | None) -> None:
        if self._future is None or self._future.done():
            return
        if header is not None:
            status = parse_status(header)
            if status is not None:
                code, description = status
                if code in (404, 408):  # nothing (more) available right now
                    self._pending = 0
                    self._finish(done=True)
                elif code != 100:  # 100 is a heartbeat
                    self._fail(
                        RuntimeError(
                            f"reader consumer on '{self.spec.stream}': {code} {description}"
                        )
                    )
                return
        tokens = reply.split(b".")
        if len(tokens) == 9:  # $JS.ACK.<stream>.<consumer>.<dlv>.<sseq>.<dseq>.<ts>.<pending>
            seq, ts_ns, pending = int(tokens[5]), int(tokens[7]), int(tokens[8])
        elif len(tokens) >= 11:  # $JS.ACK.<domain>.<hash>.<stream>.<consumer>.<dlv>.<sseq>...
            seq, ts_ns, pending = int(tokens[7]), int(tokens[9]), int(tokens[10])
        else:
            self._fail(RuntimeError(f"unexpected JetStream reply subject {reply!r}"))
            return
        user = parse_header_lines(header) if header else None
        self._append(subject.decode(), seq, data, user, ts_ns // 1000)
        self._pending = pending
        self._got += 1
        if self._beyond or pending == 0:
            self._finish(done=True)
        elif self._got >= self._wanted:
            self._finish(done=False)


def read_range(spec: RangeRead) -> Iterator[pa.RecordBatch]:
    """Yield the messages of [spec.lo, spec.hi) as Arrow batches (runs in a Spark task)."""
    if spec.hi <= spec.lo:
        return
    rt = runtime()
    schema = read_schema(spec.include_headers)
    timeout = spec.connect.request_timeout_s * 2 + 5  # for open and close

    async def open_reader() -> _ChunkReader:
        nc = await rt.client(spec.connect)
        reader: _ChunkReader = DirectReader(nc, spec) if spec.direct else ConsumerReader(nc, spec)
        await reader.open()
        return reader

    reader = rt.run(open_reader(), timeout)
    future: concurrent.futures.Future[Chunk] | None = rt.submit(reader.chunk(spec.lo))
    try:
        while future is not None:
            chunk = future.result()  # the reader times out when messages stop coming
            future = None
            if not chunk.done:
                # Fetch ahead: the loop thread receives the next chunk while Spark
                # consumes this one.
                future = rt.submit(reader.chunk(chunk.next_seq))
            if len(chunk.columns):
                yield chunk.columns.to_batch(spec.stream, schema, spec.include_headers)
    finally:
        if future is not None:
            future.cancel()  # the generator was closed early (a limit, a failure)
        rt.run(reader.close(), timeout)
