"""Fast batches (fast_batch.py): the reply subject's pattern as nats-server reads it, and
the idle timer on a stream over a memory store with a manual clock."""

from __future__ import annotations

import json
from typing import Any

import pytest

from brook.jetstream.batch import BatchLimits
from brook.jetstream.errors import ApiError
from brook.jetstream.fast_batch import FastOp, parse_reply
from brook.jetstream.models import parse_stream_config
from brook.jetstream.store.memory import MemoryStore
from brook.jetstream.stream import Stream
from tests.support.streams import Clock


@pytest.mark.parametrize(
    ("reply", "op"),
    [
        (b"in.b.5.fail.1.0.$FI", FastOp("b", 5, False, 1, 0)),
        (b"a.b.in.b.0.ok.7.4.$FI", FastOp("b", 10, True, 7, 4)),  # a flow of 0 is 10
        (b"in.b.x.fail.2.1.$FI", FastOp("b", 10, False, 2, 1)),
        (b"in.b.-3.fail.2.2.$FI", FastOp("b", 10, False, 2, 2)),
        (b"in.b.70000.fail.2.3.$FI", FastOp("b", 65535, False, 2, 3)),
        (b"in." + b"i" * 64 + b".1.fail.1.0.$FI", FastOp("i" * 64, 1, False, 1, 0)),
        (b"in..1.fail.1.0.$FI", FastOp("", 1, False, 1, 0)),
        # Sequences of 18 digits and more (fast_reply.py reads up to 18 in a machine
        # integer), up to the largest uint64 but one; leading zeros count for nothing.
        (b"in.b.1.ok.999999999999999999.1.$FI", FastOp("b", 1, True, 10**18 - 1, 1)),
        (b"in.b.1.ok.1000000000000000000.1.$FI", FastOp("b", 1, True, 10**18, 1)),
        (b"in.b.1.ok.18446744073709551614.4.$FI", FastOp("b", 1, True, 2**64 - 2, 4)),
        (b"in.b.1.ok.0000000000000000000002.1.$FI", FastOp("b", 1, True, 2, 1)),
        (b"in.b.1.ok.2.00000000000000000001.$FI", FastOp("b", 1, True, 2, 1)),
    ],
)
def test_reply_patterns_taken(reply: bytes, op: FastOp) -> None:
    assert parse_reply(reply) == op


@pytest.mark.parametrize(
    ("reply", "code"),
    [
        (b"b.1.fail.1.0.$FI", 10206),  # nothing before the batch id
        (b"in.b.1.fail.18446744073709551615.1.$FI", 10206),  # the largest uint64
        (b"in.b.1.fail.x.1.$FI", 10206),
        (b"in.b.1.fail.1.-1.$FI", 10206),
        (b"in.b.1.fail.184467440737095516150.1.$FI", 10206),  # past uint64
        (b"in.b.1.fail.1844674407370955161x.1.$FI", 10206),
        (b"in.b.1.fail.1.$FI", 10206),  # no sequence
        (b"1.$FI", 10206),
        (b"in.b.1.Fail.1.0.$FI", 10206),
        (b"in." + b"i" * 65 + b".1.fail.1.0.$FI", 10207),
    ],
)
def test_reply_patterns_refused(reply: bytes, code: int) -> None:
    with pytest.raises(ApiError) as raised:
        parse_reply(reply)
    assert raised.value.err_code == code


def test_a_batch_head_checked_once_still_answers_each_message() -> None:
    """parse_reply remembers the last batch's head (id, flow, gap mode): the messages after
    it, and those of another batch in between, still get their own sequence, op and
    refusals; a long id with a bad op is refused for the pattern first, as uncached."""
    assert parse_reply(b"in.a.5.fail.1.0.$FI") == FastOp("a", 5, False, 1, 0)
    assert parse_reply(b"in.a.5.fail.2.1.$FI") == FastOp("a", 5, False, 2, 1)
    assert parse_reply(b"in.b.7.ok.2.1.$FI") == FastOp("b", 7, True, 2, 1)
    assert parse_reply(b"in.a.5.fail.3.4.$FI") == FastOp("a", 5, False, 3, 4)
    for reply, code in (
        (b"in.a.5.fail.3.9.$FI", 10206),
        (b"in.a.5.fail.3.0.$FI", 10206),
        (b"in." + b"i" * 65 + b".1.fail.1.9.$FI", 10206),
        (b"in." + b"i" * 65 + b".1.fail.1.0.$FI", 10207),
        (b"in." + b"i" * 65 + b".1.fail.2.1.$FI", 10207),
    ):
        with pytest.raises(ApiError) as raised:
            parse_reply(reply)
        assert raised.value.err_code == code, reply


