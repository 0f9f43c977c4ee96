"""Atomic batches on a stream over a memory store with a manual clock (batch.py): the
limits (timeout, batches in flight per stream and per server, batch size), what turning
`allow_atomic` off does, and what a commit tells the consumers."""

from __future__ import annotations

import json
from typing import Any
from unittest.mock import ANY

from brook.jetstream.batch import BatchLimits
from brook.jetstream.models import parse_stream_config
from brook.jetstream.store.memory import MemoryStore
from brook.jetstream.stream import Stream
from tests.support.streams import Clock


def _make(
    limits: BatchLimits,
    clock: Clock | None = None,
    advisories: list[tuple[bytes, dict[str, Any]]] | None = None,
    **config: Any,
) -> tuple[Stream, Clock, list[bytes]]:
    """Stream "S" with its replies in `acks` and its advisories in `advisories`."""
    clock = clock or Clock()
    acks: list[bytes] = []

    def publish(subject: bytes, payload: bytes) -> None:
        if subject == b"_INBOX.r":
            acks.append(payload)
        elif advisories is not None:
            advisories.append((subject, json.loads(payload)))

    cfg = parse_stream_config(
        {"name": "S", "subjects": ["s.>"], "storage": "memory", "allow_atomic": True, **config},
        subject_name="S",
    )
    stream = Stream(
        cfg,
        MemoryStore(),
        now_ns=clock,
        send_ack=publish,
        committer=None,
        created_ns=clock.now,
        batch_limits=limits,
    )
    return stream, clock, acks


def _send(stream: Stream, batch: str, seq: int, commit: str | None = None) -> None:
    lines = [f"Nats-Batch-Id: {batch}", f"Nats-Batch-Sequence: {seq}"]
    if commit is not None:
        lines.append(f"Nats-Batch-Commit: {commit}")
    header = ("NATS/1.0\r\n" + "".join(f"{line}\r\n" for line in lines) + "\r\n").encode()
    stream.ingest(b"s.a", b"_INBOX.r", header, b"%d" % seq)


def _code(ack: bytes) -> int:
    return int(json.loads(ack)["error"]["err_code"])


def test_a_batch_idle_past_its_timeout_is_dropped() -> None:
    limits = BatchLimits()
    stream, clock, acks = _make(limits)
    _send(stream, "a", 1)
    clock.now += limits.timeout_ns - 1
    _send(stream, "a", 2)  # in time: the timeout starts again
    clock.now += limits.timeout_ns
    _send(stream, "a", 3, "1")
    assert acks[:2] == [b"", b""]
    assert _code(acks[2]) == 10176
    assert stream.store.state().messages == 0
    assert limits.inflight == 0


def _abandoned(stream: str, batch: str, reason: str) -> tuple[bytes, dict[str, Any]]:
    body = {
        "type": "io.nats.jetstream.advisory.v1.stream_batch_abandoned",
        "id": ANY,
        "timestamp": ANY,
        "stream": stream,
        "batch": batch,
        "reason": reason,
    }
    return b"$JS.EVENT.ADVISORY.STREAM.BATCH_ABANDONED." + stream.encode(), body


def test_the_idle_timer_abandons_a_batch_when_its_timeout_passes() -> None:
    limits = BatchLimits()
    advisories: list[tuple[bytes, dict[str, Any]]] = []
    stream, clock, acks = _make(limits, advisories=advisories)
    _send(stream, "a", 1)
    clock.now += limits.timeout_ns // 2
    _send(stream, "b", 1)
    start = clock.now - limits.timeout_ns // 2
    assert stream.batches.sweep() == start + limits.timeout_ns  # when the timer fires
    clock.now = start + limits.timeout_ns - 1
    stream.batches.timer.run()
    assert advisories == []
    assert limits.inflight == 2
    clock.now += 1
    stream.batches.timer.run()  # "a" idle for its timeout; nothing touched it
    assert advisories == [_abandoned("S", "a", "timeout")]
    assert limits.inflight == 1
    assert stream.batches.sweep() == clock.now + limits.timeout_ns // 2  # "b" is next
    _send(stream, "a", 2, "1")  # too late: an unknown batch, announced once only
    assert _code(acks[-1]) == 10176
    assert len(advisories) == 1
    clock.now += limits.timeout_ns
    assert stream.batches.sweep() is None
    assert advisories[1:] == [_abandoned("S", "b", "timeout")]
    assert stream.store.state().messages == 0
    assert limits.inflight == 0


