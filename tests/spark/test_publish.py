"""Bulk frame building and PubAck matching of the writer (ADR 0050), without Spark.

`source.publish_batches` is what a Spark write task runs; called here in this process
against Brook and nats-server alike. The frames of the bulk path are compared with the
row-by-row header encoding (`encode_headers`) that a `headers` column still takes.
"""

from __future__ import annotations

import base64
from typing import Any

import pyarrow as pa
import pytest
from tests.spark.jsutil import JetStream

from brook_spark.options import parse_write
from brook_spark.publish import Publisher, PublishError, frames_for, layout_for
from brook_spark.source import publish_batches
from brook_spark.wire import encode_headers, hpub_frame


def frames(batch: pa.RecordBatch, **kw: Any) -> list[bytes]:
    args: dict[str, Any] = {
        "default_subject": "s.default",
        "id_prefix": "w:0",
        "first_row": 5,
        "expected_stream": None,
        "max_payload": 1024,
        "reply_prefix": b"_INBOX.x.",
    }
    args.update(kw)
    return frames_for(batch, layout_for(batch.schema, None), **args)


def test_bulk_frames_are_the_row_by_row_frames() -> None:
    batch = pa.record_batch(
        {
            "data": pa.array(["héllo", None, "c"], pa.string()),
            "subject": pa.array(["s.a", None, "s.b"]),
            "msg_id": pa.array(["k1", None, "k3"]),
        }
    )
    got = frames(batch, expected_stream="ORDERS")
    ids = ["k1", "w:0:6", "k3"]
    want = [
        hpub_frame(
            subject,
            f"_INBOX.x.{5 + i}",
            encode_headers([("Nats-Msg-Id", ids[i]), ("Nats-Expected-Stream", "ORDERS")]),
            payload,
        )
        for i, (subject, payload) in enumerate(
            [("s.a", "héllo".encode()), ("s.default", b""), ("s.b", b"c")]
        )
    ]
    assert got == want
    derived = frames(pa.record_batch({"data": pa.array([b"x", b"y"])}), first_row=0)
    assert derived == [
        hpub_frame("s.default", f"_INBOX.x.{i}", encode_headers([("Nats-Msg-Id", f"w:0:{i}")]), p)
        for i, p in enumerate([b"x", b"y"])
    ]
    integer_ids = frames(pa.record_batch({"data": [b"x"], "msg_id": pa.array([7], pa.int64())}))
    assert b"Nats-Msg-Id: 7\r\n" in integer_ids[0]


def test_bulk_frames_refuse_what_the_row_path_refused() -> None:
    with pytest.raises(PublishError, match=r"row 6: payload of 2000 bytes exceeds"):
        frames(pa.record_batch({"data": [b"x", b"y" * 2000]}))
    with pytest.raises(PublishError, match="row 6 has no subject"):
        frames(
            pa.record_batch({"data": [b"x", b"y"], "subject": ["a", None]}), default_subject=None
        )
    with pytest.raises(PublishError, match=r"row 7: cannot publish to 'a\.\*'"):
        frames(pa.record_batch({"data": [b"x", b"y", b"z"], "subject": ["a", "a", "a.*"]}))
    with pytest.raises(PublishError, match="row 6: header 'Nats-Msg-Id' has a line break"):
        frames(pa.record_batch({"data": [b"x", b"y"], "msg_id": ["ok", "a\r\nB: c"]}))


def test_publish_batches_counts_stored_and_duplicate_acks(
    js: JetStream, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every PubAck, stored or duplicate, is matched by `_PUBACK` (no JSON parse)."""
    js.add_stream(name, [f"{name}.>"])
    slow: list[bytes] = []
    monkeypatch.setattr(Publisher, "_ack_slow", lambda self, frame, data, header: slow.append(data))
    options = parse_write({"servers": js.url, "subject": f"{name}.x"}, streaming=False)
    batches = [
        pa.record_batch({"data": [b"%d" % i for i in range(lo, lo + 700)]}) for lo in (0, 700)
    ]
    first = publish_batches(options, iter(batches), "job:0")
    assert (first.published, first.duplicates, first.first_seq, first.last_seq) == (
        1400,
        0,
        1,
        1400,
    )
    again = publish_batches(options, iter(batches), "job:0")  # a retried task: same ids
    assert (again.published, again.duplicates) == (0, 1400)
    assert slow == []
    assert js.state(name)["messages"] == 1400
    for seq in (1, 1400):
        msg = js.api(f"$JS.API.STREAM.MSG.GET.{name}", {"seq": seq})["message"]
        assert base64.b64decode(msg["data"]) == b"%d" % (seq - 1)
        assert f"Nats-Msg-Id: job:0:{seq - 1}\r\n".encode() in base64.b64decode(msg["hdrs"])