def _batched_stream(clock: Clock, limits: BatchLimits) -> tuple[Stream, list[dict[str, Any]]]:
    """A memory stream `F` allowing fast batches on `clock`, and the replies it sends."""
    acks: list[dict[str, Any]] = []
    config = {"name": "F", "subjects": ["f.>"], "storage": "memory", "allow_batched": True}
    stream = Stream(
        parse_stream_config(config, subject_name="F"),
        MemoryStore(),
        now_ns=clock,
        send_ack=lambda reply, ack: acks.append(json.loads(ack)),
        committer=None,
        created_ns=clock.now,
        batch_limits=limits,
    )
    return stream, acks


def test_an_idle_fast_batch_is_dropped_when_its_timeout_passes() -> None:
    clock = Clock()
    limits = BatchLimits()
    stream, acks = _batched_stream(clock, limits)
    stream.ingest(b"f.x", b"in.a.1.fail.1.0.$FI", None, b"1")
    assert acks == [{"type": "ack", "seq": 0, "msgs": 1}, {"type": "ack", "seq": 1, "msgs": 1}]
    assert stream.fast_batches.sweep() == clock.now + limits.timeout_ns
    clock.now += limits.timeout_ns - 1
    stream.fast_batches.timer.run()
    assert limits.fast_inflight == 1
    clock.now += 1
    stream.fast_batches.timer.run()  # nothing touched it for the timeout: dropped, silently
    assert limits.fast_inflight == 0
    assert len(acks) == 2
    stream.ingest(b"f.x", b"in.a.1.fail.2.1.$FI", None, b"2")
    assert acks[-1]["error"]["err_code"] == 10208
    assert stream.store.state().messages == 1


def test_a_message_after_the_timeout_finds_its_batch_gone_before_the_timer_fires() -> None:
    """`begin` skips the expiry check while no batch can have expired; a message coming
    the moment the oldest batch's timeout passes still finds it gone (the timer not run)."""
    clock = Clock()
    limits = BatchLimits()
    stream, acks = _batched_stream(clock, limits)
    stream.ingest(b"f.x", b"in.a.9.fail.1.0.$FI", None, b"1")
    clock.now += 10
    stream.ingest(b"f.x", b"in.b.9.fail.1.0.$FI", None, b"1")
    clock.now += limits.timeout_ns - 10
    stream.ingest(b"f.x", b"in.b.9.fail.2.1.$FI", None, b"2")  # b is not idle: goes on
    assert "error" not in acks[-1]
    stream.ingest(b"f.x", b"in.a.9.fail.2.1.$FI", None, b"2")  # a idle for the timeout
    assert acks[-1]["error"]["err_code"] == 10208
    clock.now += limits.timeout_ns - 1
    stream.ingest(b"f.x", b"in.b.9.fail.3.1.$FI", None, b"3")
    assert "error" not in acks[-1]
    assert limits.fast_inflight == 1


def test_batches_expire_in_the_order_they_were_last_touched() -> None:
    """The idle timer drops batches oldest-touched first and stops at the first one still
    live: a batch touched again after another moves behind it (`begin` skips the move
    only while the batch is the newest already)."""
    clock = Clock()
    limits = BatchLimits()
    stream, acks = _batched_stream(clock, limits)
    stream.ingest(b"f.x", b"in.a.9.fail.1.0.$FI", None, b"1")
    clock.now += 10
    stream.ingest(b"f.x", b"in.b.9.fail.1.0.$FI", None, b"1")
    clock.now += 10
    stream.ingest(b"f.x", b"in.a.9.fail.2.1.$FI", None, b"2")  # behind b now
    stream.ingest(b"f.x", b"in.a.9.fail.3.1.$FI", None, b"3")  # the newest: stays last
    assert stream.store.state().messages == 4
    clock.now += limits.timeout_ns - 10  # b idle for the timeout, a not
    stream.fast_batches.sweep()
    assert limits.fast_inflight == 1
    stream.ingest(b"f.x", b"in.a.9.fail.4.1.$FI", None, b"4")
    assert stream.store.state().messages == 5
    stream.ingest(b"f.x", b"in.b.9.fail.2.1.$FI", None, b"2")
    assert acks[-1]["error"]["err_code"] == 10208
    assert stream.store.state().messages == 5