def test_gaps_and_oversized_batches_are_announced_other_errors_are_not() -> None:
    advisories: list[tuple[bytes, dict[str, Any]]] = []
    stream, _, acks = _make(BatchLimits(size_max=2), advisories=advisories)
    _send(stream, "gap", 1)
    _send(stream, "gap", 3)
    _send(stream, "eob", 1, "eob")
    _send(stream, "big", 1)
    _send(stream, "big", 2)
    _send(stream, "big", 3)
    _send(stream, "bad", 1)
    _send(stream, "bad", 2, "yes")  # an invalid commit: dropped, not announced
    _send(stream, "unknown", 2)
    assert [_code(ack) for ack in acks if ack] == [10176, 10176, 10199, 10200, 10176]
    assert advisories == [
        _abandoned("S", "gap", "incomplete"),
        _abandoned("S", "eob", "incomplete"),
        _abandoned("S", "big", "large"),
    ]
    assert advisories[0][1]["timestamp"] == "2023-11-14T22:13:20Z"  # the stream's clock


def test_batches_in_flight_are_bounded_per_stream_and_per_server() -> None:
    limits = BatchLimits(inflight_per_stream=2, inflight_total=3)
    one, _, acks_one = _make(limits)
    two, _, acks_two = _make(limits)
    _send(one, "a", 1)
    _send(one, "b", 1)
    _send(one, "c", 1)
    assert _code(acks_one[2]) == 10210
    _send(two, "a", 1)
    _send(two, "b", 1)
    assert acks_two[0] == b""
    assert _code(acks_two[1]) == 10210
    _send(one, "a", 2, "1")  # a commit frees its place
    _send(two, "b", 1)
    assert acks_two[2] == b""


def test_a_batch_larger_than_the_limit_is_refused_whole() -> None:
    stream, _, acks = _make(BatchLimits(size_max=2))
    _send(stream, "a", 1)
    _send(stream, "a", 2)
    _send(stream, "a", 3, "1")
    assert json.loads(acks[2])["error"]["description"] == "atomic publish batch is too large: 2"
    _send(stream, "b", 1)
    _send(stream, "b", 2)
    _send(stream, "b", 3, "eob")  # the end marker does not count
    assert json.loads(acks[5]) == {"stream": "S", "seq": 2, "batch": "b", "count": 2}


def _config(**extra: Any) -> Any:
    body = {"name": "S", "subjects": ["s.>"], "storage": "memory", **extra}
    return parse_stream_config(body, subject_name="S")


def test_turning_atomic_publish_off_drops_staged_batches() -> None:
    limits = BatchLimits()
    stream, _, acks = _make(limits)
    _send(stream, "a", 1)
    assert limits.inflight == 1
    stream.reconfigure(_config())
    assert limits.inflight == 0
    stream.reconfigure(_config(allow_atomic=True))
    _send(stream, "a", 2, "1")
    assert _code(acks[1]) == 10176


def test_a_closed_streams_batches_no_longer_count() -> None:
    limits = BatchLimits(inflight_total=1)
    one, _, _ = _make(limits)
    two, _, acks = _make(limits)
    _send(one, "a", 1)
    one.close()  # deleted
    _send(two, "b", 1)
    assert acks == [b""]


def test_idle_batches_of_other_streams_make_room_at_the_servers_limit() -> None:
    limits = BatchLimits(inflight_total=1)
    one, clock, _ = _make(limits)
    two, _, acks = _make(limits, clock)
    _send(one, "a", 1)
    clock.now += limits.timeout_ns
    _send(two, "b", 1)
    assert acks == [b""]
    assert limits.inflight == 1


def test_a_commit_tells_the_consumers_of_every_message_it_stored() -> None:
    stream, _, _ = _make(BatchLimits())
    told: list[list[tuple[str, int]]] = []
    stream.on_markers = told.append
    _send(stream, "a", 1)
    _send(stream, "a", 2)
    assert told == []
    _send(stream, "a", 3, "1")
    assert told == [[("s.a", 1), ("s.a", 2), ("s.a", 3)]]
