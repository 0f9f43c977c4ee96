"""The bulk decode of direct-get replies (ADR 0047) against the row-by-row decode.

No Spark here: `fetch.read_range` is what a Spark task runs, called in this process against
Brook and nats-server alike. Small chunks make the replies end mid-stream and, with deleted
sequences, overshoot the range's end, which both decodes must cut off identically.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from tests.spark.jsutil import JetStream

from brook_spark import fetch
from brook_spark.options import ConnectOptions


def read(js: JetStream, stream: str, lo: int, hi: int, filters: tuple[str, ...] = ()) -> pa.Table:
    spec = fetch.RangeRead(
        connect=ConnectOptions(servers=(js.url,), request_timeout_s=10.0),
        stream=stream,
        lo=lo,
        hi=hi,
        filters=filters,
        direct=True,
        include_headers=True,
    )
    return pa.Table.from_batches(list(fetch.read_range(spec)), schema=fetch.read_schema(True))


def row_by_row(self: fetch.RawReplies, stream: str, schema: pa.Schema, include: bool) -> Any:
    return self._rows().to_batch(stream, schema, include)


def test_bulk_decode_equals_the_row_decode(
    js: JetStream, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    js.add_stream(name, [f"{name}.>"])
    messages: list[tuple[str, bytes] | tuple[str, bytes, dict[str, str]]] = []
    for i in range(60):
        subject = f"{name}.{'a' if i % 3 else 'b'}"
        if i % 5 == 0:
            messages.append((subject, b"", {"Trace": f"t-{i}", "Nats-Msg-Id": f"m{i}"}))
        else:
            messages.append((subject, b"p%d" % i))
    js.publish(messages)
    for seq in (7, 8, 30, 44):
        js.delete(name, seq)
    monkeypatch.setattr(fetch, "DIRECT_BATCH_MAX", 6)  # chunks end mid-stream
    cases = [(1, 61, ()), (3, 50, ()), (2, 45, (f"{name}.a",))]
    bulk = [read(js, name, lo, hi, f) for lo, hi, f in cases]
    monkeypatch.setattr(fetch.RawReplies, "to_batch", row_by_row)
    rows = [read(js, name, lo, hi, f) for lo, hi, f in cases]
    for got, want in zip(bulk, rows, strict=True):
        assert got.equals(want)
    stored = {m.seq: m for m in js.stored(name)}
    everything = bulk[0].to_pylist()
    assert [r["seq"] for r in everything] == sorted(stored)
    assert [(r["subject"], r["data"]) for r in everything] == [
        (stored[s].subject, stored[s].data) for s in sorted(stored)
    ]
    assert everything[0]["headers"] == [("Trace", ["t-0"]), ("Nats-Msg-Id", ["m0"])]
    assert everything[1]["headers"] is None
    assert [r["seq"] for r in bulk[1].to_pylist()] == [s for s in sorted(stored) if 3 <= s < 50]
    filtered = [s for s in sorted(stored) if 2 <= s < 45 and stored[s].subject.endswith(".a")]
    assert [r["seq"] for r in bulk[2].to_pylist()] == filtered
