"""`publish_headers.plain_publish_id`, which sends a publish down `PlainPublish.store`
(ingress.py, ADR 0062/0067), looks for what `Stream._ingest` looks for; and a stream whose
configuration asks for more than dedup and limits never takes the short path."""

from __future__ import annotations

import pytest

from brook.jetstream import counters, publish_headers, schedules
from brook.jetstream.batch import BATCH_ID
from brook.jetstream.publish_headers import MAX_HEADER_BYTES, plain_publish_id
from tests.support.streams import make


def test_names_looked_for_are_those_of_the_general_path() -> None:
    assert publish_headers._GENERAL_ONLY == (BATCH_ID, counters.INCR, schedules.PREFIX)


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        (None, ""),
        (b"", ""),
        (b"NATS/1.0\r\nNats-Msg-Id: a1\r\n\r\n", "a1"),
        (b"NATS/1.0\r\nX: 1\r\n\r\n", ""),
        (b"NATS/1.0\r\nX: Nats-Incr\r\n\r\n", None),
        (b"NATS/1.0\r\nNats-Batch-Id: b\r\n\r\n", None),
        (b"NATS/1.0\r\nNats-Schedule: @at 2020-01-01T00:00:00Z\r\n\r\n", None),
        (b"NATS/1.0\r\nNats-Rollup: sub\r\n\r\n", None),
        (b"NATS/1.0\r\nX: " + b"y" * MAX_HEADER_BYTES + b"\r\n\r\n", None),
    ],
)
def test_plain_publish_id(header: bytes | None, expected: str | None) -> None:
    assert plain_publish_id(header) == expected


@pytest.mark.parametrize(
    "config",
    [
        {"allow_msg_counter": True},
        {"retention": "interest"},
        {"allow_msg_schedules": True},
    ],
)
def test_streams_that_ask_for_more_take_the_general_path(config: dict[str, object]) -> None:
    stream, _clock, _acks = make(**config)
    assert stream.plain is None
    plain, _clock, _acks = make()
    assert plain.plain is not None
